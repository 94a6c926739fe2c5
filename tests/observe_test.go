package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestLogs: a mount logs one structured line per commit (version, chunks written and
// deduplicated, bytes, time), and -o debug adds a trace of every FUSE operation, which a
// mount without it does not print.
func TestLogs(t *testing.T) {
	commitLine := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=committed version=logged base=v4 dataset=x written=1 ahead=0 reused=0 unmapped=0 bytes=\d+ elapsed=\S+`)
	for _, tc := range []struct {
		name  string
		opts  []string
		trace bool
	}{
		{"default", []string{"rw,commit_name=logged"}, false},
		{"debug", []string{"rw,debug,commit_name=logged"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, "testdata/fixtures/basic_1d.h5")
			m := mount(t, file, tc.opts...)
			f, err := os.OpenFile(filepath.Join(m.Dir, "versions/v4/x"), os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(raw([]int64{7}), 0)
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
			m.unmount(t)
			log := m.stderr.String()
			require.Regexp(t, commitLine, log)
			require.Len(t, commitLine.FindAllString(log, -1), 1, "one line per commit:\n%s", log)
			for _, op := range []string{"LOOKUP", "OPEN", "WRITE", "FSYNC", "RELEASE"} {
				traced := regexp.MustCompile(`(?m)^.*rx \d+: ` + op + `\b`).MatchString(log)
				require.Equal(t, tc.trace, traced, "%s traced:\n%s", op, log)
			}
		})
	}
}
