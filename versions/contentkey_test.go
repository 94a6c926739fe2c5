package versions

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestContentKey: over every fixture's versions, equal keys mean equal bytes (and shape,
// dtype, chunks), and within a file the same bytes in the same layout have the same key
// whatever the version; strings have none.
func TestContentKey(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	type seen struct {
		what, sha, layout string
	}
	byKey := map[[32]byte]seen{}
	keyed, shared := 0, 0
	for _, m := range manifests {
		f, err := Open(m.H5)
		require.NoError(t, err)
		byContent := map[string][32]byte{} // layout and bytes -> key, within the file
		for _, mv := range m.Versions {
			for p, md := range mv.Datasets {
				d, err := f.Dataset(VersionsGroup + "/" + mv.Name + "/" + p)
				require.NoError(t, err)
				key, ok, err := d.ContentKey()
				require.NoError(t, err)
				what := fmt.Sprintf("%s:%s/%s", m.File, mv.Name, p)
				if md.IsString() || md.SHA256 == nil {
					require.False(t, ok, what)
					continue
				}
				if !ok {
					continue // no clean chunk map: never cached
				}
				keyed++
				again, _, _ := d.ContentKey()
				require.Equal(t, key, again, "%s: computed once, kept", what)
				layout := fmt.Sprint(md.DType, md.Shape, md.Chunks, string(md.FillValue))
				if s, dup := byKey[key]; dup {
					require.Equal(t, s.sha, *md.SHA256, "%s has %s's key", what, s.what)
					require.Equal(t, s.layout, layout, "%s has %s's key", what, s.what)
				}
				byKey[key] = seen{what, *md.SHA256, layout}
				if k, dup := byContent[layout+*md.SHA256]; dup {
					require.Equal(t, k, key, "%s: the same bytes and layout as an earlier version", what)
					shared++
				}
				byContent[layout+*md.SHA256] = key
			}
		}
		require.NoError(t, f.Close())
	}
	require.Greater(t, keyed, 10)
	require.Positive(t, shared, "versions sharing a dataset's bytes were compared")
}
