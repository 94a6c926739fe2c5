package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/fsck"
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

// TestSpillCommit: with stage_mem=1M, writing 24 MiB over a version, the edge chunk first
// (which the commit writes through libhdf5: no chunk staged after it can go to its
// raw_data slot ahead of the commit), spills the staged chunks to a file beside the HDF5 file
// (never visible in its directory), the commit writes them byte-identically (h5py reads
// back what was written; the file passes the spec checker), and the spill file is emptied
// once they are committed.
func TestSpillCommit(t *testing.T) {
	const size = 24<<20 + 8<<10 // the last chunk is an edge chunk of 8 KiB
	file := makeFloats(t, t.TempDir(), size)
	m := mount(t, file, "rw,stage_mem=1M")

	want := make([]byte, size)
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(want[i:], math.Float64bits(0.25+float64(i)))
	}
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions/v1/data"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(want[24<<20:], 24<<20) // staged first, evicted first
	require.NoError(t, err)
	for off := 0; off < 24<<20; off += 1 << 20 {
		_, err := f.WriteAt(want[off:off+1<<20], int64(off))
		require.NoError(t, err)
	}
	spills := spillFiles(t, m.cmd.Process.Pid, file)
	require.Len(t, spills, 1, "one spill file, open and unnamed")
	for _, n := range spills {
		require.GreaterOrEqual(t, n, int64(size-2<<20), "all but about the budget spilled")
	}
	names, err := os.ReadDir(filepath.Dir(file))
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

	checkCommitted(t, file, want)
}

// TestSinkCommit: with stage_mem=1M, 24 MiB written over a version in whole chunks go to
// their raw_data slots in the HDF5 file as the writes evict them (the spill file stays
// empty), yet nothing durable changes before fsync: h5py, reading the file meanwhile,
// finds the versions as they were. fsync commits the change, finding those chunks in
// place, and h5py and the spec checker read the new version as written. (A writer of its
// own holds the file open: a fork of the test process would close an inherited copy of
// the descriptor at exec, and that close commits.) The writes go over v0, whose chunks lie
// in raw_data in grid order: over v1, whose chunk 0 lies in the last slot, the commit
// appends chunk 0 last (versioned-hdf5's order), and a sink, which takes chunks in the
// order they are written, finds none in place.
func TestSinkCommit(t *testing.T) {
	const size = 24 << 20
	file := makeFloats(t, t.TempDir(), size)
	before, err := os.Stat(file)
	require.NoError(t, err)
	was := run(t, python(t), "-c", durableState, file)
	m := mount(t, file, "rw,stage_mem=1M")

	want := make([]byte, size)
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(want[i:], math.Float64bits(0.75+float64(i)))
	}
	writer := holdWriter(t, filepath.Join(m.Dir, "versions/v0/data"), want)
	for _, n := range spillFiles(t, m.cmd.Process.Pid, file) {
		require.Zero(t, n, "nothing spilled to the spill file")
	}
	grown, err := os.Stat(file)
	require.NoError(t, err)
	require.GreaterOrEqual(t, grown.Size()-before.Size(), int64(size-2<<20), "the chunks are in the HDF5 file")
	require.Equal(t, was, run(t, python(t), "-c", durableState, file), "h5py finds the versions as they were")

	require.NoError(t, writer.finish(), "fsync and close")
	m.logged(t, `committed .* written=384 ahead=3[5-8][0-9] `) // the commit found the chunks in place
	got, err := os.ReadFile(filepath.Join(m.Dir, "current/data"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "current version reads back what was written")
	m.unmount(t)

	checkCommitted(t, file, want)
}

// TestSinkWithinBudget: under the default stage_mem (32 MiB), 24 MiB written over a version
// in whole chunks still go to their raw_data slots once 4 MiB of later chunks have
// followed them, so the commit finds most of them in place; h5py reads the version as
// written. The writes go over v0, whose chunks lie in grid order (see TestSinkCommit).
func TestSinkWithinBudget(t *testing.T) {
	const size = 24 << 20
	file := makeFloats(t, t.TempDir(), size)
	m := mount(t, file, "rw")
	want := make([]byte, size)
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(want[i:], math.Float64bits(0.25+float64(i)))
	}
	require.NoError(t, holdWriter(t, filepath.Join(m.Dir, "versions/v0/data"), want).finish(), "fsync and close")
	match := m.logged(t, `committed .* written=384 ahead=([0-9]+) `)
	ahead, err := strconv.Atoi(match[1])
	require.NoError(t, err)
	t.Logf("%d of 384 chunks in place before the commit", ahead)
	// 384 chunks; the last 64 (4 MiB) and those whose hashes were still being made stay in
	// memory.
	require.GreaterOrEqual(t, ahead, 200, "chunks written ahead of the commit")
	require.LessOrEqual(t, ahead, 384-64)
	m.unmount(t)

	checkCommitted(t, file, want)
}

