package commit

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/internal/syncbuf"
	"github.com/vh5fs/vh5fs/versions"
)

// captureLog collects the default logger's output for one test.
func captureLog(t *testing.T) *syncbuf.Buffer {
	l := &syncbuf.Buffer{}
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return l
}

// stageByte is a change of version's ds that writes b over its first element.
func stageByte(t *testing.T, f *versions.File, version, ds string, b byte) Change {
	t.Helper()
	d, err := f.Dataset(versions.VersionsGroup + "/" + version + "/" + ds)
	require.NoError(t, err)
	arr, err := NewStaged(d)
	require.NoError(t, err)
	_, err = arr.WriteAt(bytes.Repeat([]byte{b}, arr.ItemSize()), 0, d.ChunkSource())
	require.NoError(t, err)
	return Change{Base: version, Dataset: ds, Array: arr}
}

// TestFollowHead: a FollowHead change whose base is no longer current goes on top of the
// current version when that holds the change's dataset as the base does, and is a sibling
// off its base, with a warning naming both, when the head changed the dataset or lacks it.
// nested's history: base -> added (adds sensors/south/level) -> dropped (drops top), which
// is current.
func TestFollowHead(t *testing.T) {
	const level, phase = "sensors/south/level", "phase"
	tests := []struct {
		name    string
		base    string // the change's base
		first   string // dataset that a commit on the current version changes first ("": none)
		dataset string // the change's dataset
		follow  bool
		onHead  bool // want prev_version = the head, else = base
	}{
		{"head changed another dataset", "dropped", level, phase, true, true},
		{"head changed the same dataset", "dropped", level, level, true, false},
		{"not following", "dropped", level, phase, false, false},
		{"base still current", "dropped", "", phase, true, true},
		{"head has the dataset as the base has it", "added", "", level, true, true},
		{"head lacks the dataset", "added", "", "top", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureLog(t)
			file := fixture.Copy(t, fixture.Dir()+"/nested.h5")
			f, c := openCommitter(t, file, Options{})
			read := func(version, ds string) []byte {
				t.Helper()
				d, err := f.Dataset(versions.VersionsGroup + "/" + version + "/" + ds)
				require.NoError(t, err)
				b := make([]byte, d.Size())
				_, err = d.ReadAt(b, 0)
				require.NoError(t, err)
				return b
			}
			stage := func(version, ds string, b byte) Change { return stageByte(t, f, version, ds, b) }

			// Staged before the head moves, as a handle opened on the base would be.
			ch := stage(tc.base, tc.dataset, 0x42)
			ch.FollowHead = tc.follow
			head, err := f.CurrentVersion()
			require.NoError(t, err)
			if tc.first != "" {
				res, err := c.Commit(stage(head, tc.first, 0x17))
				require.NoError(t, err)
				head = res.Name
			}
			want := read(tc.base, tc.dataset)
			copy(want, bytes.Repeat([]byte{0x42}, ch.Array.ItemSize()))

			res, err := c.Commit(ch)
			require.NoError(t, err)
			prev := tc.base
			if tc.onHead {
				prev = head
			}
			require.Equal(t, prev, res.Base)
			v, ok, err := f.Version(res.Name)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, prev, v.PrevVersion)
			cur, err := f.CurrentVersion()
			require.NoError(t, err)
			require.Equal(t, res.Name, cur)
			require.Equal(t, want, read(res.Name, tc.dataset))
			if tc.first != "" && tc.first != tc.dataset {
				// The new version carries its parent's copy of the head's change.
				require.Equal(t, read(prev, tc.first), read(res.Name, tc.first))
			}
			paths, err := f.DatasetPaths(res.Name)
			require.NoError(t, err)
			wantPaths, err := f.DatasetPaths(prev)
			require.NoError(t, err)
			require.ElementsMatch(t, wantPaths, paths, "the parent's tree")

			warned := strings.Contains(logs.String(), "committed a sibling")
			require.Equal(t, tc.follow && !tc.onHead, warned, "log: %s", logs)
			if warned {
				require.Contains(t, logs.String(), "base="+tc.base)
				require.Contains(t, logs.String(), "current="+head)
				require.Contains(t, logs.String(), "version="+res.Name)
			}
		})
	}
}
