package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// brokenCase is one file of the hostile-input corpus (tests/py/make_broken.py writes them)
// and the contract it must meet: either the mount is refused with one line naming the
// problem, or it comes up, every intact dataset reads exactly what h5py reads, and what is
// damaged answers EIO. The daemon never dies, and `vh5fs fsck` reports the damage.
type brokenCase struct {
	name    string
	fixture string // the fixture it is derived from
	// mountErr, when set: the mount is refused with a line containing it.
	mountErr string
	// damaged are paths (relative to the mount) that answer EIO on stat, readdir, readlink
	// or read; everything below them may too. Every dataset of the fixture's manifest not
	// below one of them must read as the manifest says.
	damaged []string
	// missing are datasets of the manifest that are absent from the mount (ENOENT).
	missing []string
	// asH5py are datasets that read what h5py reads from the broken file (not the
	// manifest's bytes: the edit changed them in a way HDF5 resolves).
	asH5py []string
	// xattrEIO are nodes whose extended attributes answer EIO although their data is
	// served (metadata beside the data is damaged).
	xattrEIO []string
	// fsck is a substring of `vh5fs fsck`'s output (it must exit 1).
	fsck string
}

var brokenCases = []brokenCase{
	{name: "trunc_superblock", fixture: "basic_1d", mountErr: "truncated inside the superblock", fsck: "truncated inside the superblock"},
	{name: "trunc_metadata", fixture: "basic_1d", mountErr: "truncated: 19412 bytes, the superblock records 26969", fsck: "truncated"},
	{name: "trunc_chunks", fixture: "basic_1d", mountErr: "truncated: 15400 bytes, the superblock records 26969", fsck: "truncated"},
	{name: "trunc_chunks_eof", fixture: "grid_2d_gzip", damaged: []string{"versions/r5/temp"}, fsck: "row 41 (328, 333): slot unreadable"},
	{name: "ohdr_version", fixture: "basic_1d", damaged: []string{"versions/v2/x"}, fsck: "/_version_data/versions/v2/x: unreadable"},
	{name: "versions_btree", fixture: "basic_1d", damaged: []string{"versions", "current"}, fsck: "B-tree"},
	{name: "version_local_heap", fixture: "basic_1d", damaged: []string{"versions/v2"}, fsck: "symbol table heap"},
	{name: "chunk_btree", fixture: "basic_1d", damaged: []string{"versions/v1/x", "versions/v2/x", "versions/v3/x", "versions/v4/x"}, fsck: "slot unreadable"},
	{name: "chunk_address", fixture: "basic_1d", damaged: []string{"versions/v1/x", "versions/v2/x"}, fsck: "row 2 (8, 10): slot unreadable"},
	{name: "gheap_mapping", fixture: "basic_1d", damaged: []string{"versions/v2/x"}, fsck: "checksum"},
	{name: "gheap_signature", fixture: "grid_2d_gzip", damaged: []string{"versions/r2"}, fsck: "/_version_data/versions/r2: attributes unreadable"},
	{name: "gheap_torn", fixture: "basic_1d", damaged: []string{"current", "versions/v1", "versions/v2", "versions/v3", "versions/v4"}, xattrEIO: []string{""}, fsck: "size 0 does not fit the collection"},
	{name: "current_version_int", fixture: "basic_1d", damaged: []string{"current"}, xattrEIO: []string{""}, fsck: "attribute current_version is not a scalar variable-length string"},
	{name: "committed_string", fixture: "basic_1d", fsck: "committed is not an h5py bool"},
	{name: "data_version_string", fixture: "basic_1d", mountErr: `unsupported data_version: data_version attribute is the string "4", not an integer`, fsck: "data_version"},
	{name: "timestamp_int", fixture: "basic_1d", fsck: "attribute timestamp is not a scalar variable-length string"},
	{name: "vds_out_of_range", fixture: "basic_1d", damaged: []string{"versions/v2/x"}, fsck: "raw_data[400:404] on axis 0, beyond its extent [24]"},
	{name: "vds_source_misaligned", fixture: "basic_1d", asH5py: []string{"v2/x"}, xattrEIO: []string{"versions/v2/x"}, fsck: "source row 14 is not a slot"},
	{name: "vds_virtual_misaligned", fixture: "basic_1d", asH5py: []string{"v2/x"}, fsck: "mapping at [5]: not chunk-aligned"},
	{name: "hash_table_short", fixture: "grid_2d_gzip", fsck: "10 rows for largest_index 42"},
	{name: "raw_data_missing", fixture: "nested", damaged: []string{"versions/base/top", "versions/added/top"}, fsck: "/_version_data/versions/base/top: unreadable"},
	{name: "current_version_missing", fixture: "basic_1d", damaged: []string{"current"}, fsck: `current_version "v9" is not a version`},
	{name: "version_dataset_dangling", fixture: "basic_1d", missing: []string{"v2/x"}, fsck: "/_version_data/versions/v2/x: not a hard link to a group or dataset"},
}

