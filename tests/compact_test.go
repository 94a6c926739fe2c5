package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// libraryPython is a python3 that imports versioned_hdf5, or "" (it is not a Debian
// package: where it is missing, the goldens it made stand for it).
func libraryPython(t *testing.T) string {
	p := python(t)
	if exec.Command(p, "-c", "import versioned_hdf5").Run() != nil {
		return ""
	}
	return p
}

// TestCompact: `vh5fs compact` of a file that commits through a mount left freed space in
// makes a smaller file that h5py reads as before, version by version, that fsck passes,
// that h5py (and versioned-hdf5, where importable) extends, and that mounts again; a file
// a read-write mount holds is refused and left alone.
func TestCompact(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	// Each commit rewrites the hash table and version metadata: the old copies are freed
	// space, which HDF5 keeps.
	for i := range 20 {
		f, err := os.OpenFile(filepath.Join(m.Dir, "current", "temp"), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{byte(i), 1, 2, 3, 4, 5, 6, 7}, int64(i)*8*37)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	_, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "vh5fs: "+file+": ")
	require.Contains(t, stderr, "vh5fs mount", "names the mount that holds it: %s", stderr)
	m.unmount(t)

	before := versionDigests(t, file)
	st, err := os.Stat(file)
	require.NoError(t, err)
	out, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(file)+`: [0-9.]+ KiB -> [0-9.]+ KiB \([0-9.]+ KiB of raw_data chunks, [0-9.]+ KiB of metadata and other data\), written to `+regexp.QuoteMeta(file)+"\n$"), out)
	st2, err := os.Stat(file)
	require.NoError(t, err)
	require.Less(t, st2.Size(), st.Size())
	t.Logf("%d -> %d bytes", st.Size(), st2.Size())
	require.Equal(t, before, versionDigests(t, file))
	_, stderr, code = vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, stderr)

	// -o: the file stays, the copy reads the same.
	other := filepath.Join(t.TempDir(), "copy.h5")
	_, stderr, code = vh5fsRun(t, "compact", file, "-o", other)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, before, versionDigests(t, other))

	// Extended by h5py as versioned-hdf5 lays a version out, and by versioned-hdf5.
	run(t, python(t), "py/add_version.py", file, "after_compact")
	after := versionDigests(t, file)
	require.Len(t, after, len(before)+1)
	if py := libraryPython(t); py != "" {
		script := `import sys, numpy as np
from versioned_hdf5 import VersionedHDF5File
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    vf = VersionedHDF5File(f)
    with vf.stage_version("by_library") as g:
        g["temp"][0, 0] = 42.0
`
		run(t, py, "-c", script, file)
		require.Contains(t, versionDigests(t, file), "by_library")
	} else {
		t.Log("versioned_hdf5 is not importable here: the library's commit on a compacted file not checked")
	}
	ro := mount(t, file)
	b, err := os.ReadFile(filepath.Join(ro.Dir, "versions", "after_compact", "temp"))
	require.NoError(t, err)
	require.NotEmpty(t, b)
	cur, err := os.Readlink(filepath.Join(ro.Dir, "current"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cur, "versions/"), cur)
}

// TestCompactNothingToReclaim: `vh5fs compact` of a small file whose copy would be no
// smaller says so and leaves the file byte for byte as it was.
func TestCompactNothingToReclaim(t *testing.T) {
	file := copyPath(t, filepath.Join(fixture.ModifyDir(), "golden_modify_dtype-before.h5"))
	orig, err := os.ReadFile(file)
	require.NoError(t, err)
	out, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(file)+`: [0-9.]+ KiB, nothing to reclaim \(a compacted copy takes [0-9.]+ KiB\): left as it was`+"\n$"), out)
	now, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, orig, now)
}
