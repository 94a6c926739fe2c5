package h5_test

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
)

// The golden multi-change edit (tests/testdata/fixtures/README.md): versioned-hdf5 created
// /_version_data/temp (float64, chunks (8,), gzip 4 + shuffle, fill 0.0) in the after-file.
const (
	goldenBefore = "../tests/testdata/fixtures/golden_stage_multi-before.h5"
	goldenAfter  = "../tests/testdata/fixtures/golden_stage_multi-after.h5"
	python       = "/usr/bin/python3" // Debian's, with python3-h5py and python3-numpy
)

// rwCopy opens a private read-write copy of src.
func rwCopy(t *testing.T, src string) (*h5.File, string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.WriteFile(p, b, 0o644))
	f, err := h5.OpenRW(p)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, p
}

// describePy describes data groups with h5py, for comparison with references: for each
// case, the data group at "group" of the file "mine" and the one at "refgroup" of "ref".
// With "build", it first makes ref: each case's data group created by h5py as
// versioned-hdf5 creates it (create_group, create_dataset of raw_data and hash_table, the
// chunks and largest_index attributes).
const describePy = `
import sys, json, h5py, numpy as np
from h5py import h5o

req = json.load(open(sys.argv[1]))
if req["build"]:
    with h5py.File(req["ref"], "w") as ref:
        for c in req["cases"]:
            s = c["spec"]
            dt, C = np.dtype(s["dtype"]), tuple(s["chunks"])
            kw = {}
            if s["gzip"] >= 0:
                kw.update(compression="gzip", compression_opts=s["gzip"])
            if s["lzf"]:
                kw["compression"] = "lzf"
            if s["shuffle"]:
                kw["shuffle"] = True
            fill = np.frombuffer(bytes.fromhex(s["fill"]), dtype=dt)[0]
            g = ref.create_group(c["refgroup"])
            d = g.create_dataset("raw_data", shape=(0,) + C[1:], chunks=C, maxshape=(None,) + C[1:],
                                 dtype=dt, fillvalue=fill, **kw)
            d.attrs["chunks"] = C
            h = g.create_dataset("hash_table", shape=(1,), chunks=(4096,), maxshape=(None,), compression="lzf",
                                 dtype=np.dtype([("hash", "B", (32,)), ("shape", "i8", (2,))]))
            h.attrs["largest_index"] = 0

def attrs(o):
    return {k: [o.attrs.get_id(k).dtype.str, list(o.attrs.get_id(k).shape), np.asarray(o.attrs[k]).tolist()]
            for k in o.attrs}

def header(o):
    h = h5o.get_info(o.id).hdr
    return dict(version=h.version, nmesgs=h.nmesgs, present=h.mesg.present, shared=h.mesg.shared,
                total=h.space.total, meta=h.space.meta, mesg=h.space.mesg, free=h.space.free)

def dataset(d):
    p = d.id.get_create_plist()
    out = dict(
        dtype=d.dtype.str if d.dtype.names is None else str(d.dtype.descr),
        shape=list(d.shape), maxshape=[-1 if m is None else m for m in d.maxshape], chunks=list(d.chunks),
        compression=d.compression, compression_opts=d.compression_opts, shuffle=d.shuffle,
        fillvalue=np.array(d.fillvalue, dtype=d.dtype).tobytes().hex(),
        fill_defined=p.fill_value_defined(), fill_time=p.get_fill_time(), alloc_time=p.get_alloc_time(),
        layout=p.get_layout(), track_times=p.get_obj_track_times(), nchunks=d.id.get_num_chunks(),
        filters=[[i, fl, list(cd), name.decode()] for i, fl, cd, name in
                 (p.get_filter(k) for k in range(p.get_nfilters()))],
        attrs=attrs(d), header=header(d))
    if d.dtype.names is not None:
        out["rows"] = d[:].tobytes().hex()
    return out

def group(f, path):
    csets, cur = [], f
    for name in path.strip("/").split("/"):
        csets.append(cur.id.links.get_info(name.encode()).cset)
        cur = cur[name]
    p = cur.id.get_create_plist()
    return dict(members=sorted(cur.keys()), attrs=attrs(cur), link_csets=csets, header=header(cur),
                track_times=p.get_obj_track_times(), creation_order=p.get_link_creation_order())

out = []
with h5py.File(req["mine"], "r") as mine, h5py.File(req["ref"], "r") as ref:
    for c in req["cases"]:
        m, r = mine[c["group"]], ref[c["refgroup"]]
        res = dict(name=c["name"], group=[group(mine, c["group"]), group(ref, c["refgroup"])],
                   types_equal={})
        for n in ("raw_data", "hash_table"):
            res[n] = [dataset(m[n]), dataset(r[n])]
            res["types_equal"][n] = m[n].id.get_type() == r[n].id.get_type()
            for a in r[n].attrs:
                res["types_equal"][n + "." + a] = m[n].attrs.get_id(a).get_type() == r[n].attrs.get_id(a).get_type()
        out.append(res)
print(json.dumps(out))
`