// TestBroken mounts every file of the corpus and holds it to its case's contract.
func TestBroken(t *testing.T) {
	dir := t.TempDir()
	out := run(t, python(t), "py/make_broken.py", fixture.Dir(), dir)
	made := strings.Fields(out)
	var names []string
	for _, c := range brokenCases {
		names = append(names, c.name)
	}
	sort.Strings(made)
	sort.Strings(names)
	require.Equal(t, names, made, "every file of the corpus has a case")

	for _, c := range brokenCases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, c.name+".h5")
			before, err := os.ReadFile(file)
			require.NoError(t, err)
			checkFsck(t, file, c.fsck)
			checkCommands(t, file)
			if c.mountErr != "" {
				checkMountRefused(t, file, c.mountErr)
			} else {
				checkBrokenMount(t, file, c)
			}
			after, err := os.ReadFile(file)
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "the file was modified")
		})
	}
}

// noCrash fails on the marks of a crash or of libhdf5's error-stack printing.
func noCrash(t *testing.T, what, output string) {
	t.Helper()
	for _, bad := range []string{"panic", "goroutine ", "SIGSEGV", "fatal error", "HDF5-DIAG", "runtime error"} {
		if i := strings.Index(output, bad); i >= 0 {
			t.Fatalf("%s: %q in its output:\n%s", what, bad, output[max(0, i-500):min(len(output), i+1500)])
		}
	}
}

func checkFsck(t *testing.T, file, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, vh5fsBin, "fsck", file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "fsck must fail: %s%s", stdout.String(), stderr.String())
	require.Equal(t, 1, exit.ExitCode(), "fsck: %s%s", stdout.String(), stderr.String())
	all := stdout.String() + stderr.String()
	noCrash(t, "fsck", all)
	require.Contains(t, all, want)
	// The last line of stderr is vh5fs's one-line verdict.
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, 1, "fsck stderr: %s", stderr.String())
	require.True(t, strings.HasPrefix(lines[0], "vh5fs: "+file+": "), "fsck stderr: %s", stderr.String())
}

// checkCommands runs the commands that read a file without mounting it: each ends within
// its time (libhdf5 must not be left looping on the damage), without crashing, and either
// succeeds or fails with one line naming the file.
func checkCommands(t *testing.T, file string) {
	t.Helper()
	for _, args := range [][]string{{"log", file}, {"ls", file}, {"info", file}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, vh5fsBin, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		noCrash(t, args[0], stdout.String()+stderr.String())
		if err == nil {
			continue
		}
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%v", args)
		require.Equal(t, 1, exit.ExitCode(), "vh5fs %v (a timeout kills it): %s", args, stderr.String())
		msg := strings.TrimSuffix(stderr.String(), "\n")
		require.NotContains(t, msg, "\n", "one line: vh5fs %v", args)
		require.True(t, strings.HasPrefix(msg, "vh5fs: "+file+": "), "vh5fs %v names the file: %q", args, msg)
	}
}

