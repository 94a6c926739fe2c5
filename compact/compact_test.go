package compact

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
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
	for _, m := range ms {
		t.Run(filepath.Base(m.H5), func(t *testing.T) {
			file := fixture.Copy(t, m.H5)
			out := filepath.Join(t.TempDir(), "out.h5")
			res, err := File(file, out, nil)
			require.NoError(t, err)
			require.LessOrEqual(t, res.After, res.Before)
			checkManifest(t, out, m)

			var calls int
			res2, err := File(file, "", func(done, total int64) {
				calls++
				require.LessOrEqual(t, done, total)
			})
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
	res, err := File(file, "", nil)
	require.NoError(t, err)
	require.True(t, res.Kept)
	require.GreaterOrEqual(t, res.After, res.Before)
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, err = os.Stat(filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".vh5fs-compact"))
	require.ErrorIs(t, err, os.ErrNotExist, "no temporary file left")

	out := filepath.Join(t.TempDir(), "out.h5")
	res, err = File(file, out, nil)
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
	w, err := h5.OpenRW(file)
	require.NoError(t, err)
	defer w.Close()
	_, err = File(file, "", nil)
	require.Error(t, err)
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
}