type pyCase struct {
	Name     string         `json:"name"`
	Group    string         `json:"group"`
	RefGroup string         `json:"refgroup"`
	Spec     map[string]any `json:"spec,omitempty"`
}

type pyResult struct {
	Name       string            `json:"name"`
	Group      [2]map[string]any `json:"group"`
	RawData    [2]map[string]any `json:"raw_data"`
	HashTable  [2]map[string]any `json:"hash_table"`
	TypesEqual map[string]bool   `json:"types_equal"`
}

func describe(t *testing.T, mine, ref string, build bool, cases []pyCase) []pyResult {
	t.Helper()
	req, err := json.Marshal(map[string]any{"mine": mine, "ref": ref, "build": build, "cases": cases})
	require.NoError(t, err)
	reqPath := filepath.Join(t.TempDir(), "req.json")
	require.NoError(t, os.WriteFile(reqPath, req, 0o644))
	out, err := exec.Command(python, "-c", describePy, reqPath).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("h5py: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var res []pyResult
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	require.Len(t, res, len(cases))
	return res
}

// without returns m without the keys.
func without(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// TestCreateDataGroupGolden compares a data group created like versioned-hdf5's
// /_version_data/temp with that one, through h5py: everything but the data (and so the
// dims, the allocated chunks, the hash rows and largest_index's value).
func TestCreateDataGroupGolden(t *testing.T) {
	f, p := rwCopy(t, goldenBefore)
	k, err := f.Kind("/_version_data/temp")
	require.NoError(t, err)
	require.Equal(t, h5.KindMissing, k, "the before-file has no temp")
	spec := h5.DataSpec{DType: "<f8", Chunks: []int64{8}, Gzip: 4, Shuffle: true}
	require.NoError(t, f.CreateDataGroup("/_version_data/temp", spec))
	require.NoError(t, f.Close())

	after, err := filepath.Abs(goldenAfter)
	require.NoError(t, err)
	res := describe(t, p, after, false, []pyCase{{Name: "temp", Group: "/_version_data/temp", RefGroup: "/_version_data/temp"}})[0]
	for what, eq := range res.TypesEqual {
		require.True(t, eq, "HDF5 type of %s (H5Tequal)", what)
	}
	require.Len(t, res.TypesEqual, 4, "raw_data, hash_table and their attributes")
	require.Equal(t, res.Group[1], res.Group[0], "the group")

	mine, ref := res.RawData[0], res.RawData[1]
	require.Equal(t, []any{0.0}, mine["shape"])
	require.Equal(t, []any{32.0}, ref["shape"], "the after-file's temp holds 4 chunks")
	require.Equal(t, without(ref, "shape", "nchunks"), without(mine, "shape", "nchunks"))
	// Spelled out, what the comparison covered.
	require.Equal(t, "<f8", mine["dtype"])
	require.Equal(t, []any{-1.0}, mine["maxshape"])
	require.Equal(t, []any{8.0}, mine["chunks"])
	require.Equal(t, "gzip", mine["compression"])
	require.Equal(t, 4.0, mine["compression_opts"])
	require.Equal(t, true, mine["shuffle"])
	require.Equal(t, strings.Repeat("00", 8), mine["fillvalue"])
	require.Equal(t, 2.0, mine["fill_defined"], "H5D_FILL_VALUE_USER_DEFINED")
	require.Equal(t, 0.0, mine["fill_time"], "H5D_FILL_TIME_ALLOC")
	require.Equal(t, []any{[]any{2.0, 1.0, []any{8.0}, "shuffle"}, []any{1.0, 1.0, []any{4.0}, "deflate"}}, mine["filters"])
	require.Equal(t, map[string]any{"chunks": []any{"<i8", []any{1.0}, []any{8.0}}}, mine["attrs"])
	require.Equal(t, 0.0, mine["nchunks"])

	mine, ref = res.HashTable[0], res.HashTable[1]
	require.Equal(t, []any{1.0}, mine["shape"])
	require.Equal(t, strings.Repeat("00", 48), mine["rows"], "one zero row")
	require.Equal(t, map[string]any{"largest_index": []any{"<i8", []any{}, 0.0}}, mine["attrs"])
	require.Equal(t, map[string]any{"largest_index": []any{"<i8", []any{}, 4.0}}, ref["attrs"])
	// The after-file's object header changed with the commit (the table resized,
	// largest_index rewritten): TestCreateDataGroupDTypes compares a new one's.
	require.Equal(t, without(ref, "shape", "nchunks", "rows", "attrs", "header"), without(mine, "shape", "nchunks", "rows", "attrs", "header"))
	require.Equal(t, "[('hash', '|u1', (32,)), ('shape', '<i8', (2,))]", mine["dtype"])
	require.Equal(t, []any{4096.0}, mine["chunks"])
	require.Equal(t, []any{[]any{32000.0, 1.0, []any{4.0, 261.0, 196608.0}, "lzf"}}, mine["filters"])
	require.Equal(t, strings.Repeat("00", 48), mine["fillvalue"])
	require.Equal(t, 1.0, mine["fill_defined"], "H5D_FILL_VALUE_DEFAULT: versioned-hdf5 sets none")
}

// TestCreateDataGroupDTypes creates a data group per dtype and storage variant and compares
// each, through h5py, with the one h5py makes when called as versioned-hdf5 calls it.
func TestCreateDataGroupDTypes(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	f64 := func(o binary.AppendByteOrder, x float64) []byte { return o.AppendUint64(nil, math.Float64bits(x)) }
	f32 := func(o binary.AppendByteOrder, x float32) []byte { return o.AppendUint32(nil, math.Float32bits(x)) }
	cases := []struct {
		name, group string
		spec        h5.DataSpec
	}{
		{"f8-gzip-shuffle", "", h5.DataSpec{DType: "<f8", Chunks: []int64{8}, Gzip: 4, Shuffle: true, Fill: f64(le, 0.5)}},
		{"f4-be-2d", "", h5.DataSpec{DType: ">f4", Chunks: []int64{4, 3}, Gzip: -1, Fill: f32(be, 1.5)}},
		{"f8-be", "", h5.DataSpec{DType: ">f8", Chunks: []int64{2}, Gzip: 1, Fill: f64(be, -2)}},
		{"i8-lzf", "", h5.DataSpec{DType: "<i8", Chunks: []int64{16}, Gzip: -1, LZF: true, Fill: le.AppendUint64(nil, math.MaxUint64)}},
		{"i1-lzf-shuffle-3d", "", h5.DataSpec{DType: "|i1", Chunks: []int64{2, 2, 2}, Gzip: -1, LZF: true, Shuffle: true, Fill: []byte{0xfb}}},
		{"i2-be", "", h5.DataSpec{DType: ">i2", Chunks: []int64{5}, Gzip: -1, Fill: be.AppendUint16(nil, 300)}},
		{"i4", "", h5.DataSpec{DType: "<i4", Chunks: []int64{5}, Gzip: 9}},
		{"u2-gzip0", "", h5.DataSpec{DType: "<u2", Chunks: []int64{10}, Gzip: 0, Fill: le.AppendUint16(nil, 7)}},
		{"u1-3d", "", h5.DataSpec{DType: "|u1", Chunks: []int64{4, 4, 4}, Gzip: 9, Shuffle: true, Fill: []byte{255}}},
		{"u4-be", "", h5.DataSpec{DType: ">u4", Chunks: []int64{3}, Gzip: -1, Shuffle: true}},
		{"u8", "", h5.DataSpec{DType: "<u8", Chunks: []int64{3}, Gzip: -1, Fill: le.AppendUint64(nil, 1<<63)}},
		{"b1", "", h5.DataSpec{DType: "|b1", Chunks: []int64{8}, Gzip: -1, Fill: []byte{1}}},
		{"c16", "", h5.DataSpec{DType: "<c16", Chunks: []int64{4}, Gzip: 1, Fill: append(f64(le, 1), f64(le, -2)...)}},
		{"c8", "", h5.DataSpec{DType: "<c8", Chunks: []int64{4}, Gzip: -1}},
		{"c8-be", "", h5.DataSpec{DType: ">c8", Chunks: []int64{4}, Gzip: -1, Fill: append(f32(be, 3), f32(be, 4)...)}},
		{"S8", "", h5.DataSpec{DType: "|S8", Chunks: []int64{2}, Gzip: -1, Fill: []byte("abc\x00\x00\x00\x00\x00")}},
		{"S1-lzf", "", h5.DataSpec{DType: "|S1", Chunks: []int64{64}, Gzip: -1, LZF: true}},
		{"nested", "/_version_data/deep/er/ds", h5.DataSpec{DType: "<i8", Chunks: []int64{4}, Gzip: -1}},
		{"utf8", "/_version_data/grüße/ds", h5.DataSpec{DType: "<f8", Chunks: []int64{4}, Gzip: -1}},
	}
	f, p := rwCopy(t, goldenBefore)
	var py []pyCase
	for _, c := range cases {
		group := c.group
		if group == "" {
			group = "/_version_data/" + c.name
		}
		require.NoError(t, f.CreateDataGroup(group, c.spec), c.name)
		// What libhdf5 reads back through this package.
		raw, err := f.OpenDataset(group + "/raw_data")
		require.NoError(t, err)
		info := raw.Info()
		require.NoError(t, raw.Close())
		size, err := h5.ItemSize(c.spec.DType)
		require.NoError(t, err)
		fill := c.spec.Fill
		if fill == nil {
			fill = make([]byte, size)
		}
		rank := len(c.spec.Chunks)
		require.Equal(t, c.spec.DType, info.Type.DType, c.name)
		require.Equal(t, size, info.Type.Size, c.name)
		require.Equal(t, append([]int64{0}, c.spec.Chunks[1:]...), info.Shape, c.name)
		require.Equal(t, append([]int64{-1}, c.spec.Chunks[1:]...), info.MaxShape, c.name)
		require.Equal(t, c.spec.Chunks, info.Chunks, c.name)
		require.Equal(t, fill, info.Fill, c.name)
		require.True(t, info.FillDefined, c.name)
		a, ok, err := f.Attr(group+"/raw_data", "chunks")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, c.spec.Chunks, a.Value, c.name)
		require.Equal(t, []int64{int64(rank)}, a.Shape, c.name)

		py = append(py, pyCase{Name: c.name, Group: group, RefGroup: group, Spec: map[string]any{
			"dtype": c.spec.DType, "chunks": c.spec.Chunks, "fill": hex.EncodeToString(fill),
			"gzip": c.spec.Gzip, "lzf": c.spec.LZF, "shuffle": c.spec.Shuffle,
		}})
	}
	require.NoError(t, f.Close())

	res := describe(t, p, filepath.Join(t.TempDir(), "ref.h5"), true, py)
	for i, r := range res {
		t.Run(r.Name, func(t *testing.T) {
			require.Equal(t, cases[i].spec.DType, r.RawData[0]["dtype"], "h5py reads the dtype back")
			require.Equal(t, r.Group[1], r.Group[0], "the group")
			require.Equal(t, r.RawData[1], r.RawData[0], "raw_data")
			require.Equal(t, r.HashTable[1], r.HashTable[0], "hash_table")
			require.Len(t, r.TypesEqual, 4)
			for what, eq := range r.TypesEqual {
				require.True(t, eq, "HDF5 type of %s (H5Tequal)", what)
			}
		})
	}
	// The comparison saw link names in both encodings: h5py names a non-ASCII path's last
	// link in UTF-8 (its one create_group call), and libhdf5 the intermediate ones ASCII.
	require.Equal(t, "utf8", res[len(res)-1].Name)
	require.Equal(t, []any{0.0, 0.0, 1.0}, res[len(res)-1].Group[0]["link_csets"], "_version_data, grüße, ds")
}

func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		size  int
		err   string
	}{
		{"<f8", 8, ""}, {">f4", 4, ""}, {"<i8", 8, ""}, {"|i1", 1, ""}, {"<u2", 2, ""}, {"|u1", 1, ""},
		{"|b1", 1, ""}, {"<c16", 16, ""}, {">c8", 8, ""}, {"|S8", 8, ""}, {"|S100", 100, ""}, {">i4", 4, ""},
		{"<f2", 0, "2-byte floats are not supported"},
		{"<f16", 0, "16-byte floats are not supported"},
		{"<i3", 0, "3-byte integers are not supported"},
		{"<c32", 0, "32-byte complex numbers are not supported"},
		{"<U4", 0, "unicode strings (U) are not supported"},
		{"|O", 0, "not a numpy dtype string"},
		{"|O8", 0, "object arrays (variable-length strings) are not supported"},
		{"<M8", 0, `kind 'M' is not supported`},
		{"|V16", 0, `kind 'V' is not supported`},
		{"|b2", 0, "bool is |b1"},
		{"<i1", 0, "numpy writes this type with byte order |"},
		{"<S8", 0, "numpy writes this type with byte order |"},
		{"|f8", 0, "byte order | is for 1-byte types"},
		{"=f8", 0, "byte order '=' is not one of"},
		{"|S0", 0, "not a numpy dtype string"},
		{"|S08", 0, "not a numpy dtype string"},
		{"f8", 0, "not a numpy dtype string"},
		{"", 0, "not a numpy dtype string"},
	} {
		t.Run(tc.dtype, func(t *testing.T) {
			n, err := h5.ItemSize(tc.dtype)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, `dtype "`+tc.dtype+`"`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.size, n)
		})
	}
}

