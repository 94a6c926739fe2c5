package chunkmap

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// offSource's chunk at base offset off holds byte off+i at position i.
type offSource int

func (n offSource) Chunk(off int64) ([]byte, error) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(off + int64(i))
	}
	return b, nil
}

// want is byte k of m's C-order stream, element by element through the map.
func want(m *Map, src offSource, k int64) byte {
	lay := m.Layout()
	is := int64(lay.ItemSize())
	shape, chunks := lay.Shape(), lay.Chunks()
	e, b := k/is, k%is
	coords := make([]int64, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		coords[i], e = e%shape[i], e/shape[i]
	}
	grid := make([]int64, len(shape))
	var in int64 // the element's index inside its chunk, C order over the full chunk shape
	for i, c := range coords {
		grid[i] = c / chunks[i]
		in = in*chunks[i] + c%chunks[i]
	}
	slab, off := m.Slab(grid)
	if slab == chunkplan.FullSlab {
		return m.fill[b]
	}
	chunk, _ := src.Chunk(off)
	return chunk[in*is+b]
}

func TestReadAt(t *testing.T) {
	for _, c := range []struct {
		shape, chunks []int64
		itemSize      int
	}{
		{[]int64{10}, []int64{4}, 2},
		{[]int64{5, 7}, []int64{2, 3}, 3},
		{[]int64{3, 4, 5}, []int64{2, 3, 2}, 1},
	} {
		m, err := New(c.shape, c.chunks, c.itemSize, []byte{0xF1, 0xF2, 0xF3}[:c.itemSize])
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(1, uint64(c.itemSize)))
		require.NoError(t, m.Each(func(grid []int64, _ int32, _ int64) error {
			if rng.IntN(3) == 0 {
				return nil // left on the full slab
			}
			return m.MapBase(grid, rng.Int64N(8)*c.chunks[0])
		}))
		src := offSource(m.ChunkBytes())
		for range 50 {
			off := rng.Int64N(m.Size() + 2)
			p := make([]byte, rng.Int64N(m.Size()+1))
			n, err := m.ReadAt(p, off, src)
			require.NoError(t, err)
			require.Equal(t, int(min(int64(len(p)), max(0, m.Size()-off))), n)
			for i := range int64(n) {
				require.Equal(t, want(m, src, off+i), p[i], "%v/%v: byte %d", c.shape, c.chunks, off+i)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	_, err := New([]int64{4}, []int64{2}, 2, []byte{0})
	require.ErrorContains(t, err, "fill value")
	m, err := New([]int64{4, 5}, []int64{2, 2}, 1, []byte{0})
	require.NoError(t, err)
	require.ErrorContains(t, m.MapBase([]int64{2, 0}, 0), "out of range")
	require.ErrorContains(t, m.MapBase([]int64{0, 0}, -2), "invalid offset")
	_, err = m.ReadAt(make([]byte, 1), -1, nil)
	require.Error(t, err)

	require.NoError(t, m.MapBase([]int64{1, 1}, 4))
	_, err = m.ReadAt(make([]byte, 20), 0, nil)
	require.ErrorContains(t, err, "no chunk source")
	_, err = m.ReadAt(make([]byte, 20), 0, errSource{})
	require.ErrorContains(t, err, "disk on fire")
	require.ErrorContains(t, err, "base offset 4")
	_, err = m.ReadAt(make([]byte, 5), 0, errSource{}) // avoids the base chunk
	require.NoError(t, err)
	_, err = m.ReadAt(make([]byte, 20), 0, offSource(3))
	require.ErrorContains(t, err, "got 3 bytes, want 4")
}

type errSource struct{}

func (errSource) Chunk(int64) ([]byte, error) { return nil, errors.New("disk on fire") }

// TestClone: a clone shares nothing that changes.
func TestClone(t *testing.T) {
	m, err := New([]int64{4}, []int64{1}, 1, []byte{9})
	require.NoError(t, err)
	require.NoError(t, m.MapBase([]int64{1}, 7))
	c := m.Clone()
	c.Set(1, chunkplan.FullSlab, 0)
	require.NoError(t, c.MapBase([]int64{2}, 5))
	s, o := m.Slab([]int64{1})
	require.Equal(t, []any{int32(chunkplan.BaseSlab), int64(7)}, []any{s, o})
	s, _ = m.Slab([]int64{2})
	require.Equal(t, int32(chunkplan.FullSlab), s)
	s, _ = c.Slab([]int64{1})
	require.Equal(t, int32(chunkplan.FullSlab), s)
}
