package refs

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/filters"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/versions"
)

const fixtures = "../tests/testdata/fixtures/"

func TestFillValue(t *testing.T) {
	le64 := func(f float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)) }
	be32 := func(f float32) []byte { return binary.BigEndian.AppendUint32(nil, math.Float32bits(f)) }
	for _, tc := range []struct {
		dtype string
		fill  []byte
		want  any
	}{
		{"<f8", le64(0.5), 0.5},
		{"<f8", le64(math.NaN()), "NaN"},
		{"<f8", le64(math.Inf(1)), "Infinity"},
		{">f4", be32(float32(math.Inf(-1))), "-Infinity"},
		{">f4", be32(-2.25), -2.25},
		{"<f2", []byte{0x00, 0x3e}, 1.5},
		{"<f2", []byte{0x00, 0x7e}, "NaN"},
		{"<f2", []byte{0x00, 0xfc}, "-Infinity"},
		{"<f8", nil, 0.0}, // no fill value defined: HDF5 reads zeros
		{"<i8", binary.LittleEndian.AppendUint64(nil, uint64(math.MaxUint64)), int64(-1)},
		{">i2", []byte{0xff, 0xfe}, int64(-2)},
		{"|i1", []byte{0x80}, int64(-128)},
		{"<u4", []byte{1, 0, 0, 0x80}, uint64(0x80000001)},
		{"|u1", []byte{200}, uint64(200)},
		{"|b1", []byte{1}, true},
		{"<c16", append(le64(1), le64(math.NaN())...), []any{1.0, "NaN"}},
		{"|S3", []byte("ab\x00"), base64.StdEncoding.EncodeToString([]byte("ab\x00"))},
		{"|V4", []byte{1, 2, 3, 4}, "AQIDBA=="},
	} {
		got, err := fillValue(tc.dtype, tc.fill)
		require.NoError(t, err, tc.dtype)
		require.Equal(t, tc.want, got, "%s %x", tc.dtype, tc.fill)
	}
	for _, tc := range []struct {
		dtype string
		fill  []byte
	}{{"O", nil}, {"<f8", []byte{1, 2}}, {"<m8", make([]byte, 8)}} {
		_, err := fillValue(tc.dtype, tc.fill)
		require.Error(t, err, tc.dtype)
	}
}

