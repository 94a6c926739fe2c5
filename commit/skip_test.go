package commit

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// TestSkipUnchangedFillEdgeChunk: growing leaves the new edge chunk unmapped (fill);
// writing the fill value it holds stores it (a trimmed chunk equal to the fill value is
// stored), so the chunk map differs from the base's while the data does not. A close
// (SkipUnchanged) makes no version then; different data under a different map still does.
func TestSkipUnchangedFillEdgeChunk(t *testing.T) {
	file := fixture.Copy(t, fixture.Dir()+"/basic_1d.h5") // v4: int64 [0 1 2 3 40 555], chunks 4, fill -1
	f, c := openCommitter(t, file, Options{})
	open := func(v string) (*versions.Dataset, func() []byte, *staged.Array) {
		d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/x")
		require.NoError(t, err)
		arr, err := NewStaged(d)
		require.NoError(t, err)
		read := func() []byte {
			b := make([]byte, arr.Size())
			_, err := arr.ReadAt(b, 0, d.ChunkSource())
			require.NoError(t, err)
			return b
		}
		return d, read, arr
	}
	d, read, arr := open("v4")
	require.NoError(t, arr.Resize([]int64{9}, d.ChunkSource()))
	require.NoError(t, c.SetNextName("grown"))
	res, err := c.Commit(Change{Base: "v4", Dataset: "x", Array: arr})
	require.NoError(t, err)
	require.Equal(t, "grown", res.Name)

	minus1 := binary.LittleEndian.AppendUint64(nil, ^uint64(0))
	d, read, arr = open("grown")
	before := read()
	_, err = arr.WriteAt(minus1, 8*8, d.ChunkSource()) // element 8, edge chunk (2): -1 again
	require.NoError(t, err)
	require.True(t, arr.Dirty())
	res, err = c.Commit(Change{Base: "grown", Dataset: "x", Array: arr, SkipUnchanged: true})
	require.NoError(t, err)
	require.True(t, res.Skipped, "same data as the base: no version")
	require.Equal(t, "grown", res.Name)
	require.False(t, arr.Dirty())
	require.Equal(t, before, read(), "the array still reads as the base")
	cur, err := f.CurrentVersion()
	require.NoError(t, err)
	require.Equal(t, "grown", cur)

	// Shrinking and growing back refills chunk 1 ([40 555 -1 -1]) with -1: a full fill
	// chunk, unmapped, and different data.
	require.NoError(t, arr.Resize([]int64{4}, d.ChunkSource()))
	require.NoError(t, arr.Resize([]int64{9}, d.ChunkSource()))
	res, err = c.Commit(Change{Base: "grown", Dataset: "x", Array: arr, SkipUnchanged: true})
	require.NoError(t, err)
	require.False(t, res.Skipped)
	require.NotEqual(t, "grown", res.Name)
}
