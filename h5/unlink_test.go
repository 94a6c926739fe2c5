package h5

import (
	"encoding/binary"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5meta"
)

// TestUnlinkDropsLists: unlinking a group drops the mapping lists of the virtual datasets
// the unlink frees and of no other (one linked elsewhere too keeps its list); what stays
// reads whole through libhdf5 and h5py; an unlink naming a missing path changes nothing.
func TestUnlinkDropsLists(t *testing.T) {
	path, f, src := openRW(t)
	srcData := readAll(t, src)
	rows := src.Info().Shape[0]
	const n = 300 // mappings: a list with a collection of its own
	var blocks []VirtualBlock
	want := make([]byte, 8*n)
	for i := range int64(n) {
		s := (i * 5) % rows
		blocks = append(blocks, VirtualBlock{VStart: []int64{i}, Count: []int64{1}, SrcStart: []int64{s}})
		copy(want[8*i:8*i+8], srcData[8*s:])
	}
	require.NoError(t, f.CreateGroup("/g"))
	require.NoError(t, f.CreateGroup("/g/sub"))
	for _, p := range []string{"/g/sub/a", "/g/b", "/kept"} {
		require.NoError(t, f.CreateVirtual(p, src, []int64{n}, make([]byte, 8), blocks))
	}
	require.NoError(t, f.CheckMappingLists())
	require.NoError(t, f.FlushSync())
	require.NoError(t, src.Close())
	require.NoError(t, f.Close())
	out, err := exec.Command("/usr/bin/python3", "-c", `import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f["other"] = f["g/b"]`, path).CombinedOutput()
	require.NoError(t, err, "%s", out)

	f, err = OpenRW(path)
	require.NoError(t, err)
	err = f.Unlink("/kept", "/missing")
	require.Error(t, err)
	// A drop is seen by libhdf5's reads until it is taken back, and never reaches the file.
	func() {
		lock()
		defer unlock()
		id, err := f.id()
		require.NoError(t, err)
		ref := func() h5meta.HeapRef {
			meta, err := metadata(id)
			require.NoError(t, err)
			a, err := objectAddr(id, meta, "/g/sub/a", nil)
			require.NoError(t, err)
			r, err := meta.MappingListRef(a)
			require.NoError(t, err)
			return r
		}
		before := ref()
		// h5meta maps a range from the file only while nothing is held over it.
		r := vfdReader{id}
		unheld := func(at int64) bool {
			file := r.FileOf(at, 12)
			if file != nil {
				file.Close()
			}
			return file != nil
		}
		require.True(t, unheld(before.At))
		held, err := f.dropLists(id, []string{"/g"})
		require.NoError(t, err)
		require.Len(t, held, 1, "/g/sub/a only: /g/b is linked at /other too")
		require.Equal(t, before.At, held[0].addr)
		require.Equal(t, ^uint64(0), ref().Addr, "libhdf5 reads no list")
		require.False(t, unheld(before.At), "the drop is held over the heap ID")
		require.True(t, unheld(int64(before.Addr)), "the list itself is the file's")
		require.NoError(t, f.retract(id, held, nil))
		require.Equal(t, before, ref())
		require.True(t, unheld(before.At), "taken back")
	}()
	require.NoError(t, f.Unlink("/g"))
	require.NoError(t, f.FlushSync())
	require.NoError(t, f.Close())

	f, err = Open(path)
	require.NoError(t, err)
	defer f.Close()
	k, err := f.Kind("/g")
	require.NoError(t, err)
	require.Equal(t, KindMissing, k)
	for _, p := range []string{"/other", "/kept"} {
		checkVirtual(t, f, p, blocks, "/_version_data/x/raw_data", want)
	}
	out, err = exec.Command("/usr/bin/python3", "-c", `import h5py, sys, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    for p in ("other", "kept"):
        assert len(f[p].virtual_sources()) == 300, p
        sys.stdout.buffer.write(f[p][()].tobytes())`, path).Output()
	require.NoError(t, err)
	require.Len(t, out, 2*len(want))
	for i := range 2 * n {
		require.Equal(t, binary.LittleEndian.Uint64(want[8*(i%n):]), binary.LittleEndian.Uint64(out[8*i:]), "element %d", i)
	}
}
