package tests

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// Answers that were not true (issue 50, item 6), each checked as a user meets it.

// TestAnswersPartialRow: cp of a file that is not whole rows over grid_2d_gzip's temp
// ([50, 37] float64: rows of 296 bytes) fails with EINVAL (fsync and close of a direct
// O_TRUNC open too), logs the size and the row size, and commits nothing: the versions,
// the dataset and the file's bytes stay as they were. A file of whole rows still commits.
func TestAnswersPartialRow(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	sum := func() [32]byte {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		return sha256.Sum256(b)
	}
	logOf := func() string {
		out, stderr, code := vh5fsRun(t, "log", "--oneline", file)
		require.Equal(t, 0, code, stderr)
		return out
	}
	bytesBefore, logBefore := sum(), logOf()
	src := t.TempDir()
	wrong := filepath.Join(src, "wrong-size.bin")
	require.NoError(t, os.WriteFile(wrong, bytes.Repeat([]byte{0x3f}, 1001), 0o644))

	m := mount(t, file, "rw")
	temp := filepath.Join(m.Dir, "current", "temp")
	orig, err := os.ReadFile(temp)
	require.NoError(t, err)

	out, err := exec.Command("cp", wrong, temp).CombinedOutput()
	require.Error(t, err, "cp of 1001 bytes into rows of 296 fails")
	require.Contains(t, string(out), "Invalid argument")
	m.logged(t, `level=WARN msg="refused: the file was truncated [^"]*row[^"]*" op=commit path=versions/r5/temp size=1001 row_bytes=296`)
	m.logged(t, `msg="dropped: [^"]*" path=versions/r5/temp`)

	f, err := os.OpenFile(temp, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	n, err := f.Write(bytes.Repeat([]byte{0x3f}, 1001))
	require.NoError(t, err, "the write itself is taken")
	require.Equal(t, 1001, n)
	require.ErrorIs(t, f.Sync(), syscall.EINVAL)
	require.ErrorIs(t, f.Close(), syscall.EINVAL)

	require.Equal(t, "r5", currentVersion(t, m.Dir))
	got, err := os.ReadFile(temp)
	require.NoError(t, err)
	require.Equal(t, orig, got, "the dataset is unchanged")
	require.Empty(t, readDirNames(t, filepath.Join(m.Dir, "stage")), "no stage keeps the refused content")
	m.unmount(t)
	require.Equal(t, logBefore, logOf(), "no new version")
	require.Equal(t, bytesBefore, sum(), "the file's bytes are unchanged")
	checkFile(t, file)

	// Three whole rows replace the dataset: a version of [3, 37].
	right := filepath.Join(src, "right-size.bin")
	rows := bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 3*37) // 1.0 as float64
	require.NoError(t, os.WriteFile(right, rows, 0o644))
	m = mount(t, file, "rw")
	temp = filepath.Join(m.Dir, "current", "temp")
	out, err = exec.Command("cp", right, temp).CombinedOutput()
	require.NoError(t, err, "%s", out)
	cur := currentVersion(t, m.Dir)
	require.NotEqual(t, "r5", cur)
	got, err = os.ReadFile(temp)
	require.NoError(t, err)
	require.Equal(t, rows, got)
	m.unmount(t)
	require.NotEqual(t, logBefore, logOf())
	require.Contains(t, logOf(), cur)
	checkFile(t, file)
}

// TestAnswersNamesNotVersions: no tag or branch takes a version's name, by the command line
// (exit status 1, one line) or through a mount (ln -s in tags/, mkdir in branches/:
// EEXIST, logged); a version committed later under a tag's name (commit_name=) is noted
// by fsck as shadowing the tag, which is no problem of the file.
func TestAnswersNamesNotVersions(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/basic_1d.h5") // versions v1..v4
	for _, args := range [][]string{{"tag", file, "v2", "v3"}, {"branch", file, "v1", "v4"}, {"tag", file, "v4"}} {
		out, stderr, code := vh5fsRun(t, args...)
		require.Equal(t, 1, code, "%v: %s", args, stderr)
		require.Empty(t, out)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
		require.Contains(t, stderr, args[0]+" "+args[2]+": the name is a version's name", "%v", args)
	}
	for _, kind := range []string{"tag", "branch"} {
		out, stderr, code := vh5fsRun(t, kind, "-l", file)
		require.Equal(t, 0, code, stderr)
		require.Empty(t, out, "no %s was made", kind)
	}

	m := mount(t, file, "rw")
	require.ErrorIs(t, os.Symlink("versions/v3", filepath.Join(m.Dir, "tags", "v2")), os.ErrExist)
	m.logged(t, `msg="version not tagged" tag=v2 version=v3 errno="file exists" err="tag v2: the name is a version's name`)
	require.ErrorIs(t, os.Mkdir(filepath.Join(m.Dir, "branches", "v2"), 0o755), os.ErrExist)
	m.logged(t, `msg="branch not made" branch=v2 version=v4 errno="file exists" err="branch v2: the name is a version's name`)
	require.Empty(t, readDirNames(t, filepath.Join(m.Dir, "tags")))
	require.Empty(t, readDirNames(t, filepath.Join(m.Dir, "branches")))
	require.NoError(t, os.Symlink("versions/v3", filepath.Join(m.Dir, "tags", "calibrated")))
	m.unmount(t)

	// A version committed under the tag's name shadows it: fsck notes it and passes.
	m = mount(t, file, "rw,commit_name=calibrated")
	f, err := os.OpenFile(filepath.Join(m.Dir, "current", "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(raw([]int64{123}), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.Equal(t, "calibrated", currentVersion(t, m.Dir))
	link, err := os.Readlink(filepath.Join(m.Dir, "tags", "calibrated"))
	require.NoError(t, err)
	require.Equal(t, "../versions/v3", link, "the tag still leads to its version")
	m.unmount(t)
	out, stderr, code := vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "a note, not a problem: %s%s", out, stderr)
	require.Contains(t, out, file+": shadowed: tag calibrated names version v3, but a version is called calibrated too")
	require.Contains(t, out, "give the tag another name with vh5fs tag "+file+" NEWNAME v3, then vh5fs tag -d "+file+" calibrated")
	require.Contains(t, out, "ok: 5 versions checked")
}
