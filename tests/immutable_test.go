package tests

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestTreeChangesRefused: every call that would change the tree's names, links, modes or
// owners answers the errno that says why and changes nothing: EROFS inside a version (a
// snapshot) and in read-only mounts, EPERM for changes of versions/ itself in read-write
// mounts.
func TestTreeChangesRefused(t *testing.T) {
	for _, opts := range []string{"rw", "rw,allow_delete", "ro"} {
		t.Run(opts, func(t *testing.T) {
			file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
			m := mount(t, file, opts)
			v := filepath.Join(m.Dir, "versions", "r1")
			ds := filepath.Join(v, "temp")
			before, err := os.ReadFile(ds)
			require.NoError(t, err)
			shape := syscall.EPERM // changes of versions/ itself
			if opts == "ro" {
				shape = syscall.EROFS
			}
			for _, op := range []struct {
				name string
				want syscall.Errno
				call func() error
			}{
				{"unlink a dataset", syscall.EROFS, func() error { return syscall.Unlink(ds) }},
				{"rename a dataset", syscall.EROFS, func() error { return os.Rename(ds, filepath.Join(v, "renamed")) }},
				{"mkdir in a version", syscall.EROFS, func() error { return os.Mkdir(filepath.Join(v, "g"), 0o755) }},
				{"symlink", syscall.EROFS, func() error { return os.Symlink("temp", filepath.Join(v, "l")) }},
				{"hard link", syscall.EROFS, func() error { return os.Link(ds, filepath.Join(v, "h")) }},
				{"mknod", syscall.EROFS, func() error { return syscall.Mkfifo(filepath.Join(v, "p"), 0o644) }},
				{"chmod a dataset", syscall.EROFS, func() error { return os.Chmod(ds, 0o600) }},
				{"chown a dataset", syscall.EROFS, func() error { return os.Chown(ds, 1, 1) }},
				{"touch a dataset", syscall.EROFS, func() error { return os.Chtimes(ds, time.Now(), time.Now()) }},
				{"chmod a version", syscall.EROFS, func() error { return os.Chmod(v, 0o700) }},
				{"create a file", syscall.EROFS, func() error {
					f, err := os.OpenFile(filepath.Join(v, "new"), os.O_CREATE|os.O_WRONLY, 0o644)
					if err == nil {
						f.Close()
					}
					return err
				}},
				{"move a version out of versions/", shape, func() error { return os.Rename(v, filepath.Join(m.Dir, "r9")) }},
				{"mkdir in versions", shape, func() error { return os.Mkdir(filepath.Join(m.Dir, "versions", "new"), 0o755) }},
			} {
				require.ErrorIs(t, op.call(), op.want, op.name)
			}
			after, err := os.ReadFile(ds)
			require.NoError(t, err)
			require.Equal(t, before, after)
			entries, err := os.ReadDir(v)
			require.NoError(t, err)
			require.Len(t, entries, 1, "the version still holds its one dataset and nothing else")
			versions, err := os.ReadDir(filepath.Join(m.Dir, "versions"))
			require.NoError(t, err)
			require.Len(t, versions, 5)
		})
	}
}

// TestNextVersionName: a taken or invalid user.vh5fs.next_version is refused when it is
// set, setfattr -x removes a pending one, and a taken commit_name= stops the mount with
// one line and exit status 2.
func TestNextVersionName(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	_, stderr, code := vh5fsRun(t, "mount", "-o", "rw,commit_name=r1", file, t.TempDir())
	require.Equal(t, 2, code)
	require.Equal(t, "vh5fs: "+file+": commit_name=r1: the file already has a version of that name\n", stderr)

	m := mount(t, file, "rw")
	const name = "user.vh5fs.next_version"
	require.ErrorIs(t, xattr.Set(m.Dir, name, []byte("r1")), syscall.EEXIST)
	require.ErrorIs(t, xattr.Set(m.Dir, name, []byte("a/b")), syscall.EINVAL)
	require.ErrorIs(t, xattr.Remove(m.Dir, name), syscall.ENODATA)
	require.NoError(t, xattr.Set(m.Dir, name, []byte("fresh")))
	got, err := xattr.Get(m.Dir, name)
	require.NoError(t, err)
	require.Equal(t, "fresh", string(got))
	require.NoError(t, xattr.Remove(m.Dir, name))
	_, err = xattr.Get(m.Dir, name)
	require.ErrorIs(t, err, syscall.ENODATA)
}
