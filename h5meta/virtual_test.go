package h5meta

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Version 1 mapping lists (HDF5 2.x, lower version bound 2.0), encoded here as the file
// format specification 4.0 lays them out ("Global Heap Block for Virtual Datasets"):
// version (1 byte), number of entries (size of lengths), then for each entry a flags byte,
// the source file name, the source dataset name, the source selection and the virtual
// selection; then the checksum of all that. A name is a NUL-terminated string, or, with
// its flag (bit 0 file, bit 1 dataset), the index of an earlier entry in size-of-lengths
// bytes; with bit 2 the file is the VDS's own and no file name is stored. Where a case
// says "libhdf5 2.0 reads", the same entries, patched into a file, were read with libhdf5
// 2.0.0 (h5wasm 0.10.3), its mappings and data as stated.

// v1Entry is one entry of a version 1 list: file and dset are a name stored in place
// (string), the index of an earlier entry (int) or, for file, nothing (nil: the same-file
// flag); src and virt are serialized selections.
type v1Entry struct {
	flags      byte
	file, dset any
	src, virt  []byte
}

// encodeV1 encodes a mapping list of version vers (1, or anything else to test refusals)
// with lengths of sl bytes.
func encodeV1(vers byte, sl int, ents []v1Entry) []byte {
	out := appendUint([]byte{vers}, sl, uint64(len(ents)))
	for _, e := range ents {
		out = append(out, e.flags)
		for _, name := range []any{e.file, e.dset} {
			switch name := name.(type) {
			case string:
				out = append(append(out, name...), 0)
			case int:
				out = appendUint(out, sl, uint64(name))
			}
		}
		out = append(append(out, e.src...), e.virt...)
	}
	return binary.LittleEndian.AppendUint32(out, checksum(out))
}

// hyper1 is the hyperslab selection [start, +count) in version 1: one block, 4-byte corners.
func hyper1(start, count []int64) []byte {
	rank := uint32(len(start))
	out := le32s(selHyper, 1, 0, 8+8*rank, rank, 1)
	for k := range start {
		out = binary.LittleEndian.AppendUint32(out, uint32(start[k]))
	}
	for k := range start {
		out = binary.LittleEndian.AppendUint32(out, uint32(start[k]+count[k]-1))
	}
	return out
}

// hyper3 is the regular hyperslab selection [start, +count) in version 3 with enc-byte
// fields, as libhdf5 1.12 and later write it for a high lower bound: start, stride 1,
// count 1, block of each dimension.
func hyper3(enc int, start, count []int64) []byte {
	out := append(le32s(selHyper, 3), 1, byte(enc))
	out = binary.LittleEndian.AppendUint32(out, uint32(len(start)))
	for k := range start {
		for _, v := range []int64{start[k], 1, 1, count[k]} {
			out = appendUint(out, enc, uint64(v))
		}
	}
	return out
}

