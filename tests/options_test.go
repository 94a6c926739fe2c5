package tests

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Mount options a mount.fuse3 user writes that the kernel does not take as such: uid=,
// gid= and umask= are applied by vh5fs to every node it reports; the access-time options
// become mount(2) flags; blksize= is ignored (fuseblk only); allow_root and auto_unmount
// are refused with one line. Each mount here must come up (the kernel refuses unknown
// option strings with EINVAL).

// mountFields returns the per-mount options and the super options of the mount at dir
// (fields 6 and 11 of /proc/self/mountinfo).
func mountFields(t *testing.T, dir string) (mnt, super []string) {
	t.Helper()
	line := mountTableLine(t, dir)
	require.NotEmpty(t, line, "%s not mounted", dir)
	fields := strings.Fields(line)
	i := slices.Index(fields, "-")
	require.True(t, i > 5 && i+3 < len(fields), line)
	return strings.Split(fields[5], ","), strings.Split(fields[i+3], ",")
}

// optionModes is what stat shows for the nodes of a mount of basic_1d.h5.
type optionModes struct {
	root, dir, file uint32 // permission bits of the root, versions/ and v1/, current/x
}

// checkNodes stats the root, versions/, versions/v1, current (a symlink) and current/x:
// owner, group and permission bits. It also reads current/x.
func checkNodes(t *testing.T, mnt string, uid, gid uint32, want optionModes) {
	t.Helper()
	for _, tc := range []struct {
		path string
		mode uint32
	}{
		{mnt, syscall.S_IFDIR | want.root},
		{filepath.Join(mnt, "versions"), syscall.S_IFDIR | want.dir},
		{filepath.Join(mnt, "versions", "v1"), syscall.S_IFDIR | want.dir},
		{filepath.Join(mnt, "current"), syscall.S_IFLNK | 0o777},
		{filepath.Join(mnt, "current", "x"), syscall.S_IFREG | want.file},
	} {
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(tc.path, &st))
		require.Equal(t, fmt.Sprintf("%o", tc.mode), fmt.Sprintf("%o", st.Mode), "mode of %s", tc.path)
		require.Equal(t, uid, st.Uid, "owner of %s", tc.path)
		require.Equal(t, gid, st.Gid, "group of %s", tc.path)
	}
	b, err := os.ReadFile(filepath.Join(mnt, "current", "x"))
	require.NoError(t, err)
	require.Len(t, b, 6*8)
}

