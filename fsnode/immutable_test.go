package fsnode

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusal: a refused change of the tree is logged with the path the user named and
// advice that fits the change, and answered EROFS inside a version, EPERM elsewhere.
func TestRefusal(t *testing.T) {
	for _, c := range []struct{ hdf5, want string }{
		{"/_version_data/versions/v2/counts", "versions/v2/counts"},
		{"/_version_data/versions/v2", "versions/v2"},
		{"/_version_data/versions", "versions"},
		{"/_version_data/versionsX", "_version_data/versionsX"},
		{"/grp/x", "grp/x"},
		{"/", "."},
		{"stage/s", "stage/s"},
	} {
		require.Equal(t, c.want, mountPath(c.hdf5), c.hdf5)
	}
	m := &mount{}
	for _, c := range []struct {
		op, path, want string
		errno          syscall.Errno
	}{
		{"unlink", "versions/v2/counts", "versions are snapshots: nothing in them changes; delete a whole version with vh5fs delete", syscall.EROFS},
		{"rmdir", "versions/v2/g", "nothing in them changes", syscall.EROFS},
		{"rmdir", "versions/v2", "rmdir MNT/versions/VERSION on a mount with -o rw,allow_delete", syscall.EPERM},
		{"rename", "versions/v2", "a version is renamed only within versions/", syscall.EPERM},
		{"rename", "versions/v2/counts", "nothing in them is renamed", syscall.EROFS},
		{"mkdir", "versions/new", "a new version is made by committing a stage", syscall.EPERM},
		{"mkdir", "versions/v2/g", "no new groups in them", syscall.EROFS},
		{"create", "versions/v2/new", "no new files in them", syscall.EROFS},
		{"setattr", "versions/v2/counts", "modes, owners and times are fixed", syscall.EROFS},
		{"setattr", "versions/v2", "modes, owners and times are fixed", syscall.EROFS},
		{"setattr", "versions", "modes, owners and times are fixed", syscall.EPERM},
		{"unlink", "grp/x", "unversioned groups and datasets are read-only", syscall.EPERM},
		{"unlink", "stage/x", "stage/ holds only stages", syscall.EPERM},
	} {
		got := m.refusal(c.op, c.path)
		require.Contains(t, got, c.want, "%s %s", c.op, c.path)
		require.NotContains(t, got, "make a new version", "%s %s", c.op, c.path)
		require.Equal(t, c.errno, refusedErrno(c.op, c.path), "%s %s", c.op, c.path)
	}
	for _, dir := range []struct {
		path  string
		errno syscall.Errno
	}{{"versions/v2", syscall.EROFS}, {"versions/v2/g", syscall.EROFS}, {"versions", syscall.EPERM}, {".", syscall.EPERM}} {
		require.Equal(t, dir.errno, refusedErrno("symlink", dir.path+"/"), "a link in %s", dir.path)
	}
}
