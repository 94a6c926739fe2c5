package versions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestStringsThroughMappings reads every version's variable-length string datasets of the
// string fixtures, which must take the mapping route (renderMapped: raw_data read through
// the mappings vh5fs decodes, the virtual dataset never opened by libhdf5), and requires
// the manifest's values and the metadata the libhdf5 route gives. strings-latest.h5's
// virtual datasets use hyperslab selections version 3, which a 1.10 build cannot open:
// there the libhdf5 route's metadata is strings-default.h5's (the same data).
func TestStringsThroughMappings(t *testing.T) {
	tests := []struct {
		manifest string
		twin     string // the same data, where libhdf5 cannot open the manifest's file
	}{
		{manifest: "strings.json"},
		{manifest: "../latest/strings-default.json"},
		{manifest: "../latest/strings-latest.json", twin: "../latest/strings-default.json"},
		{manifest: "legacy/object_dtype_bad_hashtable_chunk_reuse_multi_dim.json"}, // 2-D
		{manifest: "legacy/object_dtype_bad_hashtable_chunk_reuse_unicode.json"},
		{manifest: "legacy/object_dtype_bad_hashtable_chunk_reuse.json"}, // an empty version
		{manifest: "legacy/object_dtype_bad_hashtable_data2.json"},
		{manifest: "legacy/multiple_nested_data_old_data_version.json"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.manifest), func(t *testing.T) {
			m, err := fixture.Load(filepath.Join(fixture.Dir(), tc.manifest))
			require.NoError(t, err)
			f, err := Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			var twin *File
			if tc.twin != "" {
				tm, err := fixture.Load(filepath.Join(fixture.Dir(), tc.twin))
				require.NoError(t, err)
				twin, err = Open(tm.H5)
				require.NoError(t, err)
				defer twin.Close()
			}
			n := 0
			for _, mv := range m.Versions {
				for p, md := range mv.Datasets {
					if !md.IsString() {
						continue
					}
					path := VersionsGroup + "/" + mv.Name + "/" + p
					checkMappedStrings(t, f, twin, path, md)
					n++
				}
			}
			require.NotZero(t, n, "string datasets")
		})
	}
}

// checkMappedStrings checks the string dataset at path of f against md and the libhdf5
// route (of twin when libhdf5 cannot open it in f).
func checkMappedStrings(t *testing.T, f, twin *File, path string, md fixture.Dataset) {
	d, err := f.Dataset(path)
	require.NoError(t, err, path)
	want, err := md.Text()
	require.NoError(t, err)
	buf := make([]byte, d.Size()+10)
	n, err := d.ReadAt(buf, 0)
	require.NoError(t, err, path)
	require.Equal(t, string(want), string(buf[:n]), path)
	elems := int64(1)
	for _, s := range md.Shape {
		elems *= s
	}
	// An empty version maps nothing, which leaves it to the general route as before.
	require.Equal(t, elems > 0, d.textMap != nil, "%s read through the mappings", path)

	// The attributes read by path through libhdf5, without it opening the dataset.
	attrs, err := d.Attrs()
	require.NoError(t, err, path)
	byPath, err := f.h.Attrs(path)
	require.NoError(t, err, path)
	require.Equal(t, byPath, attrs, path)

	ref := libhdf5Route(t, f, path)
	if ref == nil {
		require.NotNil(t, twin, "libhdf5 cannot open %s", path)
		ref = libhdf5Route(t, twin, path)
		require.NotNil(t, ref, "libhdf5 cannot open %s of the twin", path)
	}
	requireSameDataset(t, ref, d)
}

// libhdf5Route loads the dataset at path as the general route does, libhdf5 opening its
// virtual dataset; nil if libhdf5 cannot.
func libhdf5Route(t *testing.T, f *File, path string) *Dataset {
	f.mu.Lock() // as File.Dataset holds it
	defer f.mu.Unlock()
	d, err := f.openDataset(path)
	if err != nil {
		t.Logf("libhdf5 route: %v", err)
		return nil
	}
	require.Nil(t, d.textMap)
	return d
}

