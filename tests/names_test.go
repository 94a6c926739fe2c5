package tests

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Odd names: versions, groups and datasets named with spaces, UTF-8, leading dots,
// backslashes, newlines, tabs, 200 and 255 bytes are served byte for byte; names that
// cannot be file names (over 255 bytes, "..") are left out and unreachable.
// tests/py/odd_names.py writes the file and dumps what h5py reads from it.

// oddTree is odd_names.py's dump.
type oddTree struct {
	Current  string                                            `json:"current"`
	Versions []string                                          `json:"versions"`
	Trees    map[string]map[string]struct{ Hex, Dtype string } `json:"trees"`
	Groups   map[string][]string                               `json:"groups"`
}

func oddDump(t *testing.T, file string) oddTree {
	t.Helper()
	var d oddTree
	require.NoError(t, json.Unmarshal([]byte(run(t, python(t), "py/odd_names.py", "dump", file)), &d))
	return d
}

// fileName is the rule the mount follows: a link is served when its name can be a file
// name.
func fileName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 && !strings.ContainsAny(name, "/\x00")
}

// servedPath: every component of a relative path can be a file name.
func servedPath(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if !fileName(c) {
			return false
		}
	}
	return true
}

func oddFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "odd names.h5")
	run(t, python(t), "py/odd_names.py", "make", f)
	return f
}

// checkTree walks dir in the mount and requires exactly the served files and groups of
// the dumped tree, each file byte-identical to h5py's read, with its dtype in the xattr
// (via getfattr(1) and getxattr(2)), every directory on the mount's device and none
// reached twice.
func checkTree(t *testing.T, mnt, dir string, files map[string]struct{ Hex, Dtype string }, groups []string, seen map[uint64]string) {
	t.Helper()
	var wantFiles, wantDirs, gotFiles, gotDirs []string
	for rel := range files {
		if servedPath(rel) {
			wantFiles = append(wantFiles, rel)
		}
	}
	for _, rel := range groups {
		if servedPath(rel) {
			wantDirs = append(wantDirs, rel)
		}
	}
	var mst syscall.Stat_t
	require.NoError(t, syscall.Stat(mnt, &mst))
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		require.NoError(t, err, p)
		var st syscall.Stat_t
		require.NoError(t, syscall.Lstat(p, &st), p)
		require.Equal(t, mst.Dev, st.Dev, "%q is outside the mount", p)
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		require.True(t, fileName(e.Name()), "served %q", e.Name())
		if e.IsDir() {
			prev, dup := seen[st.Ino]
			require.False(t, dup, "%q and %q are the same directory", p, prev)
			seen[st.Ino] = p
			gotDirs = append(gotDirs, rel)
			return nil
		}
		require.True(t, e.Type().IsRegular(), "%q: %v", p, e.Type())
		gotFiles = append(gotFiles, rel)
		want, ok := files[rel]
		require.True(t, ok, "%q is not in the file", rel)
		data, err := os.ReadFile(p)
		require.NoError(t, err, p)
		require.Equal(t, want.Hex, hex.EncodeToString(data), "%q", rel)
		require.Equal(t, want.Dtype, strings.TrimSpace(run(t, "getfattr", "--only-values", "-n", "user.vh5fs.dtype", p)), "%q", rel)
		buf := make([]byte, 64)
		n, err := syscall.Getxattr(p, "user.vh5fs.shape", buf)
		require.NoError(t, err, p)
		require.Positive(t, n, p)
		return nil
	}))
	for _, l := range [][]string{wantFiles, wantDirs, gotFiles, gotDirs} {
		sort.Strings(l)
	}
	require.Equal(t, wantFiles, gotFiles, "files under %q", dir)
	require.Equal(t, wantDirs, gotDirs, "directories under %q", dir)
}