func le32s(vs ...uint32) []byte {
	var out []byte
	for _, v := range vs {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	return out
}

// decodeList decodes the mapping list obj as Mappings, Scan and Verify do.
func decodeList(f *File, obj []byte) ([]Mapping, error) {
	l := &MappingList{f: f, ohdr: 1, obj: obj}
	if err := l.header(); err != nil {
		return nil, err
	}
	ms, err := l.all()
	if err == nil {
		err = l.Verify()
	}
	return ms, err
}

// m1 is a 1-D mapping of count elements: source [s, +count) to virtual [v, +count).
func m1(file, dset string, s, v, count int64) Mapping {
	return Mapping{SrcFile: file, SrcDataset: dset, SrcStart: []int64{s}, SrcCount: []int64{count}, VStart: []int64{v}, VCount: []int64{count}}
}

// mn is a mapping of any ranks.
func mn(file, dset string, sstart, scount, vstart, vcount []int64) Mapping {
	return Mapping{SrcFile: file, SrcDataset: dset, SrcStart: sstart, SrcCount: scount, VStart: vstart, VCount: vcount}
}

// e1 is m1's selections in hyperslab version 1.
func e1(flags byte, file, dset any, s, v, count int64) v1Entry {
	return v1Entry{flags, file, dset, hyper1([]int64{s}, []int64{count}), hyper1([]int64{v}, []int64{count})}
}

func TestMappingListVersion1(t *testing.T) {
	const fs, ds, same = fileShared, dsetShared, sameFile
	hyper := func(version, enc int, start, count []int64) []byte {
		if version == 1 {
			return hyper1(start, count)
		}
		return hyper3(enc, start, count)
	}
	// A long list as versioned-hdf5 writes one: every name stored once, by mapping 0.
	var long []v1Entry
	var longWant []Mapping
	for i := range int64(1500) {
		flags, dset := byte(same|ds), any(0)
		if i == 0 {
			flags, dset = same, "/_version_data/x/raw_data"
		}
		long = append(long, v1Entry{flags, nil, dset, hyper3(4, []int64{4 * (1499 - i)}, []int64{4}), hyper3(2, []int64{4 * i}, []int64{4})})
		longWant = append(longWant, m1(".", "/_version_data/x/raw_data", 4*(1499-i), 4*i, 4))
	}
	for _, tc := range []struct {
		name string
		sl   int
		ents []v1Entry
		want []Mapping
	}{
		{
			// libhdf5 2.0 reads: ".", "/raw" four times.
			name: "names shared between mappings",
			ents: []v1Entry{e1(0, ".", "/raw", 6, 0, 3), e1(fs|ds, 0, 0, 9, 3, 3), e1(fs|ds, 0, 0, 0, 6, 3), e1(fs|ds, 0, 0, 3, 9, 3)},
			want: []Mapping{m1(".", "/raw", 6, 0, 3), m1(".", "/raw", 9, 3, 3), m1(".", "/raw", 0, 6, 3), m1(".", "/raw", 3, 9, 3)},
		},
		{
			// libhdf5 2.0 reads: the file ".".
			name: "same file",
			ents: []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(same|ds, nil, 0, 9, 3, 3)},
			want: []Mapping{m1(".", "/raw", 6, 0, 3), m1(".", "/raw", 9, 3, 3)},
		},
		{
			name: "distinct names",
			ents: []v1Entry{e1(0, "a.h5", "/x", 0, 0, 2), e1(0, "b.h5", "/y", 0, 2, 2), e1(same, nil, "/z", 5, 4, 2)},
			want: []Mapping{m1("a.h5", "/x", 0, 0, 2), m1("b.h5", "/y", 0, 2, 2), m1(".", "/z", 5, 4, 2)},
		},
		{
			// libhdf5 2.0 reads: mapping 3 has mapping 1's dataset name, "/raw2".
			name: "index of a later name",
			ents: []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(same, nil, "/raw2", 9, 3, 3), e1(same|ds, nil, 0, 0, 6, 3), e1(same|ds, nil, 1, 3, 9, 3)},
			want: []Mapping{m1(".", "/raw", 6, 0, 3), m1(".", "/raw2", 9, 3, 3), m1(".", "/raw", 0, 6, 3), m1(".", "/raw2", 3, 9, 3)},
		},
		{
			// libhdf5 2.0 reads: mapping 3's file is mapping 0's, its dataset mapping 2's.
			name: "file and dataset from different mappings",
			ents: []v1Entry{e1(0, "other.h5", "/ext", 6, 0, 3), e1(fs|ds, 0, 0, 9, 3, 3), e1(same, nil, "/raw", 0, 6, 3), e1(fs|ds, 0, 2, 3, 9, 3)},
			want: []Mapping{m1("other.h5", "/ext", 6, 0, 3), m1("other.h5", "/ext", 9, 3, 3), m1(".", "/raw", 0, 6, 3), m1("other.h5", "/raw", 3, 9, 3)},
		},
		{
			// libhdf5 2.0 reads it: an index may name a mapping that stores an index itself.
			name: "index of a shared name",
			ents: []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(same|ds, nil, 0, 9, 3, 3), e1(same|ds, nil, 1, 0, 6, 3), e1(same|ds, nil, 2, 3, 9, 3)},
			want: []Mapping{m1(".", "/raw", 6, 0, 3), m1(".", "/raw", 9, 3, 3), m1(".", "/raw", 0, 6, 3), m1(".", "/raw", 3, 9, 3)},
		},
		{
			// libhdf5 2.0 reads: ".", and no index after the flags (it fails when there is one).
			name: "same file with the file-shared flag",
			ents: []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(same|fs|ds, nil, 0, 9, 3, 3)},
			want: []Mapping{m1(".", "/raw", 6, 0, 3), m1(".", "/raw", 9, 3, 3)},
		},
		{
			// libhdf5 2.0 reads: ".".
			name: "index of a same-file mapping",
			ents: []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(fs|ds, 0, 0, 9, 3, 3)},
			want: []Mapping{m1(".", "/raw", 6, 0, 3), m1(".", "/raw", 9, 3, 3)},
		},
		{
			name: "names stored again",
			ents: []v1Entry{e1(0, ".", "/raw", 0, 0, 1), e1(0, ".", "/raw", 1, 1, 1), e1(0, ".", "/raw", 2, 2, 1), e1(fs|ds, 1, 2, 3, 3, 1)},
			want: []Mapping{m1(".", "/raw", 0, 0, 1), m1(".", "/raw", 1, 1, 1), m1(".", "/raw", 2, 2, 1), m1(".", "/raw", 3, 3, 1)},
		},
		{
			name: "4-byte lengths",
			sl:   4,
			ents: []v1Entry{e1(0, "f.h5", "/raw", 6, 0, 3), e1(fs|ds, 0, 0, 9, 3, 3)},
			want: []Mapping{m1("f.h5", "/raw", 6, 0, 3), m1("f.h5", "/raw", 9, 3, 3)},
		},
		{
			name: "2-D and 3-D, selection versions 1 and 3",
			ents: []v1Entry{
				{same, nil, "/a", hyper(3, 2, []int64{0, 8}, []int64{4, 4}), hyper(3, 4, []int64{100, 0, 7}, []int64{2, 4, 2})},
				{same | ds, nil, 0, hyper(3, 2, []int64{4, 8}, []int64{4, 4}), hyper(3, 4, []int64{102, 0, 7}, []int64{2, 4, 2})},
				{same | ds, nil, 0, hyper(1, 4, []int64{8, 8}, []int64{4, 4}), hyper(3, 8, []int64{104, 0, 7}, []int64{2, 4, 2})},
				{same, nil, "/b", hyper(3, 8, []int64{1 << 40, 0}, []int64{2, 8}), hyper(1, 4, []int64{106, 0, 7}, []int64{2, 4, 2})},
			},
			want: []Mapping{
				mn(".", "/a", []int64{0, 8}, []int64{4, 4}, []int64{100, 0, 7}, []int64{2, 4, 2}),
				mn(".", "/a", []int64{4, 8}, []int64{4, 4}, []int64{102, 0, 7}, []int64{2, 4, 2}),
				mn(".", "/a", []int64{8, 8}, []int64{4, 4}, []int64{104, 0, 7}, []int64{2, 4, 2}),
				mn(".", "/b", []int64{1 << 40, 0}, []int64{2, 8}, []int64{106, 0, 7}, []int64{2, 4, 2}),
			},
		},
		{name: "long, in batches", ents: long, want: longWant},
		{name: "empty", ents: nil, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl := cmp.Or(tc.sl, 8)
			f := &File{so: 8, sl: sl}
			got, err := decodeList(f, encodeV1(1, sl, tc.ents))
			require.NoError(t, err)
			require.Len(t, got, len(tc.want))
			for i := range got {
				require.Equal(t, tc.want[i], got[i], "mapping %d", i)
			}
		})
	}
}