// requireSameDataset requires got to describe and read as want does.
func requireSameDataset(t *testing.T, want, got *Dataset) {
	p := got.Path
	require.Equal(t, want.Path, p)
	require.Equal(t, want.Type, got.Type, p)
	require.Equal(t, want.Shape, got.Shape, p)
	require.Equal(t, want.Chunks, got.Chunks, p)
	require.Equal(t, want.Fill, got.Fill, p)
	require.Equal(t, want.Filters, got.Filters, p)
	require.Equal(t, want.RawData, got.RawData, p)
	require.Equal(t, want.Layout, got.Layout, p)
	require.Equal(t, want.Strings, got.Strings, p)
	require.Equal(t, want.fillDefined, got.fillDefined, p)
	require.Equal(t, want.null, got.null, p)
	require.Equal(t, want.Size(), got.Size(), p)
	require.Equal(t, string(want.text), string(got.text), p)
	require.Equal(t, want.HasChunkMap(), got.HasChunkMap(), p)
	require.Equal(t, want.Stageable(), got.Stageable(), p)
	wa, err := want.Attrs()
	require.NoError(t, err, p)
	ga, err := got.Attrs()
	require.NoError(t, err, p)
	require.Equal(t, wa, ga, p)
}

// TestStringRuns places the strings of a 2-D version's runs read from a made-up raw_data
// and requires each element where its mapping puts it, "" where none does, and chunks
// consecutive on axis 0 in raw_data read together.
func TestStringRuns(t *testing.T) {
	shape, chunks := []int64{5, 3}, []int64{2, 2} // grid 3 x 2, trimmed edges
	m, err := chunkmap.New(shape, chunks, 1, []byte{0})
	require.NoError(t, err)
	slots := map[[2]int64]int64{ // chunk grid index -> raw_data row; (2, 0) unmapped
		{0, 0}: 0, {1, 0}: 2, // consecutive: one run
		{0, 1}: 4, {1, 1}: 8, {2, 1}: 10, // a gap, then consecutive again
	}
	for g, off := range slots {
		require.NoError(t, m.MapBase(g[:], off))
	}
	raw := func(r, c int64) string { return fmt.Sprintf("%d,%d", r, c) }
	runs := stringRuns(m)
	require.Equal(t, []stringRun{
		{vstart: []int64{0, 0}, src: 0, count: []int64{4, 2}},
		{vstart: []int64{0, 2}, src: 4, count: []int64{2, 1}},
		{vstart: []int64{2, 2}, src: 8, count: []int64{3, 1}},
	}, runs)

	got := make([]string, shape[0]*shape[1])
	for _, r := range runs {
		var box []string
		for i := range r.count[0] {
			for j := range r.count[1] {
				box = append(box, raw(r.src+i, j))
			}
		}
		placeBox(got, shape, r.vstart, r.count, box)
	}
	var want []string
	for i := range shape[0] {
		for j := range shape[1] {
			off, ok := slots[[2]int64{i / chunks[0], j / chunks[1]}]
			s := ""
			if ok {
				s = raw(off+i%chunks[0], j%chunks[1])
			}
			want = append(want, s)
		}
	}
	require.Equal(t, want, got)
}

// TestStringRunsBounded: consecutive chunks join runs of at most maxRunElems elements, a
// version's later mapping of a chunk wins, and a 1-D box is placed as one row.
func TestStringRunsBounded(t *testing.T) {
	ch := int64(maxRunElems / 4)
	shape := []int64{3*maxRunElems - 5}
	m, err := chunkmap.New(shape, []int64{ch}, 1, []byte{0})
	require.NoError(t, err)
	for g := range int64(12) {
		require.NoError(t, m.MapBase([]int64{g}, 100+g*ch))
	}
	runs := stringRuns(m)
	require.Len(t, runs, 3)
	for i, r := range runs {
		require.Equal(t, []int64{int64(i) * 4 * ch}, r.vstart)
		require.Equal(t, 100+int64(i)*4*ch, r.src)
	}
	require.Equal(t, []int64{4*ch - 5}, runs[2].count)

	require.NoError(t, m.MapBase([]int64{1}, 7)) // a later mapping of chunk 1 wins
	runs = stringRuns(m)
	require.Equal(t, stringRun{vstart: []int64{ch}, src: 7, count: []int64{ch}}, runs[1])

	dst := make([]string, 6)
	placeBox(dst, []int64{6}, []int64{2}, []int64{3}, []string{"a", "b", "c"})
	require.Equal(t, []string{"", "", "a", "b", "c", ""}, dst)
}

// TestPlainJSON: the strings setText writes without the encoder are exactly those the
// encoder writes as their own bytes.
func TestPlainJSON(t *testing.T) {
	for _, s := range []string{"", "abc", "é✓ü", "a\"b", "a\\b", "tab\t", "nl\n", "\x00", "\x7f", "<&>", "\u2028", "\u2029", "\xe2\x80", "bad\xff", "emoji 🙂"} {
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		require.NoError(t, e.Encode(s))
		require.Equal(t, enc.String() == "\""+s+"\"\n", plainJSON(s), "%q (encoded %s)", s, enc.String())
	}
}