func checkMountRefused(t *testing.T, file, want string) {
	t.Helper()
	mnt := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, vh5fsBin, "mount", file, mnt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if isMountpoint(t, mnt) {
		exec.Command("fusermount3", "-u", mnt).Run()
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the mount must be refused")
	require.Equal(t, 1, exit.ExitCode())
	noCrash(t, "mount", stderr.String())
	msg := strings.TrimSuffix(stderr.String(), "\n")
	require.NotContains(t, msg, "\n", "one line")
	require.True(t, strings.HasPrefix(msg, "vh5fs: "+file+": "), "names the file: %q", msg)
	require.Contains(t, msg, want)
}

// under reports whether path is p or below p (p "" is the mount's root).
func under(path string, ps []string) bool {
	for _, p := range ps {
		if path == p || p == "" || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func checkBrokenMount(t *testing.T, file string, c brokenCase) {
	m := mount(t, file)
	alive := func(after string) {
		t.Helper()
		select {
		case err := <-m.done:
			m.done <- err
			t.Fatalf("vh5fs died after %s: %v\n%s", after, err, m.stderr)
		default:
		}
		require.True(t, isMountpoint(t, m.Dir), "mount gone after %s", after)
	}

	// Walk the whole tree: readdir, lstat, readlink, read and every xattr of every node.
	// Every error must be EIO, on a damaged node.
	eio := map[string]bool{} // nodes that answered EIO to something other than xattrs
	var walk func(rel string)
	visit := func(rel string) {
		path := filepath.Join(m.Dir, rel)
		st, err := os.Lstat(path)
		if err != nil {
			require.ErrorIs(t, err, syscall.EIO, "lstat %s", rel)
			require.True(t, under(rel, c.damaged), "lstat %s: %v", rel, err)
			eio[rel] = true
			return
		}
		checkXattrs(t, path, rel, under(rel, c.damaged) || contains(c.xattrEIO, rel))
		switch {
		case st.IsDir():
			walk(rel)
		case st.Mode()&fs.ModeSymlink != 0:
			if _, err := os.Readlink(path); err != nil {
				require.ErrorIs(t, err, syscall.EIO, "readlink %s", rel)
				require.True(t, under(rel, c.damaged), "readlink %s: %v", rel, err)
				eio[rel] = true
			} else if _, err := os.Stat(path); err != nil {
				require.ErrorIs(t, err, syscall.EIO, "stat %s", rel)
				require.True(t, under(rel, c.damaged), "stat %s: %v", rel, err)
				eio[rel] = true
			}
		default:
			if _, err := os.ReadFile(path); err != nil {
				require.ErrorIs(t, err, syscall.EIO, "read %s", rel)
				require.True(t, under(rel, c.damaged), "read %s: %v", rel, err)
				eio[rel] = true
			}
		}
	}
	walk = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(m.Dir, rel))
		if err != nil {
			require.ErrorIs(t, err, syscall.EIO, "readdir %s", rel)
			require.True(t, under(rel, c.damaged), "readdir %s: %v", rel, err)
			eio[rel] = true
			return
		}
		for _, e := range entries {
			visit(filepath.Join(rel, e.Name()))
		}
	}
	visit("")
	alive("the walk")

	// Every damaged node answered EIO to something, by name if the walk did not reach it.
	for _, d := range c.damaged {
		if eio[d] {
			continue
		}
		path := filepath.Join(m.Dir, d)
		_, err := os.Stat(path)
		if err == nil {
			if st, _ := os.Lstat(path); st.IsDir() {
				_, err = os.ReadDir(path)
			} else {
				_, err = os.ReadFile(path)
			}
		}
		require.ErrorIs(t, err, syscall.EIO, "%s is damaged", d)
	}
	alive("the damaged nodes")

	// Every other dataset of the fixture reads as h5py reads it.
	man, err := fixture.Load(filepath.Join(fixture.Dir(), c.fixture+".json"))
	require.NoError(t, err)
	for _, v := range man.Versions {
		for p, d := range v.Datasets {
			rel := filepath.Join("versions", v.Name, p)
			key := v.Name + "/" + p
			if under(rel, c.damaged) {
				continue
			}
			data, err := os.ReadFile(filepath.Join(m.Dir, rel))
			if contains(c.missing, key) {
				require.ErrorIs(t, err, os.ErrNotExist, rel)
				continue
			}
			require.NoError(t, err, rel)
			var want string
			switch {
			case contains(c.asH5py, key):
				want = h5pySHA256(t, file, "/_version_data/versions/"+key)
			case d.IsString():
				text, err := d.Text()
				require.NoError(t, err)
				sum := sha256.Sum256(text)
				want = hex.EncodeToString(sum[:])
			default:
				want = *d.SHA256
			}
			sum := sha256.Sum256(data)
			require.Equal(t, want, hex.EncodeToString(sum[:]), rel)
		}
	}
	alive("reading the intact datasets")
	m.unmount(t)
	noCrash(t, "mount", m.stderr.String())
}

// checkXattrs lists and gets every extended attribute of path; errors must be EIO and
// allowed.
func checkXattrs(t *testing.T, path, rel string, allowEIO bool) {
	t.Helper()
	names, err := xattr.LList(path)
	if err != nil {
		require.ErrorIs(t, err, syscall.EIO, "listxattr %s", rel)
		require.True(t, allowEIO, "listxattr %s: %v", rel, err)
		return
	}
	for _, n := range names {
		if _, err := xattr.LGet(path, n); err != nil {
			require.ErrorIs(t, err, syscall.EIO, "getxattr %s %s", rel, n)
			require.True(t, allowEIO, "getxattr %s %s: %v", rel, n, err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// h5pySHA256 is the SHA-256 of the bytes h5py reads from dataset ds of file.
func h5pySHA256(t *testing.T, file, ds string) string {
	t.Helper()
	out := run(t, python(t), "-c", `import sys, hashlib, h5py
with h5py.File(sys.argv[1], "r") as f:
    print(hashlib.sha256(f[sys.argv[2]][()].tobytes()).hexdigest())`, file, ds)
	return strings.TrimSpace(out)
}