func TestNamesOdd(t *testing.T) {
	file := oddFile(t)
	d := oddDump(t, file)
	tooLong := strings.Repeat("x", 256)
	// The file really has the names the mount must leave out.
	require.Contains(t, d.Versions, "..")
	require.Contains(t, d.Versions, tooLong)
	require.Contains(t, d.Trees["versions/v 1"], "..")
	require.Contains(t, d.Trees["versions/v 1"], tooLong)
	require.Contains(t, d.Trees["plain odd"], "..")
	require.Contains(t, d.Trees["plain odd"], "ok/"+tooLong)

	m := mount(t, file)
	mnt := m.Dir

	// The root: versions, current and the plain group.
	names := func(dir string) []string {
		es, err := os.ReadDir(dir)
		require.NoError(t, err, dir)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	require.Equal(t, []string{"at", "branches", "current", "plain odd", "tags", "versions"}, names(mnt))

	var wantVersions []string
	for _, v := range d.Versions {
		if fileName(v) {
			wantVersions = append(wantVersions, v)
		}
	}
	sort.Strings(wantVersions)
	require.Len(t, wantVersions, len(d.Versions)-2)
	require.Equal(t, wantVersions, names(filepath.Join(mnt, "versions")))

	seen := map[uint64]string{}
	for _, v := range wantVersions {
		dir := filepath.Join(mnt, "versions", v)
		checkTree(t, mnt, dir, d.Trees["versions/"+v], d.Groups["versions/"+v], seen)
		got, err := getxattr(dir, "user.vh5fs.version")
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
	checkTree(t, mnt, filepath.Join(mnt, "plain odd"), d.Trees["plain odd"], d.Groups["plain odd"], seen)

	// current: the symlink's target is the version's name as stored, newline and all,
	// and it resolves inside the mount.
	require.Equal(t, "new\nline", d.Current)
	target, err := os.Readlink(filepath.Join(mnt, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/new\nline", target)
	real, err := filepath.EvalSymlinks(filepath.Join(mnt, "current"))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(mnt, "versions", "new\nline"), real)
	cur, err := os.ReadFile(filepath.Join(mnt, "current", "数据"))
	require.NoError(t, err)
	require.Equal(t, d.Trees["versions/new\nline"]["数据"].Hex, hex.EncodeToString(cur))
	got, err := getxattr(mnt, "user.vh5fs.current_version")
	require.NoError(t, err)
	require.Equal(t, "new\nline", got)

	// Names longer than a file name: the kernel answers ENAMETOOLONG before asking vh5fs.
	for _, p := range []string{
		filepath.Join(mnt, "versions", tooLong),
		filepath.Join(mnt, "versions", "v 1", tooLong),
		filepath.Join(mnt, "plain odd", "ok", tooLong),
	} {
		_, err := os.Lstat(p)
		require.True(t, errors.Is(err, syscall.ENAMETOOLONG), "%v", err)
	}
	// The 255-byte group name is the longest served; it reads like any other.
	long255 := strings.Repeat("é", 127) + "e"
	require.Len(t, long255, 255)
	x, err := os.ReadFile(filepath.Join(mnt, "versions", "v 1", long255, "x"))
	require.NoError(t, err)
	require.Equal(t, d.Trees["versions/v 1"][long255+"/x"].Hex, hex.EncodeToString(x))

	// ".." in a path is the kernel's parent, never the HDF5 link named "..".
	sameDir := func(a, b string) {
		var sa, sb syscall.Stat_t
		require.NoError(t, syscall.Stat(a, &sa), a)
		require.NoError(t, syscall.Stat(b, &sb), b)
		require.Equal(t, sb.Ino, sa.Ino, "%q is not %q", a, b)
		require.True(t, sa.Mode&syscall.S_IFDIR != 0, a)
	}
	sameDir(mnt+"/versions/v 1/..", mnt+"/versions")
	sameDir(mnt+"/versions/..", mnt)
	sameDir(mnt+"/plain odd/..", mnt)
	sameDir(mnt+"/versions/v 1/.hidden group/..", mnt+"/versions/v 1")
	// "." and ".." are no names of HDF5 objects: not listed (also not by getdents), and
	// "deep/..." (three dots) is an ordinary group.
	for _, dir := range []string{mnt + "/versions", mnt + "/versions/v 1", mnt + "/plain odd"} {
		f, err := os.Open(dir)
		require.NoError(t, err)
		all, err := f.Readdirnames(-1)
		f.Close()
		require.NoError(t, err)
		require.NotContains(t, all, "..")
		require.NotContains(t, all, ".")
	}
	require.Equal(t, []string{"d"}, names(mnt+"/versions/v 1/deep/..."))
	require.Empty(t, names(mnt+"/versions/v 1/ok"))
}

// getxattr returns the value of one extended attribute.
func getxattr(path, name string) (string, error) {
	buf := make([]byte, 64<<10)
	n, err := syscall.Getxattr(path, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func TestNamesOddCommit(t *testing.T) {
	file := oddFile(t)
	before := oddDump(t, file)

	// The first commit's name from -o (a comma escaped as the mount options require),
	// the second's from user.vh5fs.next_version: newline, backslash, UTF-8, spaces.
	first, second := "odd, é name", "second\nwith\\back é "
	m := mount(t, file, `rw,commit_name=odd\, é name`)
	mnt := m.Dir

	write := func(rel string, val byte) {
		f, err := os.OpenFile(filepath.Join(mnt, "current", rel), os.O_WRONLY, 0)
		require.NoError(t, err, rel)
		_, err = f.WriteAt([]byte{val, 0, 0, 0}, 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	write("température", 7)
	target, err := os.Readlink(filepath.Join(mnt, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/"+first, target)

	require.NoError(t, syscall.Setxattr(mnt, "user.vh5fs.next_version", []byte(second), 0))
	got, err := getxattr(mnt, "user.vh5fs.next_version")
	require.NoError(t, err)
	require.Equal(t, second, got)
	// Names that cannot be a version's file name are refused.
	for _, bad := range []string{strings.Repeat("y", 256), "..", ".", "a/b"} {
		err := syscall.Setxattr(mnt, "user.vh5fs.next_version", []byte(bad), 0)
		require.True(t, errors.Is(err, syscall.EINVAL), "%q: %v", bad, err)
	}
	write(".hidden group/数据", 9)
	target, err = os.Readlink(filepath.Join(mnt, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/"+second, target)

	es, err := os.ReadDir(filepath.Join(mnt, "versions"))
	require.NoError(t, err)
	var listed []string
	for _, e := range es {
		listed = append(listed, e.Name())
	}
	require.Contains(t, listed, first)
	require.Contains(t, listed, second)
	data, err := os.ReadFile(filepath.Join(mnt, "versions", second, ".hidden group", "数据"))
	require.NoError(t, err)
	require.Equal(t, byte(9), data[0])
	m.unmount(t)

	// What h5py reads afterwards: the two new versions under exactly those names, each
	// with the one element written and everything else as in its parent.
	after := oddDump(t, file)
	require.ElementsMatch(t, append(append([]string(nil), before.Versions...), first, second), after.Versions)
	require.Equal(t, second, after.Current)
	base := before.Trees["versions/new\nline"]
	for rel, want := range base {
		if !servedPath(rel) {
			continue
		}
		for _, v := range []string{first, second} {
			gotTree := after.Trees["versions/"+v]
			require.Contains(t, gotTree, rel, "%q in %q", rel, v)
			w := want.Hex
			if rel == "température" {
				w = "07000000" + w[8:]
			}
			if rel == ".hidden group/数据" && v == second {
				w = "09000000" + w[8:]
			}
			require.Equal(t, w, gotTree[rel].Hex, "%q in %q", rel, v)
		}
	}
}
