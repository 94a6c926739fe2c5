package tests

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// branchList is `vh5fs branch -l FILE`'s lines, each "NAME VERSION" (the timestamp left out).
func branchList(t *testing.T, file string) []string {
	t.Helper()
	out, stderr, code := vh5fsRun(t, "branch", "-l", file)
	require.Equal(t, 0, code, stderr)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(l, "\t"); len(f) >= 2 {
			lines = append(lines, f[0]+" "+f[1])
		}
	}
	return lines
}

// prevOf is the parent (prev_version) of version in file, as vh5fs info shows it.
func prevOf(t *testing.T, file, version string) string {
	t.Helper()
	out, stderr, code := vh5fsRun(t, "info", file+":"+version)
	require.Equal(t, 0, code, stderr)
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "parent:"); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no prev_version in info of %s:\n%s", version, out)
	return ""
}

// int64s reads a file of little-endian int64s.
func int64s(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// writeInt64 writes v at element i of path and fsyncs.
func writeInt64(t *testing.T, path string, i int, v int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(binary.LittleEndian.AppendUint64(nil, uint64(v)), int64(8*i))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
}

// TestBranchAdvances: names_branch.h5 is a file where vh5fs made branch dev on v2 and
// committed b1 and b2 through MNT/branches/dev/x, after which versioned-hdf5 itself
// committed lib1 on its current version v4 (fixtures README). The library kept the
// branch; here writes through the branch advance it again while current (lib1) and
// commits through current move on their own, and a stage made on the branch commits there.
func TestBranchAdvances(t *testing.T) {
	file := copyPath(t, namesFixture("names_branch.h5"))
	require.Equal(t, []string{"dev b2"}, branchList(t, file))
	out, stderr, code := vh5fsRun(t, "log", file, "--all")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "* lib1  ")
	require.Contains(t, out, "(current)\n")
	require.Contains(t, out, "1 changed (branch: dev)\n")
	for _, args := range [][]string{{"ls", file, "dev"}, {"info", file + ":dev/x"}, {"diff", file, "dev", "lib1"}, {"refs", file, "dev"}} {
		_, stderr, code := vh5fsRun(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
	}

	m := mount(t, file, "rw,allow_delete")
	dev := filepath.Join(m.Dir, "branches", "dev")
	ents, err := os.ReadDir(filepath.Join(m.Dir, "branches"))
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.Equal(t, "dev", ents[0].Name())
	require.True(t, ents[0].IsDir(), "a branch is a directory of its own, not a link")
	head, err := unix.Getxattr(dev, "user.vh5fs.head", make([]byte, 64))
	require.NoError(t, err)
	require.Equal(t, 2, head)
	b2 := []int64{100, 101, 2, 3, 40, 50, 60, 70, 8, 200}
	require.Equal(t, b2, int64s(t, filepath.Join(dev, "x")))
	require.Equal(t, int64s(t, filepath.Join(m.Dir, "versions", "b2", "x")), int64s(t, filepath.Join(dev, "x")))

	// A write through the branch commits on b2 and moves the branch; current stays lib1,
	// and the next open of the branch's file finds the new head at once.
	require.NoError(t, unix.Setxattr(m.Dir, "user.vh5fs.next_version", []byte("b3"), 0))
	writeInt64(t, filepath.Join(dev, "x"), 2, 300)
	b3 := append([]int64{100, 101, 300}, b2[3:]...)
	require.Equal(t, b3, int64s(t, filepath.Join(dev, "x")))
	cur, err := os.Readlink(filepath.Join(m.Dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/lib1", cur)
	lib1 := int64s(t, filepath.Join(m.Dir, "current", "x"))
	require.Equal(t, []int64{77, 1, 2, 3, 40, 555}, lib1)

	// A write through current moves current alone.
	require.NoError(t, unix.Setxattr(m.Dir, "user.vh5fs.next_version", []byte("c1"), 0))
	writeInt64(t, filepath.Join(m.Dir, "current", "x"), 1, 11)
	require.Equal(t, b3, int64s(t, filepath.Join(dev, "x")), "the branch did not move")
	cur, err = os.Readlink(filepath.Join(m.Dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/c1", cur)

	// A stage made on the branch commits on it; the branch cannot go while it waits.
	st := filepath.Join(m.Dir, "stage", "s")
	require.NoError(t, os.Mkdir(st, 0o755))
	require.NoError(t, unix.Setxattr(st, "user.vh5fs.branch", []byte("dev"), 0))
	require.ErrorIs(t, syscall.Rmdir(dev), syscall.EBUSY)
	out, stderr, code = vh5fsRun(t, "ls", "--stages", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "on b3 (branch dev)", "ls --stages names the branch")
	base := make([]byte, 64)
	n, err := unix.Getxattr(st, "user.vh5fs.base", base)
	require.NoError(t, err)
	require.Equal(t, "b3", string(base[:n]), "the stage is rebased on the branch's head")
	require.ErrorIs(t, unix.Setxattr(st, "user.vh5fs.branch", []byte("nope"), 0), syscall.ENOENT)
	writeInt64(t, filepath.Join(st, "x"), 3, 400)
	require.NoError(t, os.Rename(st, filepath.Join(m.Dir, "versions", "s1")))
	require.Equal(t, append([]int64{100, 101, 300, 400}, b2[4:]...), int64s(t, filepath.Join(dev, "x")))
	cur, err = os.Readlink(filepath.Join(m.Dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/c1", cur, "a stage on a branch leaves current")

	// The branch's head is held; mkdir, setfattr and rmdir make, move and delete branches.
	require.ErrorIs(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "s1")), syscall.EBUSY)
	require.Eventually(t, func() bool { return strings.Contains(m.stderr.String(), "held by a branch dev") },
		5*time.Second, 10*time.Millisecond, "the refusal is logged, naming the branch")
	other := filepath.Join(m.Dir, "branches", "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	require.ErrorIs(t, os.Mkdir(other, 0o755), os.ErrExist)
	require.ErrorIs(t, os.Mkdir(filepath.Join(m.Dir, "branches", "keep"), 0o755), os.ErrExist, "a tag's name")
	require.Equal(t, int64s(t, filepath.Join(m.Dir, "current", "x")), int64s(t, filepath.Join(other, "x")), "made at the current version")
	require.NoError(t, unix.Setxattr(other, "user.vh5fs.head", []byte("v1"), 0))
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, int64s(t, filepath.Join(other, "x")))
	require.ErrorIs(t, unix.Setxattr(other, "user.vh5fs.head", []byte("nope"), 0), syscall.ENOENT)
	require.ErrorIs(t, os.Remove(filepath.Join(other, "x")), syscall.EROFS, "a branch's files are a version's")
	require.NoError(t, syscall.Rmdir(other))
	_, err = os.Stat(other)
	require.ErrorIs(t, err, os.ErrNotExist)
	m.unmount(t)

	require.Equal(t, []string{"dev s1"}, branchList(t, file))
	require.Equal(t, "b3", prevOf(t, file, "s1"))
	require.Equal(t, "b2", prevOf(t, file, "b3"))
	require.Equal(t, "lib1", prevOf(t, file, "c1"))
	out, stderr, code = vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	compacted := filepath.Join(t.TempDir(), "compacted.h5")
	_, stderr, code = vh5fsRun(t, "compact", file, "-o", compacted)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{"dev s1"}, branchList(t, compacted), "compact keeps the branches")
	_, stderr, code = vh5fsRun(t, "modify", file, "x", "--chunks", "2")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{"dev s1"}, branchList(t, file), "modify keeps the branches")

	// The command line: -f moves, -d deletes (the versions stay), a dangling name is refused.
	_, stderr, code = vh5fsRun(t, "branch", file, "dev", "v1")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "taken")
	out, stderr, code = vh5fsRun(t, "branch", "-f", file, "dev", "v3")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "moved branch dev to v3")
	out, stderr, code = vh5fsRun(t, "branch", "-d", file, "dev")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "deleted branch dev")
	require.Empty(t, branchList(t, file))
	_, stderr, code = vh5fsRun(t, "ls", file, "s1")
	require.Equal(t, 0, code, stderr)
}
