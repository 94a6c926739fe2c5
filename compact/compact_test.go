package compact

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// checkManifest reads every version's datasets of file as the manifest describes them.
func checkManifest(t *testing.T, file string, m *fixture.Manifest) {
	t.Helper()
	f, err := versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	vs, err := f.Versions()
	require.NoError(t, err)
	require.Len(t, vs, len(m.Versions))
	cur, err := f.CurrentVersion()
	require.NoError(t, err)
	require.Equal(t, m.CurrentVersion, cur)
	for _, v := range m.Versions {
		got, ok, err := f.Version(v.Name)
		require.NoError(t, err)
		require.True(t, ok, v.Name)
		require.Equal(t, v.Timestamp, got.Timestamp)
		for p, d := range v.Datasets {
			ds, err := f.Dataset(versions.VersionsGroup + "/" + v.Name + "/" + p)
			require.NoError(t, err)
			b := make([]byte, ds.Size())
			_, err = ds.ReadAt(b, 0)
			require.NoError(t, err)
			if d.IsString() {
				want, err := d.Text()
				require.NoError(t, err)
				require.Equal(t, string(want), string(b), "%s/%s", v.Name, p)
				continue
			}
			sum := sha256.Sum256(b)
			require.Equal(t, *d.SHA256, hex.EncodeToString(sum[:]), "%s/%s", v.Name, p)
		}
	}
}

// TestCompactFixtures: every fixture, compacted in place and to another path, reads as
// its manifest says, no larger than before, with every raw_data chunk copied as stored.
func TestCompactFixtures(t *testing.T) {
	ms, err := fixture.All()
	require.NoError(t, err)
	lists := 0
	defer func() {
		if !t.Failed() {
			require.Positive(t, lists, "some fixture's mapping lists were copied as stored")
		}
	}()
	for _, m := range ms {
		t.Run(filepath.Base(m.H5), func(t *testing.T) {
			file := fixture.Copy(t, m.H5)
			out := filepath.Join(t.TempDir(), "out.h5")
			res, err := File(file, Options{Out: out})
			require.NoError(t, err)
			require.LessOrEqual(t, res.After, res.Before)
			checkManifest(t, out, m)
			if res.Lists > 0 {
				lists += res.Lists
				sameMappings(t, file, out)
			}

			var calls int
			res2, err := File(file, Options{Progress: func(done, total int64) {
				calls++
				require.LessOrEqual(t, done, total)
			}})
			require.NoError(t, err)
			require.False(t, res2.Kept, "every fixture has space to reclaim")
			require.Equal(t, res.Chunks, res2.Chunks)
			checkManifest(t, file, m)
			_, err = os.Stat(filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".vh5fs-compact"))
			require.ErrorIs(t, err, os.ErrNotExist, "no temporary file left")
		})
	}
}

// TestCompactKeepsSmallFile: a file whose compacted copy would be no smaller (a small
// file with little dead space: HDF5's free-space bookkeeping of the copy outweighs it) is
// left as it was in place, byte for byte; to another path the copy is written all the
// same.
func TestCompactKeepsSmallFile(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.ModifyDir(), "golden_modify_dtype-before.h5"))
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	res, err := File(file, Options{})
	require.NoError(t, err)
	require.True(t, res.Kept)
	require.GreaterOrEqual(t, res.After, res.Before)
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, err = os.Stat(filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".vh5fs-compact"))
	require.ErrorIs(t, err, os.ErrNotExist, "no temporary file left")

	out := filepath.Join(t.TempDir(), "out.h5")
	res, err = File(file, Options{Out: out})
	require.NoError(t, err)
	require.False(t, res.Kept)
	st, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, res.After, st.Size())
}

