package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// builtHDF5 is the major and minor version of the libhdf5 the binary under test runs with,
// from `vh5fs --version`.
func builtHDF5(t *testing.T) (major, minor int) {
	t.Helper()
	out := run(t, vh5fsBin, "--version")
	m := regexp.MustCompile(`(?m)^HDF5 (\d+)\.(\d+)\.`).FindStringSubmatch(out)
	require.NotNil(t, m, "vh5fs --version names no HDF5: %q", out)
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor
}

// TestLatestFormat runs every operation on the files of testdata/latest, which
// versioned-hdf5 wrote on HDF5 1.14 with the default library bounds and with
// libver="latest", and h5repack -L copied (testdata/make_latest.py), and whose mapping
// lists h5meta's tests re-encoded as HDF5 2.x does (heapv1-*): reads work on every
// build; a build whose libhdf5 knows the encodings commits, deletes, modifies, compacts and
// checks them (fsck clean after each); an older one refuses each of those in one line that
// names the encoding and the rebuild, and leaves the file as it was.
func TestLatestFormat(t *testing.T) {
	paths, err := filepath.Glob("testdata/latest/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	major, minor := builtHDF5(t)
	built := major*100 + minor
	for _, p := range paths {
		m, err := fixture.Load(p)
		require.NoError(t, err)
		name := filepath.Base(m.H5)
		// What the file needs of libhdf5 beyond reads: 1.12 for libver="latest" of HDF5
		// 1.14 (and h5repack -L), 2.0 for mapping lists of version 1 (heapv1-*).
		needs := 110
		switch {
		case strings.HasPrefix(name, "heapv1-"):
			needs = 200
		case strings.Contains(name, "-latest"), strings.HasPrefix(name, "repack-"):
			needs = 112
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("read", func(t *testing.T) {
				mnt := mount(t, m.H5)
				require.Equal(t, m.VersionNames(), readDirNames(t, filepath.Join(mnt.Dir, "versions")))
				checkManifest(t, mnt.Dir, m)
			})
			if built < needs {
				t.Run("refused", func(t *testing.T) { latestRefused(t, m, needs) })
				return
			}
			t.Run("edits", func(t *testing.T) { latestEdits(t, m) })
		})
	}
}

// latestRefused checks that every operation that goes through libhdf5 refuses the file in
// one line and leaves it untouched.
func latestRefused(t *testing.T, m *fixture.Manifest, needs int) {
	file := fixture.Copy(t, m.H5)
	before := fileSum(t, file)
	ds := firstNumeric(t, m)
	oldest := versionsByTime(m)[0].Name
	for _, args := range [][]string{
		{"fsck", file},
		{"fsck", "--repair", file},
		{"delete", file, oldest},
		{"modify", file, ds, "--compression", "gzip"},
		{"compact", file},
		{"tag", file, "kept", m.CurrentVersion},
		{"mount", "-o", "rw", file, t.TempDir()},
	} {
		_, stderr, code := vh5fsRun(t, args...)
		require.NotZero(t, code, "vh5fs %v", args)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		require.Len(t, lines, 1, "vh5fs %v: one line: %s", args, stderr)
		if needs >= 200 {
			require.Contains(t, lines[0], "mapping list encoding version 1", "vh5fs %v", args)
			require.Contains(t, lines[0], "rebuild vh5fs against HDF5 >= 2.0", "vh5fs %v", args)
		} else {
			require.Regexp(t, `(hyperslab selection|datatype message) version \d`, lines[0])
			require.Contains(t, lines[0], "rebuild vh5fs against HDF5 >= 1.14", "vh5fs %v", args)
		}
		require.NotContains(t, lines[0], "corrupt")
		require.Equal(t, before, fileSum(t, file), "vh5fs %v changed the file", args)
	}
}

