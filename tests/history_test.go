package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// branchedFile copies basic_1d.h5 (v1 <- v2 <- v3 <- v4) and commits b1 on top of v2
// through a read-write mount (writing versions/v2/x), so the file has a branch.
func branchedFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "branched.h5")
	copyFile(t, fixturePath("basic_1d.h5"), file)
	m := mount(t, file, "rw,commit_name=b1")
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions", "v2", "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{9, 0, 0, 0, 0, 0, 0, 0}, 8) // x[1] := 9
	require.NoError(t, err)
	require.NoError(t, f.Close())
	m.unmount(t)
	return file
}

// TestLogAll: every version with its branches, as git log --all --graph --oneline draws
// them; the plain log still follows the current version's ancestry.
func TestLogAll(t *testing.T) {
	file := branchedFile(t)
	out, stderr, code := vh5fsRun(t, "log", "--all", file)
	require.Equal(t, 0, code, stderr)
	ts := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\+0000`)
	require.Equal(t, `* b1  TS  1 changed (current)
| * v4  2024-01-01 03:00:00.000000+0000  1 changed
| * v3  2024-01-01 02:00:00.000000+0000  1 changed
|/
* v2  2024-01-01 01:00:00.000000+0000  1 changed
* v1  2024-01-01 00:00:00.000000+0000  1 changed
`, strings.Replace(out, ts.FindString(out), "TS", 1))

	out, _, code = vh5fsRun(t, "log", "--all", "-n2", file)
	require.Equal(t, 0, code)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2)

	out, _, code = vh5fsRun(t, "log", "--oneline", file)
	require.Equal(t, 0, code)
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		names = append(names, strings.Fields(l)[0])
	}
	require.Equal(t, []string{"b1", "v2", "v1"}, names, "log without --all: the current version's ancestry")

	_, stderr, code = vh5fsRun(t, "log", "--all", file, "v2")
	require.Equal(t, 2, code)
	require.Equal(t, "vh5fs: log: --all shows every version: give no VERSION or --at; see 'vh5fs help log'", oneLine(t, stderr))
}