// makeFloats makes dir/data.h5: two versions of a float64 dataset "data" of size bytes in
// chunks of 64 KiB.
func makeFloats(t *testing.T, dir string, size int) string {
	t.Helper()
	file := filepath.Join(dir, "data.h5")
	run(t, python(t), "py/make_versioned.py", file, "--shape", strconv.Itoa(size/8), "--chunks", "8192", "--versions", "2")
	return file
}

// checkCommitted: h5py reads the current version's "data" of file as want, and the file
// passes the spec checker.
func checkCommitted(t *testing.T, file string, want []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "h5py.bin")
	run(t, python(t), "-c", `import sys, h5py
f = h5py.File(sys.argv[1], "r")
cur = f["_version_data/versions"].attrs["current_version"]
cur = cur.decode() if isinstance(cur, bytes) else cur
f["_version_data/versions"][cur]["data"][()].astype("<f8").tofile(sys.argv[2])`, file, out)
	viaH5py, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, viaH5py), "h5py reads the committed version as written")
	checkFile(t, file)
}

// heldWriter is a process of its own that holds a file of a mount open, with data written,
// until finish has it fsync and close the file.
type heldWriter struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// holdWriter writes data over path in 1 MiB writes from a process of its own and returns
// once they are done, the file still open.
func holdWriter(t *testing.T, path string, data []byte) *heldWriter {
	src := filepath.Join(t.TempDir(), "new.bin")
	require.NoError(t, os.WriteFile(src, data, 0o600))
	cmd := exec.Command(python(t), "-c", `import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
data = open(sys.argv[2], "rb").read()
for off in range(0, len(data), 1 << 20):
    os.pwrite(fd, data[off:off + (1 << 20)], off)
print("written", flush=True)
sys.stdin.readline()
os.fsync(fd)
os.close(fd)`, path, src)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "written\n", line)
	return &heldWriter{cmd: cmd, stdin: stdin}
}

// finish has the writer fsync and close the file, and waits for it.
func (w *heldWriter) finish() error {
	if _, err := w.stdin.Write([]byte("\n")); err != nil {
		return err
	}
	return w.cmd.Wait()
}

// TestSinkCrash: the daemon killed (SIGKILL) with chunks written to their raw_data slots
// and not committed leaves the file as it was: before any repair, h5py reads the same
// versions and data and fsck finds nothing wrong; the next read-write mount commits on
// top, over those slots, and the file checks clean.
func TestSinkCrash(t *testing.T) {
	const size = 8 << 20
	file := makeFloats(t, t.TempDir(), size)
	was := run(t, python(t), "-c", durableState, file)
	m := mount(t, file, "rw,stage_mem=1M")
	data := bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, size/8) // 1.0 as <f8
	holdWriter(t, filepath.Join(m.Dir, "versions/v1/data"), data)
	require.NoError(t, m.cmd.Process.Signal(syscall.SIGKILL))
	m.wait(t)
	exec.Command("fusermount3", "-uz", m.Dir).Run()

	require.Equal(t, was, run(t, python(t), "-c", durableState, file), "h5py finds the versions as they were")
	findings, err := fsck.Check(file)
	require.NoError(t, err)
	require.Empty(t, findings, fsck.Summary(findings))

	m = mount(t, file, "rw")
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i % 251)
	}
	require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "versions/v1/data"), want, 0))
	require.True(t, bytes.Equal(want, readAll(t, filepath.Join(m.Dir, "current/data"))))
	m.unmount(t)
	checkFile(t, file)
}

// durableState prints a file's current version, its versions and the first 4 KiB of the
// current version's data, as h5py reads them (without the lock a read-write mount holds).
const durableState = `import sys, h5py
f = h5py.File(sys.argv[1], "r", locking=False)
vs = f["_version_data/versions"]
cur = vs.attrs["current_version"]
cur = cur.decode() if isinstance(cur, bytes) else cur
print(cur, sorted(vs.keys()), vs[cur]["data"][:4096].tobytes().hex())`

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
	file := makeFloats(t, dir, size)
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