// latestEdits commits through a read-write mount, deletes the oldest version, rechunks a
// dataset and compacts, checking with fsck and through a mount after each step, and with
// versioned-hdf5 on HDF5 1.14 (VH5FS_PY114) that it reads and extends the commit.
func latestEdits(t *testing.T, m *fixture.Manifest) {
	file := fixture.Copy(t, m.H5)
	ds := firstNumeric(t, m)
	cur := versionOf(m, m.CurrentVersion)
	d := cur.Datasets[ds]

	// A commit: the first element of ds, bit-flipped.
	mnt := mount(t, file, "rw")
	path := filepath.Join(mnt.Dir, "current", ds)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	item := int(d.NBytes / elements(d.Shape))
	patch := make([]byte, item)
	for i := range patch {
		patch[i] = ^data[i]
	}
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = fh.WriteAt(patch, 0)
	require.NoError(t, err)
	require.NoError(t, fh.Sync())
	require.NoError(t, fh.Close())
	target, err := os.Readlink(filepath.Join(mnt.Dir, "current"))
	require.NoError(t, err)
	committed := strings.TrimPrefix(target, "versions/")
	require.NotEqual(t, m.CurrentVersion, committed)
	mnt.unmount(t)
	want := append(patch, data[item:]...)
	sum := sha256.Sum256(want)
	fsckClean(t, file)
	checkLatest(t, file, m, map[string][]byte{committed + "/" + ds: want})

	if py := os.Getenv("VH5FS_PY114"); py != "" {
		// The committed version: the base's datasets, ds with its new bytes.
		datasets := map[string]map[string]any{}
		for p, d := range cur.Datasets {
			e := map[string]any{"dtype": d.DType, "shape": d.Shape}
			switch {
			case p == ds:
				e["sha256"] = hex.EncodeToString(sum[:])
			case len(d.Values) > 0 && string(d.Values) != "null":
				e["values"] = d.Values
			case d.SHA256 != nil:
				e["sha256"] = *d.SHA256
			}
			datasets[p] = e
		}
		expect, err := json.Marshal(datasets)
		require.NoError(t, err)
		roundtrip := fixture.Copy(t, file)
		cmd := exec.Command("/usr/bin/python3", "py/latest_roundtrip.py", roundtrip, strings.TrimSuffix(m.H5, ".h5")+".json",
			"--expect", string(expect), "--current", committed)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+py)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "versioned-hdf5 on HDF5 1.14 reading and extending vh5fs's commit:\n%s", out)
	}

	// A deletion of the oldest version, string data groups among them.
	oldest := versionsByTime(m)[0].Name
	run(t, vh5fsBin, "delete", file, oldest)
	fsckClean(t, file)
	m = withoutVersion(m, oldest)
	checkLatest(t, file, m, map[string][]byte{committed + "/" + ds: want})

	// A rewrite of ds's storage in every version, then the space given back.
	run(t, vh5fsBin, "modify", file, ds, "--chunks", chunksOtherThan(d.Chunks))
	fsckClean(t, file)
	checkLatest(t, file, m, map[string][]byte{committed + "/" + ds: want})
	run(t, vh5fsBin, "compact", file)
	fsckClean(t, file)
	checkLatest(t, file, m, map[string][]byte{committed + "/" + ds: want})
}

// checkLatest mounts file read-only and checks the manifest's versions and the extra
// datasets given ("version/path": bytes).
func checkLatest(t *testing.T, file string, m *fixture.Manifest, extra map[string][]byte) {
	t.Helper()
	mnt := mount(t, file)
	checkManifest(t, mnt.Dir, m)
	for p, want := range extra {
		got, err := os.ReadFile(filepath.Join(mnt.Dir, "versions", p))
		require.NoError(t, err)
		require.Equal(t, want, got, p)
	}
	mnt.unmount(t)
}

// fsckClean runs vh5fs fsck, which must find nothing.
func fsckClean(t *testing.T, file string) {
	t.Helper()
	out, stderr, code := vh5fsRun(t, "fsck", file)
	require.Zero(t, code, "fsck: %s%s", out, stderr)
	require.Contains(t, out, "ok:", "fsck: %s", out)
}

// firstNumeric is the first dataset (by path) of the manifest's current version that is
// not a string: the one the edits change.
func firstNumeric(t *testing.T, m *fixture.Manifest) string {
	t.Helper()
	cur := versionOf(m, m.CurrentVersion)
	var paths []string
	for p, d := range cur.Datasets {
		if !d.IsString() && !strings.HasPrefix(d.DType, "|S") && elements(d.Shape) > 0 {
			paths = append(paths, p)
		}
	}
	require.NotEmpty(t, paths, "no numeric dataset in %s", m.File)
	sort.Strings(paths)
	return paths[0]
}

func versionOf(m *fixture.Manifest, name string) fixture.Version {
	for _, v := range m.Versions {
		if v.Name == name {
			return v
		}
	}
	panic(fmt.Sprintf("%s: no version %s", m.File, name))
}

// versionsByTime is the manifest's versions, oldest first.
func versionsByTime(m *fixture.Manifest) []fixture.Version {
	vs := append([]fixture.Version(nil), m.Versions...)
	sort.Slice(vs, func(i, j int) bool { return vs[i].Timestamp < vs[j].Timestamp })
	return vs
}

// withoutVersion is a copy of m without version name.
func withoutVersion(m *fixture.Manifest, name string) *fixture.Manifest {
	c := *m
	c.Versions = nil
	for _, v := range m.Versions {
		if v.Name != name {
			c.Versions = append(c.Versions, v)
		}
	}
	return &c
}

func elements(shape []int64) int64 {
	n := int64(1)
	for _, x := range shape {
		n *= x
	}
	return n
}

// chunksOtherThan is a chunk shape for modify: axis 0 doubled.
func chunksOtherThan(chunks []int64) string {
	s := make([]string, len(chunks))
	for i, c := range chunks {
		if i == 0 {
			c *= 2
		}
		s[i] = strconv.FormatInt(c, 10)
	}
	return strings.Join(s, ",")
}