func TestPipeline(t *testing.T) {
	deflate := h5.Filter{ID: filters.Deflate, Name: "deflate", Params: []uint32{4}}
	shuf := h5.Filter{ID: filters.Shuffle, Name: "shuffle"}
	fl32 := h5.Filter{ID: filters.Fletcher32, Name: "fletcher32"}
	for _, tc := range []struct {
		name    string
		in      []h5.Filter
		codecs  []codec
		trim    bool
		missing string
	}{
		{"none", nil, nil, false, ""},
		{"gzip+shuffle", []h5.Filter{shuf, deflate}, []codec{{id: filters.Shuffle, size: 8}, {id: filters.Deflate, level: 4}}, false, ""},
		{"gzip without level", []h5.Filter{{ID: filters.Deflate}}, []codec{{id: filters.Deflate, level: 6}}, false, ""},
		{"fletcher last", []h5.Filter{shuf, deflate, fl32}, []codec{{id: filters.Shuffle, size: 8}, {id: filters.Deflate, level: 4}}, true, ""},
		{"fletcher first", []h5.Filter{fl32, deflate}, nil, false, "Fletcher-32 before another filter"},
		{"lzf", []h5.Filter{{ID: filters.LZF, Name: "lzf"}}, nil, false, "LZF (filter 32000)"},
		{"szip and a user filter", []h5.Filter{{ID: 4, Name: "szip"}, {ID: 307, Name: "bzip2"}}, nil, false, "SZIP (filter 4), bzip2 (filter 307)"},
	} {
		codecs, trim, err := pipeline(tc.in, 8)
		if tc.missing != "" {
			require.ErrorIs(t, err, errNoCodec, tc.name)
			require.ErrorContains(t, err, tc.missing, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.codecs, codecs, tc.name)
		require.Equal(t, tc.trim, trim, tc.name)
	}
}

// TestEncodeChunk: what encodeChunk writes, HDF5's pipeline (as the filters package
// decodes it) reads back, for element sizes that do and do not divide the chunk.
func TestEncodeChunk(t *testing.T) {
	for _, size := range []int{1, 2, 4, 8, 3} {
		data := make([]byte, 1000)
		for i := range data {
			data[i] = byte(i * 7 % 251)
		}
		enc, err := encodeChunk(data, []codec{{id: filters.Shuffle, size: size}, {id: filters.Deflate, level: 4}}, size)
		require.NoError(t, err)
		pl := []filters.Filter{{ID: filters.Shuffle}, {ID: filters.Deflate, Params: []uint32{4}}}
		got, err := filters.Decode(enc, pl, 0, size, len(data), nil)
		require.NoError(t, err, size)
		require.Equal(t, data, got, size)
		sh := shuffle(data, size)
		require.Len(t, sh, len(data))
		if size > 1 {
			require.NotEqual(t, data, sh)
		}
	}
}

// write runs Write and returns the document's refs and the warnings.
func write(t *testing.T, f *versions.File, opt Options) (map[string]json.RawMessage, Stats, []string) {
	t.Helper()
	var warnings []string
	opt.Warn = func(msg string) { warnings = append(warnings, msg) }
	var buf bytes.Buffer
	st, err := Write(&buf, f, opt)
	require.NoError(t, err)
	var doc struct {
		Version int                        `json:"version"`
		Refs    map[string]json.RawMessage `json:"refs"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc), buf.String())
	require.Equal(t, 1, doc.Version)
	return doc.Refs, st, warnings
}

func textKey(t *testing.T, refs map[string]json.RawMessage, key string) map[string]any {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(refs[key], &s), key)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), key)
	return m
}

// TestWriteVersion: a version's document has a key per stored chunk of the chunk map,
// pointing at the chunk map's offsets and sizes, and nothing for unmapped chunks.
func TestWriteVersion(t *testing.T) {
	f, err := versions.Open(fixtures + "sparse.h5")
	require.NoError(t, err)
	defer f.Close()
	abs, err := filepath.Abs(fixtures + "sparse.h5")
	require.NoError(t, err)
	cur, err := f.CurrentVersion()
	require.NoError(t, err)
	for _, version := range []string{"", cur} {
		refs, st, warnings := write(t, f, Options{Version: version})
		require.Empty(t, warnings)
		paths, err := f.DatasetPaths(cur)
		require.NoError(t, err)
		require.Equal(t, Stats{Versions: 1, Groups: 1, Datasets: len(paths), Chunks: st.Chunks}, st)
		chunks := 0
		for _, p := range paths {
			d, err := f.VersionDataset(cur, p)
			require.NoError(t, err)
			stored, err := d.StoredChunks()
			require.NoError(t, err)
			za := textKey(t, refs, p+"/.zarray")
			require.EqualValues(t, 2, za["zarr_format"])
			require.Equal(t, d.Type.DType, za["dtype"])
			require.Len(t, za["shape"], len(d.Shape))
			total := int64(1)
			for i, s := range d.Shape {
				total *= (s + d.Chunks[i] - 1) / d.Chunks[i]
			}
			require.Less(t, int64(len(stored)), total, "%s: the fixture leaves chunks unmapped", p)
			for _, c := range stored {
				key := p + "/" + strings.Trim(strings.ReplaceAll(strings.Trim(jsonOf(c.Grid), "[]"), ",", "."), " ")
				var ref []any
				require.NoError(t, json.Unmarshal(refs[key], &ref), key)
				require.Equal(t, []any{abs, float64(c.Offset), float64(c.Size)}, ref, key)
				chunks++
			}
			attrs := textKey(t, refs, p+"/.zattrs")
			require.Len(t, attrs["_ARRAY_DIMENSIONS"], len(d.Shape))
		}
		require.Equal(t, chunks, st.Chunks)
	}
	refs, _, _ := write(t, f, Options{URL: "gs://b/x.h5"})
	for k, v := range refs {
		if !strings.Contains(k, "/.") && !strings.HasPrefix(k, ".") {
			require.True(t, strings.HasPrefix(string(v), `["gs://b/x.h5",`), k)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestWriteAll: --all puts each committed version under versions/NAME/ with its own
// datasets, and names the versions and the current one in the root's attributes.
func TestWriteAll(t *testing.T) {
	f, err := versions.Open(fixtures + "nested.h5")
	require.NoError(t, err)
	defer f.Close()
	refs, st, warnings := write(t, f, Options{All: true})
	require.Empty(t, warnings)
	vs, err := f.Versions()
	require.NoError(t, err)
	require.Equal(t, len(vs), st.Versions)
	root := textKey(t, refs, ".zattrs")
	cur, _ := f.CurrentVersion()
	require.Equal(t, cur, root["current_version"])
	require.Len(t, root["versions"], len(vs))
	datasets := 0
	for _, v := range vs {
		require.Contains(t, refs, "versions/"+v.Name+"/.zgroup")
		require.Equal(t, v.Timestamp, textKey(t, refs, "versions/"+v.Name+"/.zattrs")["timestamp"])
		paths, err := f.DatasetPaths(v.Name)
		require.NoError(t, err)
		for _, p := range paths {
			require.Contains(t, refs, "versions/"+v.Name+"/"+p+"/.zarray")
			if i := strings.LastIndexByte(p, '/'); i >= 0 {
				require.Contains(t, refs, "versions/"+v.Name+"/"+p[:i]+"/.zgroup")
			}
		}
		datasets += len(paths)
	}
	require.Equal(t, datasets, st.Datasets)
}

// TestLeftOutNeverFails: datasets without a codec or without a byte form are left out,
// one warning each, and the others are described, a scalar as an inlined 0-d array
// (tests/py/make_refs_edge.py).
func TestLeftOutNeverFails(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs Debian's python3 with h5py")
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "edge.h5")
	out, err := exec.Command(py, "../tests/py/make_refs_edge.py", plain, filepath.Join(dir, "edgev.h5")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := versions.Open(plain)
	require.NoError(t, err)
	defer f.Close()
	refs, st, warnings := write(t, f, Options{})
	require.Equal(t, []string{
		"/lzf: left out: no numcodecs codec for LZF (filter 32000)",
		"/ragged: left out: unsupported dataset: dtype |V16 has no byte form",
	}, warnings)
	require.Equal(t, 2, st.LeftOut)
	require.Equal(t, 9, st.Datasets)
	require.Equal(t, 4, st.Inlined)
	for _, k := range []string{"gzip_masked/1.1", "contiguous/0", "words/0.0", "scalar/0"} {
		require.True(t, strings.HasPrefix(string(refs[k]), `"base64:`), k)
	}
	// The inlined chunk decodes, through HDF5's own pipeline, to what h5py wrote directly.
	var s string
	require.NoError(t, json.Unmarshal(refs["gzip_masked/1.1"], &s))
	enc, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "base64:"))
	require.NoError(t, err)
	got, err := filters.Decode(enc, []filters.Filter{{ID: filters.Shuffle}, {ID: filters.Deflate}}, 0, 8, 12*8, nil)
	require.NoError(t, err)
	for i := range 12 {
		require.Equal(t, float64(100+i), math.Float64frombits(binary.LittleEndian.Uint64(got[8*i:])), i)
	}
}

func TestASCIIJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"b"}`:       `{"a":"b"}`,
		`{"é":"zoë"}`:     `{"\u00e9":"zo\u00eb"}`,
		`["数据","𝄞"]`:      `["\u6570\u636e","\ud834\udd1e"]`,
		`{"k":"\n\"é\""}`: `{"k":"\n\"\u00e9\""}`,
	} {
		got := asciiJSON([]byte(in))
		require.Equal(t, want, string(got), in)
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(in), &a))
		require.NoError(t, json.Unmarshal(got, &b))
		require.Equal(t, a, b, in)
	}
}