// TestCreateDataGroupRefused: a bad spec or path is refused and creates nothing.
func TestCreateDataGroupRefused(t *testing.T) {
	f, _ := rwCopy(t, goldenBefore)
	good := h5.DataSpec{DType: "<f8", Chunks: []int64{8}, Gzip: -1}
	before, err := f.Members("/_version_data")
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		group string
		spec  func(s *h5.DataSpec)
		err   string
		is    error
	}{
		{"dtype", "", func(s *h5.DataSpec) { s.DType = "<U8" }, "unicode strings (U) are not supported", nil},
		{"rank 0", "", func(s *h5.DataSpec) { s.Chunks = nil }, "no chunk shape", nil},
		{"rank 33", "", func(s *h5.DataSpec) { s.Chunks = make([]int64, 33) }, "rank 33 exceeds HDF5's 32", nil},
		{"zero chunk", "", func(s *h5.DataSpec) { s.Chunks = []int64{4, 0} }, "chunk dimension 1 is 0", nil},
		{"negative chunk", "", func(s *h5.DataSpec) { s.Chunks = []int64{-8} }, "chunk dimension 0 is -8", nil},
		{"huge chunk", "", func(s *h5.DataSpec) { s.Chunks = []int64{1 << 20, 1 << 10} }, "chunks of 4 GiB or more", nil},
		{"fill size", "", func(s *h5.DataSpec) { s.Fill = []byte{0, 0, 0, 0} }, "fill value of 4 bytes for <f8, whose elements have 8", nil},
		{"gzip 10", "", func(s *h5.DataSpec) { s.Gzip = 10 }, "gzip level 10 is outside", nil},
		{"gzip -2", "", func(s *h5.DataSpec) { s.Gzip = -2 }, "gzip level -2 is outside", nil},
		{"gzip and lzf", "", func(s *h5.DataSpec) { s.Gzip, s.LZF = 1, true }, "gzip and LZF together", nil},
		{"exists", "/_version_data/prices", nil, "something is there already", fs.ErrExist},
		{"exists as dataset", "/_version_data/prices/raw_data", nil, "something is there already", fs.ErrExist},
		{"relative", "_version_data/x", nil, "not a clean absolute path", nil},
		{"root", "/", nil, "not a clean absolute path", nil},
		{"unclean", "/_version_data//x", nil, "not a clean absolute path", nil},
		{"below a dataset", "/_version_data/prices/raw_data/x", nil, "create data group /_version_data/prices/raw_data/x", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := tc.group
			if group == "" {
				group = "/_version_data/new"
			}
			spec := good
			if tc.spec != nil {
				tc.spec(&spec)
			}
			err := f.CreateDataGroup(group, spec)
			require.ErrorContains(t, err, tc.err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			k, err := f.Kind("/_version_data/new")
			require.NoError(t, err)
			require.Equal(t, h5.KindMissing, k)
			after, err := f.Members("/_version_data")
			require.NoError(t, err)
			require.Equal(t, before, after)
			m, err := f.Members("/_version_data/prices")
			require.NoError(t, err)
			require.Equal(t, []h5.Member{{Name: "hash_table", Kind: h5.KindDataset}, {Name: "raw_data", Kind: h5.KindDataset}}, m)
		})
	}
	// A file opened read-only: libhdf5 refuses, nothing is created.
	ro, err := h5.Open(goldenBefore)
	require.NoError(t, err)
	defer ro.Close()
	require.ErrorContains(t, ro.CreateDataGroup("/_version_data/new", good), "create data group /_version_data/new: H5Gcreate2")
	k, err := ro.Kind("/_version_data/new")
	require.NoError(t, err)
	require.Equal(t, h5.KindMissing, k)

	// The spec was fine all along: the same path is created.
	require.NoError(t, f.CreateDataGroup("/_version_data/new", good))
	m, err := f.Members("/_version_data/new")
	require.NoError(t, err)
	require.Equal(t, []h5.Member{{Name: "hash_table", Kind: h5.KindDataset}, {Name: "raw_data", Kind: h5.KindDataset}}, m)
}

