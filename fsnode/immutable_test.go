package fsnode

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusal: a refused change of the tree is logged with the path the user named and
// advice that fits the change.
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
	for _, c := range []struct{ op, path, want string }{
		{"unlink", "versions/v2/counts", "versions are immutable: nothing in them is deleted"},
		{"rmdir", "versions/v2", "rmdir MNT/versions/NAME (or rm -r) deletes it"},
		{"rename", "versions/v2", "a version is renamed only within versions/"},
		{"rename", "versions/v2/counts", "nothing in them is renamed"},
		{"mkdir", "versions/new", "a new version is made by committing a stage"},
		{"mkdir", "versions/v2/g", "no new groups in them"},
		{"create", "versions/v2/new", "no new files in them"},
		{"link", "versions/v2", "no links"},
		{"setattr", "versions/v2/counts", "modes, owners and times are fixed"},
		{"unlink", "grp/x", "unversioned groups and datasets are read-only"},
		{"unlink", "stage/x", "stage/ holds only stages"},
	} {
		got := m.refusal(c.op, c.path)
		require.Contains(t, got, c.want, "%s %s", c.op, c.path)
		require.NotContains(t, got, "make a new version", "%s %s", c.op, c.path)
	}
}
