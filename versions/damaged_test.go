package versions

import (
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