// attrsPy prints, for each attribute of the object at argv[2], how h5py reads it back:
// the Python type, numpy dtype and shape, and the value.
const attrsPy = `
import sys, json, h5py, numpy as np
out = {}
with h5py.File(sys.argv[1], "r") as f:
    o = f[sys.argv[2]]
    for k in o.attrs:
        v = o.attrs[k]
        d = dict(type=type(v).__module__ + "." + type(v).__name__,
                 value=v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v)
        if isinstance(v, np.ndarray):
            d.update(dtype=v.dtype.str, shape=list(v.shape), elem=sorted({type(x).__name__ for x in v.flat}))
        out[k] = d
print(json.dumps(out))
`

// TestSetAttrJSON sets an attribute of each kind from JSON, then reads it back through this
// package (and the project's JSON rendering of it: what getfattr shows) and through h5py.
func TestSetAttrJSON(t *testing.T) {
	const obj = "/_version_data/versions/r1"
	cases := []struct {
		name, json string
		value      any
		shape      []int64
		dtype      string // this package's
		rendered   string // xattrs.AttrJSON's form, if not json
		pyType     string
		pyDType    string // arrays: numpy dtype
		pyElem     string // arrays: Python type of the elements
	}{
		{"str", `"hello"`, "hello", nil, "O", "", "builtins.str", "", ""},
		{"str_utf8", `"grüße ✓"`, "grüße ✓", nil, "O", "", "builtins.str", "", ""},
		{"str_empty", `""`, "", nil, "O", "", "builtins.str", "", ""},
		{"true", `true`, true, nil, "|b1", "", "numpy.bool_", "", ""},
		{"false", `false`, false, nil, "|b1", "", "numpy.bool_", "", ""},
		{"int", `42`, int64(42), nil, "<i8", "", "numpy.int64", "", ""},
		{"int_neg", `-7`, int64(-7), nil, "<i8", "", "numpy.int64", "", ""},
		{"int_max", `9223372036854775807`, int64(math.MaxInt64), nil, "<i8", "", "numpy.int64", "", ""},
		{"float", `1.5`, 1.5, nil, "<f8", "", "numpy.float64", "", ""},
		{"float_exp", `-2.5e-3`, -2.5e-3, nil, "<f8", "-0.0025", "numpy.float64", "", ""},
		// Go renders a whole float without its fraction: getfattr shows 2, which this
		// function would read as an integer.
		{"float_whole", `2.0`, 2.0, nil, "<f8", "2", "numpy.float64", "", ""},
		{"ints", `[1, 2, 3]`, []int64{1, 2, 3}, []int64{3}, "<i8", "[1,2,3]", "numpy.ndarray", "<i8", "int64"},
		{"ints_2d", `[[1,2,3],[4,5,6]]`, []int64{1, 2, 3, 4, 5, 6}, []int64{2, 3}, "<i8", "", "numpy.ndarray", "<i8", "int64"},
		{"floats", `[1.25,-3.5]`, []float64{1.25, -3.5}, []int64{2}, "<f8", "", "numpy.ndarray", "<f8", "float64"},
		{"numbers", `[1,2.5]`, []float64{1, 2.5}, []int64{2}, "<f8", "", "numpy.ndarray", "<f8", "float64"},
		{"floats_3d", `[[[0.5],[1.5]]]`, []float64{0.5, 1.5}, []int64{1, 2, 1}, "<f8", "", "numpy.ndarray", "<f8", "float64"},
		{"one", `[7]`, []int64{7}, []int64{1}, "<i8", "", "numpy.ndarray", "<i8", "int64"},
		{"strs", `["a","bc","ü"]`, []string{"a", "bc", "ü"}, []int64{3}, "O", "", "numpy.ndarray", "|O", "str"},
		{"strs_2d", `[["a","b"],["c","d"]]`, []string{"a", "b", "c", "d"}, []int64{2, 2}, "O", "", "numpy.ndarray", "|O", "str"},
		{"bools", `[true,false,true]`, []bool{true, false, true}, []int64{3}, "|b1", "", "numpy.ndarray", "|b1", "bool_"},
		{"bools_2d", `[[true],[false]]`, []bool{true, false}, []int64{2, 1}, "|b1", "", "numpy.ndarray", "|b1", "bool_"},
	}
	f, p := rwCopy(t, goldenBefore)
	for _, c := range cases {
		require.NoError(t, f.SetAttrJSON(obj, c.name, []byte(c.json)), c.name)
	}
	// Replacing changes the type too.
	require.NoError(t, f.SetAttrJSON(obj, "int", []byte(`"was a string"`)))
	require.NoError(t, f.SetAttrJSON(obj, "int", []byte(`42`)))

	attrs, err := f.Attrs(obj)
	require.NoError(t, err)
	got := map[string]h5.Attr{}
	for _, a := range attrs {
		got[a.Name] = a
	}
	require.Len(t, got, len(cases)+3, "the cases and r1's committed, prev_version and timestamp")
	for _, c := range cases {
		a := got[c.name]
		require.Equal(t, c.value, a.Value, c.name)
		require.Equal(t, c.shape, a.Shape, c.name)
		require.Equal(t, c.dtype, a.Type.DType, c.name)
		want := c.rendered
		if want == "" {
			want = c.json
		}
		r, err := json.Marshal(h5json.Attr(a))
		require.NoError(t, err)
		require.JSONEq(t, want, string(r), c.name)
	}
	require.NoError(t, f.Close())

	out, err := exec.Command(python, "-c", attrsPy, p, obj).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var py map[string]struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
		DType string          `json:"dtype"`
		Shape []int64         `json:"shape"`
		Elem  []string        `json:"elem"`
	}
	require.NoError(t, json.Unmarshal(out, &py), "%s", out)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok := py[c.name]
			require.True(t, ok)
			require.Equal(t, c.pyType, v.Type)
			require.JSONEq(t, c.json, string(v.Value))
			if c.pyDType != "" {
				require.Equal(t, c.pyDType, v.DType)
				require.Equal(t, c.shape, v.Shape)
				require.Equal(t, []string{c.pyElem}, v.Elem)
			}
		})
	}
}

