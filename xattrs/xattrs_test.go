package xattrs

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

func TestJSONForms(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"nan", FloatJSON(math.NaN()), `"NaN"`},
		{"inf", FloatJSON(math.Inf(1)), `"Infinity"`},
		{"-inf", FloatJSON(math.Inf(-1)), `"-Infinity"`},
		{"float", FloatJSON(1.5), `1.5`},
		{"no html escaping", "<f8", `"<f8"`},
		{"nested attr", AttrJSON(h5.Attr{Value: []int64{1, 2, 3, 4}, Shape: []int64{2, 2}}), `[[1,2],[3,4]]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := JSONText(tc.v)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

// TestFillText: fill values in messages read as values, not as their bytes.
func TestFillText(t *testing.T) {
	f8 := func(f float64) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		return b
	}
	f4 := make([]byte, 4)
	binary.LittleEndian.PutUint32(f4, math.Float32bits(0.1))
	for _, tc := range []struct {
		dtype string
		fill  []byte
		want  string
	}{
		{"<f8", []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, "NaN"},
		{"<f8", f8(0), "0"},
		{"<f8", f8(-1.5), "-1.5"},
		{"<f8", f8(math.Inf(-1)), "-Infinity"},
		{"<f4", f4, "0.1"},
		{">i2", []byte{0xff, 0xfe}, "-2"},
		{"<u8", []byte{255, 255, 255, 255, 255, 255, 255, 255}, "18446744073709551615"},
		{"|b1", []byte{1}, "true"},
		{"<c16", append(f8(1.5), f8(-2)...), "1.5-2j"},
		{"|S4", []byte("ab\x00\x00"), `"ab"`},
		{"|S2", []byte{0, 0}, `""`},
		{"|V2", []byte{0xab, 0xcd}, "0xabcd"},
	} {
		t.Run(tc.dtype+"/"+tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, FillText(tc.dtype, tc.fill))
		})
	}
}

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
