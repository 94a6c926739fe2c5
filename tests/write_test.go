package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/fsck"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// checkFile runs the spec section 10 checker on a file vh5fs committed to.
func checkFile(t *testing.T, file string) {
	t.Helper()
	findings, err := fsck.Check(file)
	require.NoError(t, err)
	require.Empty(t, findings, fsck.Summary(findings))
}

// TestGoldenThroughMount: each golden edit's byte_ops applied through a read-write mount
// and committed with fsync yields the version versioned-hdf5 committed: same data, same
// appended hash rows and slots, same mappings.
func TestGoldenThroughMount(t *testing.T) {
	edits, err := fixture.Edits()
	require.NoError(t, err)
	for _, e := range edits {
		t.Run(e.Name, func(t *testing.T) {
			file := fixture.Copy(t, e.Before)
			from, err := conform.Largest(file, e.BaseVersion, e.Dataset)
			require.NoError(t, err)
			m := mount(t, file, "rw,commit_name=golden")
			f, err := os.OpenFile(filepath.Join(m.Dir, "versions", e.BaseVersion, e.Dataset), os.O_RDWR, 0)
			require.NoError(t, err)
			applyByteOps(t, f, e.ByteOps)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
			target, err := os.Readlink(filepath.Join(m.Dir, "current"))
			require.NoError(t, err)
			require.Equal(t, "versions/golden", target)
			m.unmount(t)

			got, err := conform.Read(file, "golden", e.Dataset, from)
			require.NoError(t, err)
			want, err := conform.Read(e.After, e.NewVersion, e.Dataset, from)
			require.NoError(t, err)
			require.Empty(t, conform.Diff(got, want))
			checkFile(t, file)
		})
	}
}

// model tracks what each version of one 1-D int64 dataset must hold.
type model struct {
	t    *testing.T
	file string
	want map[string][]int64 // version -> values
	prev map[string]string
}

