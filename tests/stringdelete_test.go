package tests

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/lifecycle"
)

// A reclaim that cannot finish must never trap a file: rmdir with allow_delete on a file
// whose reclaim is refused leaves the group pending once (no loop), fsck names the data
// group and why with a command that works, and compact copies the file.
func TestStringDeleteBlockedReclaim(t *testing.T) {
	file := copyPath(t, fixturePath("strings.h5"))
	m := mount(t, file, "rw,allow_delete")
	require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "s1")))
	m.unmount(t)
	pending, err := lifecycle.Pending(file)
	require.NoError(t, err)
	require.Equal(t, []string{"names"}, pending)
	m.logged(t, `cannot compact a data group; it stays pending`)

	stdout, stderr, code := vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "this vh5fs cannot reclaim 1 of them (data group names: ")
	require.Contains(t, stdout, "vh5fs compact "+file+" copies the file")

	stdout, stderr, code = vh5fsRun(t, "fsck", "--repair", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	require.Contains(t, stdout, "left pending, data group names: ")
	t.Log(stdout)

	stdout, stderr, code = vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	t.Log(stdout)
	stdout, stderr, code = vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", stdout, stderr)
	t.Log(stdout)
	_, err = os.Stat(lifecycle.PendingPath(file))
	require.NoError(t, err, "the blocked group stays pending")
}