// resum is body with its checksum.
func resum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), checksum(body))
}

func TestMappingListVersion1Errors(t *testing.T) {
	const fs, ds, same = fileShared, dsetShared, sameFile
	ok := []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(same|ds, nil, 0, 9, 3, 3)}
	valid := encodeV1(1, 8, ok)
	for _, tc := range []struct {
		name        string
		obj         []byte
		msg         string
		unsupported bool
	}{
		{"version 2", encodeV1(2, 8, ok), "encoding version 2", true},
		{"reserved flag", encodeV1(1, 8, []v1Entry{e1(same|8, nil, "/raw", 6, 0, 3)}), "flags 0xc", true},
		{"later mapping's name", encodeV1(1, 8, []v1Entry{e1(same, nil, "/raw", 6, 0, 3), e1(same|ds, nil, 2, 9, 3, 3), e1(same, nil, "/r", 0, 6, 3)}),
			"mapping 1 of dataset at 1: source dataset name: refers to mapping 2, not to an earlier one", false},
		{"own name", encodeV1(1, 8, []v1Entry{e1(fs|ds, 0, 0, 6, 0, 3)}), "mapping 0 of dataset at 1: source file name: refers to mapping 0", false},
		{"unterminated name", resum(slices.Concat([]byte{1}, appendUint(nil, 8, 1), []byte{0}, bytes.Repeat([]byte("a"), 40))), "unterminated string", false},
		{"truncated index", resum(valid[:len(valid)-4-64-5]), "truncated", false},
		{"truncated selection", resum(valid[:len(valid)-4-10]), "truncated", false},
		{"more entries than bytes", append(appendUint([]byte{1}, 8, 1000), valid[9:]...), "1000 entries do not fit", false},
		{"checksum", append(bytes.Clone(valid[:len(valid)-4]), 0, 0, 0, 0), "checksum", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeList(&File{so: 8, sl: 8}, tc.obj)
			require.Error(t, err)
			require.ErrorContains(t, err, tc.msg)
			require.Equal(t, tc.unsupported, errors.Is(err, ErrUnsupported), "%v", err)
		})
	}

	// Every cut and every changed byte gives an error or mappings, never a panic.
	for n := range len(valid) {
		cut := append(bytes.Clone(valid[:n]), 0, 0, 0, 0)
		if n >= 4 {
			cut = bytes.Clone(valid[:n])
		}
		_, err := decodeList(&File{so: 8, sl: 8}, cut)
		require.Error(t, err, "cut at %d", n)
	}
	for i := range len(valid) - 4 {
		for _, v := range []byte{0, 1, 2, 4, 0xff, valid[i] ^ 0x80} {
			bad := bytes.Clone(valid)
			bad[i] = v
			_, _ = decodeList(&File{so: 8, sl: 8}, bad)
		}
	}
}

