package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// versionAttrs is current_version and each named version's prev_version, as h5py reads
// them from file (without HDF5's file lock, which a read-write mount holds).
func versionAttrs(t *testing.T, file string, names ...string) []string {
	t.Helper()
	script := `import sys, h5py
f = h5py.File(sys.argv[1], "r")
vs = f["_version_data/versions"]
print(vs.attrs["current_version"])
for n in sys.argv[2:]:
    print(vs[n].attrs["prev_version"])
`
	cmd := exec.Command(python(t), append([]string{"-c", script, file}, names...)...)
	cmd.Env = append(os.Environ(), "HDF5_USE_FILE_LOCKING=FALSE")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

// TestMoveCurrent: `ln -sfn versions/X current` and setfattr user.vh5fs.current move
// current_version as versioned-hdf5's setter does; the next commit through current/ goes
// on top of X; other links in the root, and unknown versions, are refused.
func TestMoveCurrent(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	cur := filepath.Join(m.Dir, "current")
	readlink := func() string {
		t.Helper()
		got, err := os.Readlink(cur)
		require.NoError(t, err)
		return got
	}
	require.Equal(t, "versions/r5", readlink())

	// ln -sfn: a link under ln's own name, renamed over current.
	run(t, "ln", "-sfn", "versions/r2", cur)
	require.Equal(t, "versions/r2", readlink())
	ents, err := os.ReadDir(m.Dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"versions", "current", "stage", "at", "tags", "branches"}, names, "ln's temporary link is gone")
	require.Equal(t, []string{"r2"}, versionAttrs(t, file)[:1], "current_version is durable at once")

	// The next commit through current/ goes on top of r2.
	f, err := os.OpenFile(filepath.Join(cur, "temp"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("12345678"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	made := strings.TrimPrefix(readlink(), "versions/")
	require.NotEqual(t, "r2", made)

	// setfattr on the root.
	require.NoError(t, xattr.Set(m.Dir, "user.vh5fs.current", []byte("r4")))
	require.Equal(t, "versions/r4", readlink())
	require.ErrorIs(t, xattr.Set(m.Dir, "user.vh5fs.current", []byte("nope")), syscall.ENOENT)
	require.Equal(t, "versions/r4", readlink())

	// A link to no version, or to something else, is refused; one never renamed over
	// current can be removed.
	require.ErrorIs(t, os.Symlink("versions/nope", filepath.Join(m.Dir, "x")), syscall.ENOENT)
	require.ErrorIs(t, os.Symlink("/etc", filepath.Join(m.Dir, "x")), syscall.EPERM)
	require.NoError(t, os.Symlink("versions/r1", filepath.Join(m.Dir, "x")))
	got, err := os.Readlink(filepath.Join(m.Dir, "x"))
	require.NoError(t, err)
	require.Equal(t, "versions/r1", got)
	require.ErrorIs(t, os.Rename(filepath.Join(m.Dir, "x"), filepath.Join(m.Dir, "y")), syscall.EPERM)
	require.NoError(t, os.Remove(filepath.Join(m.Dir, "x")))
	require.Equal(t, "versions/r4", readlink())

	m.unmount(t)
	require.Equal(t, []string{"r4", "r2"}, versionAttrs(t, file, made), "current_version, and the commit's prev_version")

	// Read-only mounts refuse it.
	ro := mount(t, file)
	require.ErrorIs(t, xattr.Set(ro.Dir, "user.vh5fs.current", []byte("r1")), syscall.EROFS)
	out, err := exec.Command("ln", "-sfn", "versions/r1", filepath.Join(ro.Dir, "current")).CombinedOutput()
	require.Error(t, err, "%s", out)
}
