package commit_test

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/internal/procstatus"
	"github.com/vh5fs/vh5fs/versions"
)

// TestCommitsKeepNoMemory: committing into a dataset of 10,000 chunks, again and again,
// leaves the process no larger once it is idle. When libhdf5 created the mappings, it kept
// each new virtual dataset's decoded mapping list (about 6 KiB a mapping) in its metadata
// cache until the file closed, and glibc kept the ~240 MB that creating it took: RSS grew
// by 450 MB over these commits and stayed there. (h5 now writes lists this long itself.)
func TestCommitsKeepNoMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 10,000-chunk file")
	}
	path := filepath.Join(t.TempDir(), "f.h5")
	out, err := exec.Command("/usr/bin/python3", "../tests/py/make_versioned.py", path,
		"--shape", "1280000", "--chunks", "128").CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := versions.OpenRW(path)
	require.NoError(t, err)
	defer f.Close()
	c, err := commit.Open(f, commit.Options{})
	require.NoError(t, err)
	defer c.Close()

	base := "v0"
	debug.FreeOSMemory() // Go's own garbage aside
	before := rss(t)
	for i := range 5 {
		d, err := f.Dataset(versions.VersionsGroup + "/" + base + "/data")
		require.NoError(t, err)
		arr, err := commit.NewStaged(d)
		require.NoError(t, err)
		row := make([]byte, 128*8)
		row[0] = byte(i + 1)
		_, err = arr.WriteAt(row, int64(i)*int64(len(row)), d.ChunkSource())
		require.NoError(t, err)
		res, err := c.Commit(commit.Change{Base: base, Dataset: "data", Array: arr})
		require.NoError(t, err)
		base = res.Name
	}
	// h5 hands the memory back once no commit has come for a second.
	var now int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		debug.FreeOSMemory()
		if now = rss(t); now-before < 100<<10 || time.Now().After(deadline) {
			break
		}
	}
	require.Less(t, now-before, int64(100<<10), "RSS %d KiB before the commits, %d KiB 10 s after", before, now)
}

// rss is the process's resident set size in KiB.
func rss(t *testing.T) int64 {
	kb, err := procstatus.KiB("self", "VmRSS")
	if err != nil {
		t.Skip(err)
	}
	return kb
}
