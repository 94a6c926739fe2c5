package tests

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// interruptedCommit returns a copy of basic_1d.h5 as a commit killed just before its apply
// step leaves it: the journal complete beside it (the commit point passed), the file's old
// bytes not yet overwritten. The commit adds the group /interrupted.
func interruptedCommit(t *testing.T) string {
	t.Helper()
	file := fixture.Copy(t, "testdata/fixtures/basic_1d.h5")
	f, err := h5.OpenRW(file)
	require.NoError(t, err)
	require.NoError(t, f.CreateGroup("/interrupted"))
	require.NoError(t, f.InjectSyncFault("apply", true))
	require.Error(t, f.FlushSync())
	f.Close()
	_, err = os.Stat(file + h5.JournalSuffix)
	require.NoError(t, err, "the journal is beside the file")
	return file
}

// hasGroup asks h5py whether file has the group.
func hasGroup(t *testing.T, file, group string) bool {
	t.Helper()
	out, err := exec.Command(python(t), "-c", "import sys, h5py; print(sys.argv[2] in h5py.File(sys.argv[1], 'r'))", file, group).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out)) == "True"
}

// TestJournalMountCompletes: the next read-write mount completes an interrupted commit;
// read-only commands refuse the file until then, saying how to repair it.
func TestJournalMountCompletes(t *testing.T) {
	file := interruptedCommit(t)
	_, stderr, code := vh5fsRun(t, "ls", file)
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	require.Contains(t, stderr, "a commit was interrupted while writing")
	require.Contains(t, stderr, "vh5fs fsck --repair "+file)

	m := mount(t, file, "rw")
	m.unmount(t)
	require.NoFileExists(t, file+h5.JournalSuffix)
	require.True(t, hasGroup(t, file, "interrupted"), "the commit was completed")
	_, _, code = vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code)
}

// TestJournalOtherProgram: another program writes to the file between the crash and the
// next mount. vh5fs then writes nothing: the mount and `fsck --repair` refuse with one line
// saying what happened and what to do; `fsck --repair --discard-journal` drops the journal,
// and the other program's data is there.
func TestJournalOtherProgram(t *testing.T) {
	file := interruptedCommit(t)
	out, err := exec.Command(python(t), "-c", `
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    f["other_program"] = np.arange(10.0)
`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	theirs, err := os.ReadFile(file)
	require.NoError(t, err)

	mnt := t.TempDir()
	_, stderr, code := vh5fsRun(t, "mount", "-o", "rw", file, mnt)
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	require.Contains(t, stderr, "the file changed since a vh5fs commit was interrupted")
	require.Contains(t, stderr, "vh5fs fsck --repair --discard-journal "+file)

	stdout, stderr, code := vh5fsRun(t, "fsck", "--repair", file)
	require.Equal(t, 1, code, "%s%s", stdout, stderr)
	require.Contains(t, stderr, "the file changed since")
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	require.True(t, bytes.Equal(theirs, got), "nothing was written over the other program's bytes")
	require.FileExists(t, file+h5.JournalSuffix)

	stdout, stderr, code = vh5fsRun(t, "fsck", "--repair", "--discard-journal", file)
	require.Equal(t, 0, code, "%s%s", stdout, stderr)
	require.Contains(t, stdout, "removed the journal of an interrupted commit without completing it")
	require.NoFileExists(t, file+h5.JournalSuffix)
	require.True(t, hasGroup(t, file, "other_program"))
	require.False(t, hasGroup(t, file, "interrupted"))
	m := mount(t, file, "rw")
	m.unmount(t)
}
