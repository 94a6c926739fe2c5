package h5meta

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEncodeMappingList: the mapping lists and global heap collections libhdf5 wrote for
// versioned-hdf5 files of several geometries (written with h5py, as versioned-hdf5 writes
// them) are byte for byte what EncodeMappingList and HeapCollection give for the same
// mappings.
func TestEncodeMappingList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		own   bool // the list is large enough for a collection of its own
		ranks int
	}{
		{"1-D, shared collection", []string{"--shape", "30", "--chunks", "4"}, false, 1},
		{"1-D", []string{"--shape", "3000", "--chunks", "7"}, true, 1},
		{"2-D with edge chunks", []string{"--shape", "100,30", "--chunks", "7,4"}, true, 2},
		{"3-D", []string{"--shape", "9,10,11", "--chunks", "2,3,4"}, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := makeVersioned(t, t.TempDir(), "f.h5", append(tc.args, "--versions", "2")...)
			e := expect(t, path, "--addrs")
			f := open(t, path)
			for _, v := range []string{"v0", "v1"} {
				ohdr := e.dataset(t, "/_version_data/versions/"+v+"/data").Addr
				ms, err := f.VirtualMappings(ohdr)
				require.NoError(t, err)
				var vs, cs, ss []int64
				for _, m := range ms {
					require.Equal(t, m.VCount, m.SrcCount)
					vs, cs, ss = append(vs, m.VStart...), append(cs, m.VCount...), append(ss, m.SrcStart...)
				}
				list, err := f.EncodeMappingList(".", ms[0].SrcDataset, tc.ranks, vs, cs, ss)
				require.NoError(t, err)
				require.Equal(t, tc.own, f.OwnHeapCollection(len(list)))

				ref, err := f.MappingListRef(ohdr)
				require.NoError(t, err)
				require.False(t, ref.Undefined(f))
				stored, err := f.globalHeapObject(ref.Addr, ref.Index)
				require.NoError(t, err)
				require.Equal(t, stored, list, "%s: the list libhdf5 stored", v)
				l, err := f.StoredMappings(ohdr)
				require.NoError(t, err)
				require.Equal(t, len(stored), l.Size())
				var got []byte
				require.NoError(t, l.Copy(func(p []byte) error { got = append(got, p...); return nil }))
				require.Equal(t, stored, got)
				n, err := f.MappingListLen(ohdr)
				require.NoError(t, err)
				require.Equal(t, len(stored), n)
				layout, err := f.read(uint64(ref.At)-2, 2+f.so+4, "layout")
				require.NoError(t, err)
				require.Equal(t, []byte{4, classVirtual}, layout[:2], "At points into the layout message")
				if !tc.own {
					continue
				}
				require.EqualValues(t, 1, ref.Index)
				coll := f.HeapCollection(list)
				size, err := f.heapSize(ref.Addr)
				require.NoError(t, err)
				stored, err = f.read(ref.Addr, int(size), "collection")
				require.NoError(t, err)
				// Headers and the object; libhdf5 leaves the object's padding as it was in memory.
				end := f.heapHeader() + f.heapObjectHeader() + len(list)
				require.Equal(t, stored[:end], coll[:end], "%s: the collection libhdf5 wrote", v)
				require.Len(t, coll, len(stored))
			}
		})
	}
}

func TestEncodeMappingListUnsupported(t *testing.T) {
	f := &File{so: 8, sl: 8}
	for _, tc := range []struct {
		name       string
		vs, cs, ss []int64
	}{
		{"virtual start past 32 bits", []int64{1 << 32}, []int64{1}, []int64{0}},
		{"source end past 32 bits", []int64{0}, []int64{2}, []int64{1<<32 - 1}},
		{"empty block", []int64{0}, []int64{0}, []int64{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.EncodeMappingList(".", "/raw", 1, tc.vs, tc.cs, tc.ss)
			require.ErrorIs(t, err, ErrUnsupported)
		})
	}
	_, err := f.EncodeMappingList(".", "/raw", 1, []int64{1<<32 - 1}, []int64{1}, []int64{0})
	require.NoError(t, err, "the last 32-bit coordinate")
	_, err = f.EncodeMappingList(".", "/raw", 2, []int64{0}, []int64{1}, []int64{0})
	require.Error(t, err, "coordinates that are not whole mappings")
}
