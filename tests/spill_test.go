package tests

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// spillFiles lists the daemon's open spill files (unnamed or unlinked files beside file)
// with their sizes.
func spillFiles(t *testing.T, pid int, file string) map[string]int64 {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(target, filepath.Dir(file)+"/") || !strings.HasSuffix(target, "(deleted)") {
			continue
		}
		st, err := os.Stat(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[target] = st.Size()
	}
	return out
}

// TestSpillCommit: with stage_mem=1M, writing 24 MiB over a version spills the staged
// chunks to a file beside the HDF5 file (never visible in its directory), the commit
// writes them byte-identically (h5py reads back what was written; the file passes the
// spec checker), and the spill file is emptied once they are committed.
func TestSpillCommit(t *testing.T) {
	const size = 24 << 20
	dir := t.TempDir()
	file := filepath.Join(dir, "data.h5")
	run(t, python(t), "py/make_versioned.py", file, "--shape", strconv.Itoa(size/8), "--chunks", "8192", "--versions", "2")
	m := mount(t, file, "rw,stage_mem=1M")

	want := make([]byte, size)
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(want[i:], math.Float64bits(0.25+float64(i)))
	}
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions/v1/data"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	for off := 0; off < size; off += 1 << 20 {
		_, err := f.WriteAt(want[off:off+1<<20], int64(off))
		require.NoError(t, err)
	}
	spills := spillFiles(t, m.cmd.Process.Pid, file)
	require.Len(t, spills, 1, "one spill file, open and unnamed")
	for _, n := range spills {
		require.GreaterOrEqual(t, n, int64(size-2<<20), "all but about the budget spilled")
	}
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, names, 1, "nothing but the HDF5 file beside it")

	require.NoError(t, f.Sync())
	for _, n := range spillFiles(t, m.cmd.Process.Pid, file) {
		require.Zero(t, n, "the spill file is emptied after the commit")
	}
	got, err := os.ReadFile(filepath.Join(m.Dir, "current/data"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "current version reads back what was written")
	require.NoError(t, f.Close())
	m.unmount(t)

	out := filepath.Join(dir, "h5py.bin")
	run(t, python(t), "-c", `import sys, h5py
f = h5py.File(sys.argv[1], "r")
cur = f["_version_data/versions"].attrs["current_version"]
cur = cur.decode() if isinstance(cur, bytes) else cur
f["_version_data/versions"][cur]["data"][()].astype("<f8").tofile(sys.argv[2])`, file, out)
	viaH5py, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, viaH5py), "h5py reads the committed version as written")
	require.NoError(t, os.Remove(out))
	checkFile(t, file)
}

// TestSpillDiskFull: when the spill file's disk is full, write(2) fails with ENOSPC and
// the daemon logs why; what was accepted before stays staged, and once there is room again
// fsync commits it.
func TestSpillDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=12m"); err != nil {
		t.Skipf("needs root to mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	const size = 2 << 20
	file := filepath.Join(dir, "data.h5")
	run(t, python(t), "py/make_versioned.py", file, "--shape", strconv.Itoa(size/8), "--chunks", "8192", "--versions", "2")
	m := mount(t, file, "rw,stage_mem=0")
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(dir, &st))
	// Leave about 1 MiB free: the first writes spill, a later one finds the disk full.
	filler := filepath.Join(dir, "filler")
	require.NoError(t, os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-1<<20), 0o600))

	f, err := os.OpenFile(filepath.Join(m.Dir, "versions/v1/data"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	want := make([]byte, size)
	copy(want, readAll(t, filepath.Join(m.Dir, "versions/v1/data")))
	var werr error
	accepted := 0
	for off := 0; off < size && werr == nil; off += 256 << 10 {
		p := make([]byte, 256<<10)
		for i := range p {
			p[i] = byte(off>>18) + 1
		}
		if _, werr = f.WriteAt(p, int64(off)); werr == nil {
			copy(want[off:], p)
			accepted++
		}
	}
	require.ErrorIs(t, werr, syscall.ENOSPC, "the spill file's disk is full")
	require.Positive(t, accepted)

	require.NoError(t, os.Remove(filler))
	require.NoError(t, f.Sync(), "the accepted writes commit once there is room")
	require.True(t, bytes.Equal(want, readAll(t, filepath.Join(m.Dir, "current/data"))))
	require.NoError(t, f.Close())
	m.unmount(t) // the daemon's log is complete once it has exited
	require.Contains(t, m.stderr.String(), "write failed")
	require.Contains(t, m.stderr.String(), "no space left on device")
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