func ints(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func raw(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// verify reads every committed version with h5py and compares with the model, then runs
// the invariant checker.
func (md *model) verify() {
	t := md.t
	out, err := exec.Command(python(t), "py/version_digests.py", md.file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if f[0] == "current" || f[2] != "x" {
			continue
		}
		want, ok := md.want[f[0]]
		if !ok {
			continue // a version from the fixture itself
		}
		sum := sha256.Sum256(raw(want))
		require.Equal(t, hex.EncodeToString(sum[:]), f[3], "h5py's read of version %s", f[0])
		require.Equal(t, md.prev[f[0]], f[1], "prev_version of %s\n%s", f[0], out)
		seen[f[0]] = true
	}
	require.Len(t, seen, len(md.want), "h5py saw every committed version: %s", out)
	checkFile(t, md.file)
}

func currentVersion(t *testing.T, mnt string) string {
	target, err := os.Readlink(filepath.Join(mnt, "current"))
	require.NoError(t, err)
	return strings.TrimPrefix(target, "versions/")
}

func readInts(t *testing.T, path string) []int64 {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return ints(b)
}

// TestWrites drives a read-write mount of basic_1d (int64, chunks of 4, fill -1) through
// unaligned writes, writes past the end, truncates, shell redirects, memmap and two
// writers, keeping a model of every version, and checks each with h5py and the checker.
func TestWrites(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/basic_1d.h5")
	m := mount(t, file, "rw")
	md := &model{t: t, file: file, want: map[string][]int64{}, prev: map[string]string{}}
	base := []int64{0, 1, 2, 3, 40, 555} // v4
	v4 := filepath.Join(m.Dir, "versions/v4/x")
	require.Equal(t, base, readInts(t, v4))
	commitAs := func(prev string, want []int64) string {
		cur := currentVersion(t, m.Dir)
		require.NotEqual(t, prev, cur, "a new version is current")
		md.want[cur] = want
		md.prev[cur] = prev
		require.Equal(t, want, readInts(t, filepath.Join(m.Dir, "versions", cur, "x")))
		require.Equal(t, base, readInts(t, v4), "v4 never changes")
		return cur
	}

	// An unaligned write that splits elements, read back on the same handle before the
	// commit; another handle on v4 does not see it.
	f, err := os.OpenFile(v4, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff, 0xff, 0xff}, 13) // bytes 5..7 of element 1, byte 0..? of none
	require.NoError(t, err)
	got := make([]byte, 48)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	want1 := slices.Clone(base)
	want1[1] = int64(binary.LittleEndian.Uint64(append(raw([]int64{1})[:5], 0xff, 0xff, 0xff)))
	require.Equal(t, want1, ints(got), "read-your-writes on the handle")
	require.Equal(t, base, readInts(t, v4), "another open of v4 sees no uncommitted change")
	require.NoError(t, f.Sync())
	v5 := commitAs("v4", want1)

	// The handle carries on from the version it made: write past the end (grows axis 0,
	// unwritten elements read as the fill value -1), then close commits.
	_, err = f.WriteAt(raw([]int64{77}), 8*9)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	want2 := append(slices.Clone(want1), -1, -1, -1, 77)
	v6 := commitAs(v5, want2)

	// truncate(2) by path shrinks and commits at once; a size that is not whole rows is
	// EINVAL.
	require.ErrorIs(t, os.Truncate(filepath.Join(m.Dir, "versions", v6, "x"), 20), syscall.EINVAL)
	require.NoError(t, os.Truncate(filepath.Join(m.Dir, "versions", v6, "x"), 24))
	v7 := commitAs(v6, want2[:3])

	// A shell redirect replaces the content (O_TRUNC, then writes, then close).
	sh := exec.Command("sh", "-c", "printf '\\001\\000\\000\\000\\000\\000\\000\\000\\002\\000\\000\\000\\000\\000\\000\\000' > "+filepath.Join(m.Dir, "versions", v7, "x"))
	out, err := sh.CombinedOutput()
	require.NoError(t, err, "%s", out)
	v8 := commitAs(v7, []int64{1, 2})

	// cp of a whole file, growing it.
	src := filepath.Join(t.TempDir(), "src.bin")
	require.NoError(t, os.WriteFile(src, raw([]int64{9, 8, 7, 6, 5, 4, 3, 2, 1}), 0o644))
	out, err = exec.Command("cp", src, filepath.Join(m.Dir, "versions", v8, "x")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	v9 := commitAs(v8, []int64{9, 8, 7, 6, 5, 4, 3, 2, 1})

	// numpy.memmap(mode="r+"), changed and flushed, makes a new version.
	py := "import numpy as np\nm = np.memmap(" + quote(filepath.Join(m.Dir, "versions", v9, "x")) + ", dtype='<i8', mode='r+')\nm[2] = 123\nm.flush()\ndel m\n"
	out, err = exec.Command(python(t), "-c", py).CombinedOutput()
	require.NoError(t, err, "%s", out)
	v10 := commitAs(v9, []int64{9, 8, 123, 6, 5, 4, 3, 2, 1})

	// Two writers on the same version and dataset: the second finds the head changed x
	// since its base and commits a sibling with the same parent.
	a, err := os.OpenFile(filepath.Join(m.Dir, "versions", v10, "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	b, err := os.OpenFile(filepath.Join(m.Dir, "versions", v10, "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = a.WriteAt(raw([]int64{-100}), 0)
	require.NoError(t, err)
	_, err = b.WriteAt(raw([]int64{-200}), 8)
	require.NoError(t, err)
	bb := make([]byte, 16)
	_, err = b.ReadAt(bb, 0)
	require.NoError(t, err)
	require.Equal(t, []int64{9, -200}, ints(bb), "b does not see a's change")
	require.NoError(t, a.Close())
	va := commitAs(v10, []int64{-100, 8, 123, 6, 5, 4, 3, 2, 1})
	require.NoError(t, b.Close())
	vb := commitAs(v10, []int64{9, -200, 123, 6, 5, 4, 3, 2, 1})
	require.NotEqual(t, va, vb)

	// fstat reports the size of the handle opened or changed last, also while an earlier
	// descriptor is still open: the kernel's fstat names no handle, and a closed
	// descriptor's release can still be on its way.
	idle, err := os.OpenFile(filepath.Join(m.Dir, "versions", vb, "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	grow, err := os.OpenFile(filepath.Join(m.Dir, "versions", vb, "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, grow.Truncate(8*12))
	st, err := grow.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 8*12, st.Size(), "fstat of the handle that grew")
	require.NoError(t, grow.Close())
	// Changed only by ftruncate, grow commits at its release, which the kernel sends after
	// close(2) has returned.
	require.Eventually(t, func() bool { return currentVersion(t, m.Dir) != vb }, 10*time.Second, 5*time.Millisecond)
	commitAs(vb, []int64{9, -200, 123, 6, 5, 4, 3, 2, 1, -1, -1, -1})
	require.NoError(t, idle.Close()) // never written: no commit

	m.unmount(t) // a read-write mount holds HDF5's exclusive file lock
	md.verify()
}

// TestCommitFailure: a commit that cannot be made (here its journal cannot be created)
// answers EIO from fsync, loses no earlier version and leaves the file readable; the mount
// then writes nothing more (fail-stop: every later commit answers EIO too) until it is
// mounted again, which works once the cause is gone.
func TestCommitFailure(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/basic_1d.h5")
	m := mount(t, file, "rw")
	blocker := file + h5.JournalSuffix
	require.NoError(t, os.Mkdir(blocker, 0o755)) // the journal cannot be created
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions/v4/x"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(raw([]int64{5}), 0)
	require.NoError(t, err)
	require.ErrorIs(t, f.Sync(), syscall.EIO)
	require.Equal(t, "v4", currentVersion(t, m.Dir))
	require.ErrorIs(t, f.Sync(), syscall.EIO, "nothing more is written")
	f.Close()
	require.Equal(t, []int64{0, 1, 2, 3, 40, 50, 60, 70, 8, 9}, readInts(t, filepath.Join(m.Dir, "versions/v2/x")))
	// The changes the last close could not commit are kept in a stage on v4 (the kernel
	// sends the release that makes it after close(2) has returned).
	var stages []string
	require.Eventually(t, func() bool {
		stages = readDirNames(t, filepath.Join(m.Dir, "stage"))
		return len(stages) > 0
	}, 10*time.Second, 20*time.Millisecond, "no stage kept the changes")
	require.Len(t, stages, 1)
	require.Regexp(t, `^unsaved-\d{8}T\d{6}\.\d{6}Z$`, stages[0])
	m.unmount(t)
	// Every failed commit said why, and none went on to create a version group, whose
	// close, which writes, could no longer complete.
	log := m.stderr.String()
	failed := strings.Count(log, `level=ERROR msg="commit failed"`)
	require.GreaterOrEqual(t, failed, 3, "two fsyncs and the last close: %s", log)
	// The first names the step and the path it failed on; the later ones the stop.
	require.Equal(t, 1, strings.Count(log, "its sync failed at its journal write step (create "+blocker+": is a directory), before its commit point"), "%s", log)
	require.Equal(t, failed-1, strings.Count(log, "an earlier write to the file failed"), "%s", log)
	require.NoError(t, os.Remove(blocker))
	checkFile(t, file)
	m = mount(t, file, "rw")
	rescued := filepath.Join(m.Dir, "stage", stages[0])
	base, err := xattr.Get(rescued, "user.vh5fs.base")
	require.NoError(t, err)
	require.Equal(t, "v4", string(base))
	require.NoError(t, os.Rename(rescued, filepath.Join(m.Dir, "versions", "rescued")))
	require.Equal(t, int64(5), readInts(t, filepath.Join(m.Dir, "versions/rescued/x"))[0])
	f, err = os.OpenFile(filepath.Join(m.Dir, "versions/v4/x"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(raw([]int64{5}), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NotEqual(t, "v4", currentVersion(t, m.Dir))
	require.Equal(t, int64(5), readInts(t, filepath.Join(m.Dir, "current/x"))[0])
	m.unmount(t)
	checkFile(t, file)
}

// TestShapeXattr: setting user.vh5fs.shape resizes and commits.
func TestShapeXattr(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	p := filepath.Join(m.Dir, "versions/r5/temp")
	before, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, xattr.Set(p, "user.vh5fs.shape", []byte("[45,40]")))
	cur := currentVersion(t, m.Dir)
	require.NotEqual(t, "r5", cur)
	shape, err := xattr.Get(filepath.Join(m.Dir, "current/temp"), "user.vh5fs.shape")
	require.NoError(t, err)
	require.Equal(t, "[45,40]", string(shape))
	after, err := os.ReadFile(filepath.Join(m.Dir, "current/temp"))
	require.NoError(t, err)
	require.Len(t, after, 45*40*8)
	fill := raw([]int64{0})
	binary.LittleEndian.PutUint64(fill, 0x3fe0000000000000) // 0.5
	for r := 0; r < 45; r++ {
		require.Equal(t, before[r*37*8:(r+1)*37*8], after[r*40*8:r*40*8+37*8], "row %d keeps its data", r)
		require.Equal(t, bytes.Repeat(fill, 3), after[r*40*8+37*8:(r+1)*40*8], "new columns read as fill")
	}
	require.ErrorIs(t, xattr.Set(p, "user.vh5fs.shape", []byte("[1]")), syscall.EINVAL)
	require.ErrorIs(t, xattr.Set(p, "user.vh5fs.dtype", []byte("<f4")), syscall.EPERM)
	m.unmount(t)
	checkFile(t, file)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// TestDdRecipe is the README's recipe: dd conv=notrunc,fsync writes one element and
// commits exactly one version.
func TestDdRecipe(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	before := readDirNames(t, filepath.Join(m.Dir, "versions"))
	script := `/usr/bin/python3 -c 'import struct, sys; sys.stdout.buffer.write(struct.pack("<d", 1.0))' |
  dd of=` + filepath.Join(m.Dir, "current/temp") + ` bs=8 seek=10 conv=notrunc,fsync status=none`
	out, err := exec.Command("sh", "-c", script).CombinedOutput()
	require.NoError(t, err, "%s", out)
	after := readDirNames(t, filepath.Join(m.Dir, "versions"))
	require.Len(t, after, len(before)+1)
	b, err := os.ReadFile(filepath.Join(m.Dir, "current/temp"))
	require.NoError(t, err)
	require.Equal(t, raw([]int64{0x3ff0000000000000}), b[80:88])
}
