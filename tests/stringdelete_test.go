package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/lifecycle"
)

// Deletions of versions that hold variable-length string datasets (issue 50, item 3).

// TestStringDeleteThroughMount: rmdir with allow_delete on a file with string datasets
// deletes the version and, at the unmount, reclaims its string chunks as versioned-hdf5's
// delete_versions does (conform.Files against the library's golden); fsck passes it and
// nothing stays pending.
func TestStringDeleteThroughMount(t *testing.T) {
	dir := fixture.Dir()
	file := copyPath(t, filepath.Join(dir, "golden_delete_strings_middle-before.h5"))
	m := mount(t, file, "rw,allow_delete")
	require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "s2")))
	m.unmount(t)
	m.logged(t, `msg="deletions' chunks reclaimed" groups=names,tags,x `)
	require.NoError(t, conform.Files(file, filepath.Join(dir, "golden_delete_strings_middle-after.h5")))
	_, err := os.Stat(lifecycle.PendingPath(file))
	require.ErrorIs(t, err, os.ErrNotExist)
	stdout, stderr, code := vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.NotContains(t, stdout, "pending")
}

// TestStringDeleteBlockedReclaim: a reclaim that cannot finish never traps the file. Here
// the pending group's hash_table lost its rows (largest_index 0) after an rmdir: the
// mount's reclaim logs the group once and does not loop, fsck names the group and why
// with a command that works, fsck --repair reclaims what it can and says what it left,
// and compact copies the file, the group still pending, every version whole.
func TestStringDeleteBlockedReclaim(t *testing.T) {
	dir := fixture.Dir()
	file := copyPath(t, filepath.Join(dir, "golden_delete_strings_middle-before.h5"))
	out, err := exec.Command(python(t), "-c", `import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["_version_data/names/hash_table"].attrs["largest_index"] = 0
`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := mount(t, file, "rw,allow_delete")
	require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "s2")))
	m.unmount(t)
	lines := m.logged(t, `cannot compact a data group; it stays pending.* group=names `)
	require.Len(t, lines, 1, "logged once, not retried in a loop")
	pending, err := lifecycle.Pending(file)
	require.NoError(t, err)
	require.Equal(t, []string{"names"}, pending, "the other groups were reclaimed")

	stdout, stderr, code := vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "this vh5fs cannot reclaim 1 of them (data group names: hash_table has no row for slot 0")
	require.Contains(t, stdout, "vh5fs compact "+file+" copies the file")

	stdout, stderr, code = vh5fsRun(t, "fsck", "--repair", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "nothing reclaimed; left pending, data group names: hash_table has no row for slot 0")

	stdout, stderr, code = vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "written to "+file)
	stdout, stderr, code = vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	pending, err = lifecycle.Pending(file)
	require.NoError(t, err)
	require.Equal(t, []string{"names"}, pending, "the blocked group stays pending")
	stdout, stderr, code = vh5fsRun(t, "ls", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "names  vlen-str  [9]")
}