// TestCompactRefusesWriter: a file open for writing (an exclusive HDF5 lock, as a
// read-write mount holds) is not compacted, and is left as it was.
func TestCompactRefusesWriter(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	// The writer is another process, as a mount is: within one, libhdf5 shares an open
	// file between opens through the same driver, and no lock is taken again.
	w := exec.Command("/usr/bin/python3", "-c", `import h5py, sys
f = h5py.File(sys.argv[1], "r+")
print("open", flush=True)
sys.stdin.read()`, file)
	stdin, err := w.StdinPipe()
	require.NoError(t, err)
	stdout, err := w.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "open\n", line)
	_, err = File(file, Options{})
	require.Error(t, err)
	require.NoError(t, stdin.Close())
	require.NoError(t, w.Wait())
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// sameMappings checks through h5py that every virtual dataset of the versions of a and b
// has the same mappings, shape, maxshape, fill value and attributes.
func sameMappings(t *testing.T, a, b string) {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c", `import h5py, sys
def describe(path):
    out = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.is_virtual:
                maps = [(m.file_name, m.dset_name, m.vspace.get_select_bounds(), m.src_space.get_select_bounds()) for m in obj.virtual_sources()]
                attrs = sorted((k, repr(v)) for k, v in obj.attrs.items())
                out.append((name, obj.shape, obj.maxshape, repr(obj.fillvalue), str(obj.dtype), maps, attrs))
        f["_version_data/versions"].visititems(visit)
    return out
x, y = describe(sys.argv[1]), describe(sys.argv[2])
assert x == y, "differ"
print(len(x))`, a, b).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// holdOpen starts an h5py reader of file (another process, as a mount is: within one,
// libhdf5 shares an open file and takes no lock again) and returns once it has the file
// open; the reader exits when the test ends.
func holdOpen(t *testing.T, file string) {
	t.Helper()
	r := exec.Command("/usr/bin/python3", "-c", `import h5py, sys
f = h5py.File(sys.argv[1], "r")
print("open", flush=True)
sys.stdin.read()`, file)
	stdin, err := r.StdinPipe()
	require.NoError(t, err)
	stdout, err := r.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, r.Start())
	t.Cleanup(func() { stdin.Close(); r.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "open\n", line)
}

// TestCompactMeanwhile: what happens to the file between the first InUse check and the
// rename stops the compaction, the file as it was then and no temporary left: a reader
// that opened the file meanwhile (its lock stands in the way of the rename's, and InUse
// is asked again to name it), a write or a chmod (the file is not the one copied).
func TestCompactMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(t *testing.T, file string) // done while the copy is made
		want string
	}{
		{"reader", func(t *testing.T, file string) { holdOpen(t, file) }, "held by the reader"},
		{"write", func(t *testing.T, file string) {
			f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte{0})
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, "changed while it was being compacted"},
		{"chmod", func(t *testing.T, file string) { require.NoError(t, os.Chmod(file, 0o600)) }, "changed while it was being compacted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, filepath.Join(fixture.Dir(), "many_versions.h5"))
			var asked int
			acted := false
			inUse := func(path string) error {
				require.Equal(t, file, path)
				asked++
				switch {
				case asked == 1:
					return nil // before the copy: no one
				case !acted:
					acted = true
					tc.act(t, file) // after the copy, before the lock
					return nil
				}
				return errors.New("held by the reader")
			}
			before, err := os.ReadFile(file)
			require.NoError(t, err)
			_, err = File(file, Options{InUse: inUse})
			require.ErrorContains(t, err, tc.want)
			require.True(t, acted)
			after, err := os.ReadFile(file)
			require.NoError(t, err)
			if tc.name == "write" {
				after = after[:len(after)-1]
			}
			require.Equal(t, before, after, "the file is the one it was")
			_, err = os.Stat(filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".vh5fs-compact"))
			require.ErrorIs(t, err, os.ErrNotExist, "no temporary file left")
		})
	}
}

// TestCompactDenseGroups: a file whose groups keep their links in dense storage (more than
// eight links with libver "latest": here many_versions' 300 version groups, as h5repack -L
// writes them) compacts and reads as before. The copy's groups take the source groups'
// storage settings, not their creation property lists as libhdf5 returns them, which hold
// the source's fractal heap addresses.
func TestCompactDenseGroups(t *testing.T) {
	m, err := fixture.Load(filepath.Join(fixture.Dir(), "many_versions.json"))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "dense.h5")
	if out, err := exec.Command("h5repack", "-L", m.H5, file).CombinedOutput(); err != nil {
		t.Skipf("h5repack (hdf5-tools) is needed: %v: %s", err, out)
	}
	out := filepath.Join(t.TempDir(), "out.h5")
	_, err = File(file, Options{Out: out})
	require.NoError(t, err)
	checkManifest(t, out, m)
}