func TestOptionsMount(t *testing.T) {
	fixture, err := filepath.Abs("testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	me, myGroup := uint32(os.Getuid()), uint32(os.Getgid())
	ro := optionModes{root: 0o555, dir: 0o555, file: 0o444}
	for _, tc := range []struct {
		opts     string
		uid, gid uint32
		modes    optionModes
		mnt      []string // must be among the per-mount options
		notMnt   []string // must not be
		super    []string // must be among the super options
		notSuper []string
	}{
		{opts: "ro", uid: me, gid: myGroup, modes: ro,
			mnt: []string{"ro", "nosuid", "nodev", "relatime"}, notMnt: []string{"noatime"}},
		{opts: "ro,uid=1234", uid: 1234, gid: myGroup, modes: ro},
		{opts: "ro,gid=2345", uid: me, gid: 2345, modes: ro},
		{opts: "ro,uid=0,gid=0", uid: 0, gid: 0, modes: ro},
		{opts: "ro,umask=027", uid: me, gid: myGroup, modes: optionModes{0o550, 0o550, 0o440}},
		{opts: "ro,umask=0777", uid: me, gid: myGroup, modes: optionModes{0, 0, 0}},
		{opts: "ro,umask=022,umask=0", uid: me, gid: myGroup, modes: ro},
		{opts: "ro,noatime", uid: me, gid: myGroup, modes: ro, mnt: []string{"noatime"}, notMnt: []string{"relatime"}},
		{opts: "ro,atime", uid: me, gid: myGroup, modes: ro, mnt: []string{"relatime"}, notMnt: []string{"noatime"}},
		{opts: "ro,noatime,atime", uid: me, gid: myGroup, modes: ro, mnt: []string{"relatime"}, notMnt: []string{"noatime"}},
		{opts: "ro,nodiratime", uid: me, gid: myGroup, modes: ro, mnt: []string{"nodiratime", "relatime"}},
		{opts: "ro,nodiratime,diratime", uid: me, gid: myGroup, modes: ro, notMnt: []string{"nodiratime"}},
		{opts: "ro,relatime", uid: me, gid: myGroup, modes: ro, mnt: []string{"relatime"}},
		{opts: "ro,norelatime,strictatime", uid: me, gid: myGroup, modes: ro, notMnt: []string{"relatime", "noatime"}},
		{opts: "ro,lazytime", uid: me, gid: myGroup, modes: ro, super: []string{"lazytime"}},
		{opts: "ro,lazytime,nolazytime", uid: me, gid: myGroup, modes: ro, notSuper: []string{"lazytime"}},
		{opts: "ro,blksize=4096", uid: me, gid: myGroup, modes: ro, notSuper: []string{"blksize=4096"}},
		{opts: "ro,sync", uid: me, gid: myGroup, modes: ro, super: []string{"sync"}},
		{opts: "ro,sync,async", uid: me, gid: myGroup, modes: ro, notSuper: []string{"sync"}},
		{opts: "ro,dirsync", uid: me, gid: myGroup, modes: ro, super: []string{"dirsync"}},
		{opts: "ro,nodev,noexec,suid,dev", uid: me, gid: myGroup, modes: ro,
			mnt: []string{"noexec"}, notMnt: []string{"nosuid", "nodev"}},
		{opts: "ro,uid=1234,gid=2345,umask=027,noatime,nodiratime,relatime,blksize=4096,sync",
			uid: 1234, gid: 2345, modes: optionModes{0o550, 0o550, 0o440},
			mnt: []string{"ro", "nosuid", "nodev", "noatime", "nodiratime"}, super: []string{"sync"}},
		{opts: "rw", uid: me, gid: myGroup, modes: optionModes{0o755, 0o555, 0o644},
			mnt: []string{"rw"}, notMnt: []string{"ro"}},
		{opts: "rw,uid=1234,gid=2345,umask=027,noatime,dirsync,blksize=512",
			uid: 1234, gid: 2345, modes: optionModes{0o750, 0o550, 0o640},
			mnt: []string{"rw", "noatime"}, super: []string{"dirsync"}},
		{opts: "rw,umask=0277", uid: me, gid: myGroup, modes: optionModes{0o500, 0o500, 0o400}},
	} {
		t.Run(tc.opts, func(t *testing.T) {
			file := fixture
			if strings.HasPrefix(tc.opts, "rw") {
				file = filepath.Join(t.TempDir(), "basic_1d.h5")
				copyFile(t, fixture, file)
			}
			m := mount(t, file, tc.opts)
			checkNodes(t, m.Dir, tc.uid, tc.gid, tc.modes)
			mnt, super := mountFields(t, m.Dir)
			for _, o := range tc.mnt {
				require.Contains(t, mnt, o, "mount options %v", mnt)
			}
			for _, o := range tc.notMnt {
				require.NotContains(t, mnt, o, "mount options %v", mnt)
			}
			for _, o := range tc.super {
				require.Contains(t, super, o, "super options %v", super)
			}
			for _, o := range tc.notSuper {
				require.NotContains(t, super, o, "super options %v", super)
			}
			for _, o := range super {
				require.False(t, strings.HasPrefix(o, "uid=") || strings.HasPrefix(o, "umask="), "super options %v", super)
			}
		})
	}
}

// TestOptionsAtimeIsFixed: access times are not kept, whatever the flags: the kernel marks
// every FUSE inode S_NOATIME and vh5fs reports the version's timestamp as atime.
func TestOptionsAtimeIsFixed(t *testing.T) {
	m := mount(t, fixturePath("basic_1d.h5"), "ro,strictatime")
	x := filepath.Join(m.Dir, "versions", "v1", "x")
	before, err := os.Stat(x)
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond)
	_, err = os.ReadFile(x)
	require.NoError(t, err)
	readDirNames(t, filepath.Join(m.Dir, "versions", "v1"))
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(x, &st))
	require.Equal(t, before.ModTime().Unix(), st.Atim.Sec, "atime stays the version's timestamp")
}