// TestSetAttrJSONRefused: values without an h5py form are refused, and neither an existing
// attribute nor the object's list of attributes changes.
func TestSetAttrJSONRefused(t *testing.T) {
	const obj = "/_version_data/versions/r1"
	f, _ := rwCopy(t, goldenBefore)
	require.NoError(t, f.SetAttrJSON(obj, "keep", []byte(`"old"`)))
	before, err := f.Attrs(obj)
	require.NoError(t, err)
	for _, tc := range []struct{ name, json, err string }{
		{"null", `null`, "null has no HDF5 attribute form"},
		{"object", `{"a": 1}`, "JSON objects have no HDF5 attribute form"},
		{"empty object", `{}`, "JSON objects have no HDF5 attribute form"},
		{"empty array", `[]`, "an empty array has no element type"},
		{"empty inner", `[[]]`, "an empty array has no element type"},
		{"empty later", `[[1],[]]`, "nested arrays are not rectangular"},
		{"ragged", `[[1,2],[3]]`, "nested arrays are not rectangular"},
		{"depths", `[[1],2]`, "nested arrays are not rectangular"},
		{"deeper later", `[1,[2]]`, "nested arrays are not rectangular"},
		{"mixed", `[1,"a"]`, "the array mixes strings, numbers and booleans"},
		{"bool and int", `[true,1]`, "the array mixes strings, numbers and booleans"},
		{"null inside", `[1,null]`, "null has no HDF5 attribute form"},
		{"object inside", `[{"a":1}]`, "JSON objects have no HDF5 attribute form"},
		{"int64 overflow", `9223372036854775808`, "integer 9223372036854775808 does not fit in int64"},
		{"float overflow", `[1e999]`, "number 1e999 does not fit in float64"},
		{"NUL", `"a\u0000b"`, "a string with a NUL byte"},
		{"too deep", strings.Repeat("[", 33) + "1" + strings.Repeat("]", 33), "arrays nested 33 deep: HDF5 allows 32"},
		{"empty", ``, "not a JSON value"},
		{"not json", `shares`, "not a JSON value"},
		{"two values", `1 2`, "more than one JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"keep", "new"} {
				err := f.SetAttrJSON(obj, name, []byte(tc.json))
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, "set attribute "+name+" of "+obj)
				after, err := f.Attrs(obj)
				require.NoError(t, err)
				require.Equal(t, before, after)
			}
		})
	}
	require.ErrorContains(t, f.SetAttrJSON(obj, "", []byte(`1`)), "an attribute name is non-empty")

	// libhdf5 refusing (a read-only file) leaves the attributes as they were, and says why.
	ro, err := h5.Open(goldenBefore)
	require.NoError(t, err)
	defer ro.Close()
	roBefore, err := ro.Attrs(obj)
	require.NoError(t, err)
	require.ErrorContains(t, ro.SetAttrJSON(obj, "committed", []byte(`false`)), "set attribute committed of "+obj+": H5Acreate_by_name")
	require.ErrorContains(t, ro.DeleteAttr(obj, "committed"), "delete attribute committed of "+obj+": H5Adelete_by_name")
	roAfter, err := ro.Attrs(obj)
	require.NoError(t, err)
	require.Equal(t, roBefore, roAfter)

	err = f.SetAttrJSON("/no/such/object", "x", []byte(`1`))
	require.ErrorContains(t, err, "set attribute x of /no/such/object")
	after, err := f.Attrs(obj)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestDeleteAttr(t *testing.T) {
	const obj = "/_version_data/versions/r1"
	f, _ := rwCopy(t, goldenBefore)
	require.NoError(t, f.SetAttrJSON(obj, "unit", []byte(`"shares"`)))
	names := func() []string {
		attrs, err := f.Attrs(obj)
		require.NoError(t, err)
		var n []string
		for _, a := range attrs {
			n = append(n, a.Name)
		}
		return n
	}
	require.Equal(t, []string{"committed", "prev_version", "timestamp", "unit"}, names())
	require.NoError(t, f.DeleteAttr(obj, "unit"))
	require.Equal(t, []string{"committed", "prev_version", "timestamp"}, names())
	err := f.DeleteAttr(obj, "unit")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "delete attribute unit of "+obj)
	require.Equal(t, []string{"committed", "prev_version", "timestamp"}, names())
	require.Error(t, f.DeleteAttr("/no/such/object", "unit"))
}
