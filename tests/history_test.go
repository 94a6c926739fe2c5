package tests

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// branchedFile copies basic_1d.h5 (v1 <- v2 <- v3 <- v4) and commits b1 on top of v2
// through a read-write mount (writing versions/v2/x), so the file has a branch.
func branchedFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "branched.h5")
	copyFile(t, fixturePath("basic_1d.h5"), file)
	m := mount(t, file, "rw,commit_name=b1")
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions", "v2", "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{9, 0, 0, 0, 0, 0, 0, 0}, 8) // x[1] := 9
	require.NoError(t, err)
	require.NoError(t, f.Close())
	m.unmount(t)
	return file
}

// TestLogAll: every version with its branches, as git log --all --graph --oneline draws
// them; the plain log still follows the current version's ancestry.
func TestLogAll(t *testing.T) {
	file := branchedFile(t)
	out, stderr, code := vh5fsRun(t, "log", "--all", file)
	require.Equal(t, 0, code, stderr)
	ts := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\+0000`)
	require.Equal(t, `* b1  TS  1 changed (current)
| * v4  2024-01-01 03:00:00.000000+0000  1 changed
| * v3  2024-01-01 02:00:00.000000+0000  1 changed
|/
* v2  2024-01-01 01:00:00.000000+0000  1 changed
* v1  2024-01-01 00:00:00.000000+0000  1 changed
`, strings.Replace(out, ts.FindString(out), "TS", 1))

	out, _, code = vh5fsRun(t, "log", "--all", "-n2", file)
	require.Equal(t, 0, code)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2)

	out, _, code = vh5fsRun(t, "log", "--oneline", file)
	require.Equal(t, 0, code)
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		names = append(names, strings.Fields(l)[0])
	}
	require.Equal(t, []string{"b1", "v2", "v1"}, names, "log without --all: the current version's ancestry")

	_, stderr, code = vh5fsRun(t, "log", "--all", file, "v2")
	require.Equal(t, 2, code)
	require.Equal(t, "vh5fs: log: --all shows every version: give no VERSION or --at; see 'vh5fs help log'", oneLine(t, stderr))
}

// TestDiffElements: `vh5fs diff` says per dataset how many elements changed and the range
// of their old and new values, and what a shape change added and removed; h5py computes
// the same lines from each version's virtual dataset, for every ordered pair of versions.
func TestDiffElements(t *testing.T) {
	script := `import h5py, json, numpy as np, sys
def fmt(x):
    x = x.item()
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)
def rng(v):
    if v.size == 0:
        return ""
    lo, hi = fmt(v.min()), fmt(v.max())
    return lo if lo == hi else lo + ".." + hi
path, ds = sys.argv[1], sys.argv[2]
f = h5py.File(path, "r")
g = f["_version_data/versions"]
vs = [v for v in g if v != "__first_version__"]
out = {}
for a in vs:
    for b in vs:
        x, y = g[a][ds][()], g[b][ds][()]
        ov = tuple(slice(0, min(p, q)) for p, q in zip(x.shape, y.shape))
        ch = x[ov] != y[ov]
        n = int(ch.sum())
        shape = lambda s: json.dumps(list(s)).replace(" ", "")
        if n == 0 and x.shape == y.shape:
            out[a + " " + b] = "%s: unchanged, shape %s" % (ds, shape(y.shape))
            continue
        line = "%s: %d of %d elements changed" % (ds, n, x[ov].size)
        if n:
            line += " (old %s, new %s)" % (rng(x[ov][ch]), rng(y[ov][ch]))
        if x.shape != y.shape:
            ma, mr = np.ones(y.shape, bool), np.ones(x.shape, bool)
            ma[ov], mr[ov] = False, False
            note = lambda v: " (values %s)" % rng(v) if v.size else ""
            line += "; shape %s -> %s, %d added%s, %d removed%s" % (shape(x.shape), shape(y.shape),
                int(ma.sum()), note(y[ma]), int(mr.sum()), note(x[mr]))
        out[a + " " + b] = line