// TestOptionsOwnerEnforced: with allow_other (which brings default_permissions) the kernel
// checks uid=, gid= and umask=; allow_other,umask=077 is what allow_root would have been.
func TestOptionsOwnerEnforced(t *testing.T) {
	file := permFile(t)
	const owner, group, stranger = 1234, nobody, 4321

	m := sharedMount(t, file, "ro,allow_other,uid=1234,gid=2345,umask=077")
	data := filepath.Join(m.Dir, "versions", "v1", "data")
	ops := [][]string{{"list", m.Dir}, {"read", data}}
	for _, uid := range []uint32{nobody, stranger} {
		for _, r := range probe(t, uid, ops...) {
			require.Equal(t, "EACCES", r.Result, "%s %s as uid %d", r.Op, r.Path, uid)
		}
	}
	for _, uid := range []uint32{owner, 0} { // the owner, and root (as with allow_root)
		for _, r := range probe(t, uid, ops...) {
			require.Equal(t, "ok", r.Result, "%s %s as uid %d", r.Op, r.Path, uid)
		}
	}

	// The group reads (0440 with umask=027), others get nothing, no one writes.
	m2 := sharedMount(t, file, "ro,allow_other,uid=1234,gid=65534,umask=027")
	data2 := filepath.Join(m2.Dir, "versions", "v1", "data")
	st := probe(t, group, []string{"stat", data2}, []string{"read", data2}, []string{"write", data2})
	require.Equal(t, "ok", st[0].Result)
	require.Equal(t, uint32(syscall.S_IFREG|0o440), st[0].Mode)
	require.Equal(t, owner, st[0].UID)
	require.Equal(t, group, st[0].GID)
	require.Equal(t, "ok", st[1].Result)
	require.Contains(t, []string{"EACCES", "EROFS"}, st[2].Result)
	for _, r := range probe(t, stranger, []string{"list", m2.Dir}, []string{"read", data2}) {
		require.Equal(t, "EACCES", r.Result, "%s %s as uid %d", r.Op, r.Path, stranger)
	}
}

// TestOptionsRefused: allow_root and auto_unmount are refused before anything is mounted,
// with one line and exit status 2, in both command forms.
func TestOptionsRefused(t *testing.T) {
	mnt := t.TempDir()
	unmountLater(t, mnt)
	file := fixturePath("basic_1d.h5")
	for _, tc := range []struct {
		opts, want string
	}{
		{"ro,allow_root", `vh5fs: mount option "allow_root" is not supported: use allow_other,umask=077 (only the owner and root get in)`},
		{"allow_other,allow_root", `vh5fs: mount option "allow_root" is not supported: use allow_other,umask=077 (only the owner and root get in)`},
		{"ro,auto_unmount", `vh5fs: mount option "auto_unmount" is not supported: vh5fs unmounts on Ctrl-C and SIGTERM; after a crash, umount the mount point`},
	} {
		for _, args := range [][]string{
			{"mount", "-o", tc.opts, file, mnt},
			{file, mnt, "-o", tc.opts},
		} {
			out, errOut, code := vh5fsRun(t, args...)
			require.Equal(t, 2, code, "%v: %s%s", args, out, errOut)
			require.Empty(t, out)
			require.Equal(t, tc.want+"\n", errOut, "%v", args)
			require.Empty(t, mountTableLine(t, mnt))
		}
	}
}

// TestOptionsFstab runs mount(8) -> mount.fuse3 -> vh5fs with uid=, gid=, umask= and the
// access-time options, then umount ends the daemon; allow_root is refused the same way.
func TestOptionsFstab(t *testing.T) {
	requireMountHelper(t)
	name := installHelper(t)
	file, err := filepath.Abs("testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)

	mnt := t.TempDir()
	unmountLater(t, mnt)
	opts := "ro,uid=1234,gid=2345,umask=027,noatime,nodiratime,blksize=4096,sync,nofail"
	out, err := exec.Command("mount", "-t", "fuse."+name, file, mnt, "-o", opts).CombinedOutput()
	require.NoError(t, err, "mount: %s", out)
	checkNodes(t, mnt, 1234, 2345, optionModes{0o550, 0o550, 0o440})
	mflags, super := mountFields(t, mnt)
	for _, o := range []string{"ro", "noatime", "nodiratime"} {
		require.Contains(t, mflags, o, "mount options %v", mflags)
	}
	require.Contains(t, super, "sync")
	checkServedAndUnmount(t, file, mnt)

	out, err = exec.Command("mount", "-t", "fuse."+name, file, mnt, "-o", "ro,allow_root").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `vh5fs: mount option "allow_root" is not supported: use allow_other,umask=077`)
	require.Empty(t, mountTableLine(t, mnt))
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}
