package xattrs

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

func TestSet(t *testing.T) {
	var x Set
	x.Add("user.a", []byte("1"))
	require.NoError(t, x.AddJSON("user.b", []int{1}))
	x.Add("user.a", []byte("2")) // replaced, keeps its place
	require.Equal(t, []string{"user.a", "user.b"}, x.Names())
	v, err := x.Get("user.a")
	require.NoError(t, err)
	require.Equal(t, "2", string(v))
	_, err = x.Get("user.c")
	require.ErrorIs(t, err, ErrMissing)
}

// TestDataset: a versioned dataset's attributes carry its layout and a chunk map whose
// byteBlocks locate every stored chunk; the Set is built once per Dataset.
func TestDataset(t *testing.T) {
	f, err := versions.Open(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	d, err := f.VersionDataset("v1", "x")
	require.NoError(t, err)
	x, err := Dataset(d)
	require.NoError(t, err)
	again, err := Dataset(d)
	require.NoError(t, err)
	require.Same(t, x, again)
	dt, err := x.Get(DType)
	require.NoError(t, err)
	require.Equal(t, d.Type.DType, string(dt))
	shape, err := x.Get(Shape)
	require.NoError(t, err)
	want, _ := json.Marshal(d.Shape)
	require.Equal(t, string(want), string(shape))
	require.True(t, d.HasChunkMap())
	main, err := x.Get(ChunkMap)
	require.NoError(t, err)
	var doc struct {
		Path       string         `json:"path"`
		ByteBlocks map[string]any `json:"byteBlocks"`
	}
	require.NoError(t, json.Unmarshal(main, &doc))
	require.Equal(t, d.Path, doc.Path)
	stored, err := d.StoredChunks()
	require.NoError(t, err)
	require.NotEmpty(t, stored)
	require.Contains(t, doc.ByteBlocks, "0")

	root, err := Root(f)
	require.NoError(t, err)
	cur, err := root.Get(Current)
	require.NoError(t, err)
	c, err := f.CurrentVersion()
	require.NoError(t, err)
	require.Equal(t, c, string(cur))

	g, err := Group(f, versions.VersionsGroup+"/v1", "v1")
	require.NoError(t, err)
	name, err := g.Get(Version)
	require.NoError(t, err)
	require.Equal(t, "v1", string(name))
	_, err = Group(f, versions.VersionsGroup+"/nope", "nope")
	require.ErrorIs(t, err, versions.ErrNotFound)
}