print(json.dumps(out))`
	for _, tc := range []struct{ file, ds string }{
		{"basic_1d.h5", "x"},
		{"grid_2d_gzip.h5", "temp"},
		{"golden_grow-after.h5", "x"},
		{"golden_shrink-after.h5", "temp"},
		{"golden_partial_chunk-after.h5", "x"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			file := fixturePath(tc.file)
			raw, err := exec.Command(python(t), "-c", script, file, tc.ds).Output()
			require.NoError(t, err)
			var want map[string]string
			require.NoError(t, json.Unmarshal(raw, &want))
			require.NotEmpty(t, want)
			changed := 0
			for pair, line := range want {
				v1, v2, _ := strings.Cut(pair, " ")
				out, stderr, code := vh5fsRun(t, "diff", file, v1, v2, tc.ds)
				require.Equal(t, 0, code, stderr)
				require.Equal(t, line+"\n", out, pair)
				if !strings.Contains(line, "unchanged") {
					changed++
				}
			}
			require.Positive(t, changed)
		})
	}
}

// TestMountAt: --at TIME / -o at=TIME mounts the file as it was then, read-only: current
// is the version current at TIME (the one stamped exactly TIME, else the newest before),
// later versions do not exist. basic_1d's versions are stamped 00:00, 01:00, 02:00, 03:00.
func TestMountAt(t *testing.T) {
	file := fixturePath("basic_1d.h5")
	v2 := int64Bytes(0, 1, 2, 3, 40, 50, 60, 70, 8, 9)
	for _, tc := range []struct {
		name    string
		argv    func(mnt string) []string
		current string
		names   []string
	}{
		{"--at between v2 and v3", func(mnt string) []string {
			return []string{vh5fsBin, "mount", "--at", "2024-01-01 01:30:00", file, mnt}
		}, "v2", []string{"v1", "v2"}},
		{"-o at= exactly v3", func(mnt string) []string {
			return []string{vh5fsBin, "mount", "-o", "at=2024-01-01 02:00:00", file, mnt}
		}, "v3", []string{"v1", "v2", "v3"}},
		{"-o at= RFC 3339 with a zone", func(mnt string) []string {
			return []string{vh5fsBin, "mount", "-o", "ro,at=2024-01-01T02:30:00+01:00", file, mnt}
		}, "v2", []string{"v1", "v2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := t.TempDir()
			m := startMount(t, mnt, tc.argv(mnt))
			target, err := os.Readlink(filepath.Join(m.Dir, "current"))
			require.NoError(t, err)
			require.Equal(t, "versions/"+tc.current, target)
			require.Equal(t, tc.names, readDirNames(t, filepath.Join(m.Dir, "versions")))
			_, err = os.Stat(filepath.Join(m.Dir, "versions", "v4"))
			require.ErrorIs(t, err, os.ErrNotExist, "a later version does not exist")
			if tc.current == "v2" {
				b, err := os.ReadFile(filepath.Join(m.Dir, "current", "x"))
				require.NoError(t, err)
				require.Equal(t, v2, b)
			}
			_, err = os.OpenFile(filepath.Join(m.Dir, "current", "x"), os.O_WRONLY, 0)
			require.ErrorIs(t, err, syscall.EROFS)
		})
	}

	// The fstab form takes it as an option too.
	mnt := t.TempDir()
	unmountLater(t, mnt)
	_, stderr, code := vh5fsRun(t, file, mnt, "-o", "ro,at=2024-01-01T01:30:00Z")
	require.Equal(t, 0, code, stderr)
	target, err := os.Readlink(filepath.Join(mnt, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/v2", target)
	out, err := exec.Command("umount", mnt).CombinedOutput()
	require.NoError(t, err, "%s", out)

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mount", "--at", "2020-01-01", file, mnt}, 1, "vh5fs: " + file + ": no version at or before 2020-01-01 00:00:00.000000+0000"},
		{[]string{"mount", "--at", "noon", file, mnt}, 2, `vh5fs: mount: cannot read time "noon"`},
		{[]string{"mount", "-o", "rw,at=2024-01-01", file, mnt}, 2, "vh5fs: mount: at=TIME shows the past, read-only: it cannot be combined with rw or live"},
		{[]string{"mount", "--at", "2024-01-02", "testdata/extra/plain.h5", mnt}, 1, "vh5fs: testdata/extra/plain.h5: at=TIME needs a versioned-hdf5 file (no _version_data)"},
	} {
		_, stderr, code := vh5fsRun(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.True(t, strings.HasPrefix(oneLine(t, stderr), tc.want), "%v: %s", tc.args, stderr)
		require.False(t, isMountpoint(t, mnt))
	}
}

// int64Bytes is int64 values as little-endian bytes.
func int64Bytes(vs ...int64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}
