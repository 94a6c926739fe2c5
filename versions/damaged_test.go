package versions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestCheckSources: a mapping that reads raw_data rows beyond its extent is an error (libhdf5
// would make up fill values for them); mappings inside it, or into other datasets, are not.
func TestCheckSources(t *testing.T) {
	f, err := Open(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	d, err := f.Dataset(VersionsGroup + "/v2/x")
	require.NoError(t, err)
	require.Equal(t, []int64{24}, d.raw.Info().Shape)

	m := func(src, n int64, ds string) h5.Mapping {
		return h5.Mapping{VStart: []int64{4}, VCount: []int64{n}, SrcFile: ".", SrcDataset: ds, SrcStart: []int64{src}, SrcCount: []int64{n}}
	}
	require.NoError(t, d.checkSources([]h5.Mapping{m(0, 4, d.RawData), m(20, 4, d.RawData)}))
	require.NoError(t, d.checkSources([]h5.Mapping{m(400, 4, "/elsewhere")}))
	err = d.checkSources([]h5.Mapping{m(0, 4, d.RawData), m(400, 4, d.RawData)})
	require.ErrorContains(t, err, "/_version_data/x/raw_data[400:404] on axis 0, beyond its extent [24]")
	require.ErrorContains(t, d.checkSources([]h5.Mapping{m(22, 4, d.RawData)}), "[22:26]")
}

// patched writes a copy of fixture name with data written at off, checking what was there.
func patched(t *testing.T, name string, off int, was, data []byte) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture.Dir(), name))
	require.NoError(t, err)
	require.Equal(t, was, b[off:off+len(was)])
	copy(b[off:], data)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// TestBrokenObjectListed: a dataset whose object header is unreadable is listed, and
// opening it is an error, not a dataset missing from its version.
func TestBrokenObjectListed(t *testing.T) {
	// The version byte of /_version_data/versions/v2/x's object header (at 19392).
	f, err := Open(patched(t, "basic_1d.h5", 19392, []byte{1}, []byte{0x7f}))
	require.NoError(t, err)
	defer f.Close()
	entries, err := f.List(VersionsGroup + "/v2")
	require.NoError(t, err)
	require.Equal(t, []Entry{{Name: "x"}}, entries)
	_, err = f.Dataset(VersionsGroup + "/v2/x")
	require.Error(t, err)
	_, err = f.Dataset(VersionsGroup + "/v1/x")
	require.NoError(t, err)
}

// TestBrokenVersionListed: a version whose attributes cannot be read (its timestamp lives in
// a global heap collection whose signature is damaged) is listed, looking it up is an
// error, and the other versions are unaffected.
func TestBrokenVersionListed(t *testing.T) {
	// r2's own global heap collection in grid_2d_gzip.h5 starts at 33013.
	f, err := Open(patched(t, "grid_2d_gzip.h5", 33013, []byte("GCOL"), []byte("GCOX")))
	require.NoError(t, err)
	defer f.Close()
	vs, err := f.Versions()
	require.NoError(t, err)
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	require.Equal(t, []string{"r1", "r2", "r3", "r4", "r5"}, names)
	_, _, err = f.Version("r2")
	require.Error(t, err)
	v, ok, err := f.Version("r3")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "r2", v.PrevVersion)
}