// TestMappingListVersion1File: a version 1 list in a file, in a global heap collection of
// its own as libhdf5 writes a long one, decodes to the mappings of the version 0 list it
// replaces, and StoredMappings copies it as stored.
func TestMappingListVersion1File(t *testing.T) {
	whole, err := os.ReadFile("../tests/testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	const v2x = 19392 // object header of /_version_data/versions/v2/x (h5py's h5o.get_info)
	f, err := Open(bytes.NewReader(whole), int64(len(whole)))
	require.NoError(t, err)
	want, err := f.VirtualMappings(v2x)
	require.NoError(t, err)
	require.NotEmpty(t, want)

	var ents []v1Entry
	for i, m := range want {
		e := v1Entry{sameFile | dsetShared, nil, 0, hyper3(2, m.SrcStart, m.SrcCount), hyper3(2, m.VStart, m.VCount)}
		if i == 0 {
			e.flags, e.dset = sameFile, m.SrcDataset
		}
		ents = append(ents, e)
	}
	list := encodeV1(1, f.sl, ents)
	ref, err := f.MappingListRef(v2x)
	require.NoError(t, err)
	eoaAt, err := f.EOAField()
	require.NoError(t, err)
	patched := slices.Concat(whole, f.HeapCollection(list))
	binary.LittleEndian.PutUint64(patched[ref.At:], uint64(len(whole)))
	binary.LittleEndian.PutUint32(patched[ref.At+8:], 1)
	binary.LittleEndian.PutUint64(patched[eoaAt:], uint64(len(patched)))

	f, err = Open(bytes.NewReader(patched), int64(len(patched)))
	require.NoError(t, err)
	got, err := f.VirtualMappings(v2x)
	require.NoError(t, err)
	require.Equal(t, want, got)
	l, err := f.StoredMappings(v2x)
	require.NoError(t, err)
	var copied []byte
	require.NoError(t, l.Copy(func(p []byte) error { copied = append(copied, p...); return nil }))
	require.Equal(t, list, copied, "the list as stored, version 1 included")
}

// FuzzMappingList decodes arbitrary mapping lists, seeded with lists of versions 0 and 1:
// none may panic.
func FuzzMappingList(f *testing.F) {
	f.Add(encodeV1(1, 8, []v1Entry{e1(0, ".", "/raw", 6, 0, 3), e1(fileShared|dsetShared, 0, 0, 9, 3, 3), e1(sameFile|dsetShared, nil, 1, 0, 6, 3)}))
	f.Add(encodeV1(1, 8, []v1Entry{
		{sameFile, nil, "/a", hyper3(2, []int64{0, 8}, []int64{4, 4}), hyper3(4, []int64{1, 2}, []int64{4, 4})},
		{sameFile | dsetShared, nil, 0, hyper3(2, []int64{4, 8}, []int64{4, 4}), hyper3(4, []int64{5, 2}, []int64{4, 4})},
		{sameFile | dsetShared, nil, 0, hyper3(2, []int64{8, 8}, []int64{4, 4}), hyper3(4, []int64{9, 2}, []int64{4, 4})},
	}))
	v0, err := (&File{so: 8, sl: 8}).EncodeMappingList(".", "/raw", 1, []int64{0, 4, 8}, []int64{4, 4, 4}, []int64{8, 0, 4})
	require.NoError(f, err)
	f.Add(v0)
	f.Fuzz(func(t *testing.T, obj []byte) {
		if len(obj) >= 4 {
			_, _ = decodeList(&File{so: 8, sl: 8}, obj)
		}
	})
}
