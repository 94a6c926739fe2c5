package chunkplan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

type config struct {
	shape, chunks []int64
	itemSize      int
}

var configs = []config{
	{[]int64{10}, []int64{3}, 1},
	{[]int64{5}, []int64{8}, 3},
	{[]int64{0}, []int64{4}, 8},
	{[]int64{17}, []int64{4}, 8},
	{[]int64{5, 7}, []int64{2, 3}, 8},
	{[]int64{4, 4}, []int64{4, 4}, 3},
	{[]int64{3, 0}, []int64{2, 2}, 1},
	{[]int64{6, 5}, []int64{10, 10}, 1},
	{[]int64{9, 5}, []int64{4, 5}, 3},
	{[]int64{5, 6, 7}, []int64{2, 3, 4}, 3},
	{[]int64{2, 0, 3}, []int64{1, 1, 1}, 3},
	{[]int64{3, 4, 5, 6}, []int64{2, 3, 2, 4}, 3},
}

// randomMap puts every chunk on the full, base or a staged slab at a random offset.
func randomMap(l *Layout, rng *rand.Rand) ChunkMap {
	m := ChunkMap{Slabs: make([]int32, l.NumChunks()), Offsets: make([]int64, l.NumChunks())}
	for k := range m.Slabs {
		if s := int32(rng.IntN(4)); s != FullSlab {
			m.Slabs[k], m.Offsets[k] = s, int64(rng.IntN(10))*l.Chunks()[0]
		}
	}
	return m
}

// coords is the coordinates of C-order element e of shape.
func coords(shape []int64, e int64) []int64 {
	c := make([]int64, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		c[i] = e % shape[i]
		e /= shape[i]
	}
	return c
}

// checkPlan checks a plan of [off, off+n) against the geometry alone: the hyperslabs tile
// the range in order, and the transfers write every byte of it exactly once, each from
// the byte of the chunk (on the slab m gives it) that holds it.
func checkPlan(t *testing.T, l *Layout, m ChunkMap, p *GetItemPlan, off, n int64) {
	t.Helper()
	is := int64(l.ItemSize())
	want := max(0, min(n, l.Size()-off))
	require.Equal(t, want, p.N)
	require.LessOrEqual(t, len(p.Hyperslabs), 2*len(l.Shape())+1)
	var next int64
	for _, h := range p.Hyperslabs {
		require.Equal(t, next, h.DstOff+int64(h.ByteLo), "hyperslab %+v", h)
		next = h.DstOff + (Elements(h.Count)-1)*is + int64(h.ByteHi)
	}
	require.Equal(t, want, next)
	written := make([]int, want)
	for i, tr := range p.Transfers {
		if i > 0 {
			prev := p.Transfers[i-1]
			require.True(t, prev.Slab < tr.Slab || prev.Slab == tr.Slab && prev.SlabOffset <= tr.SlabOffset, "sorted by slab")
		}
		k, ok := l.Flat(tr.Chunk)
		require.True(t, ok)
		require.Equal(t, m.Slabs[k], tr.Slab)
		require.Equal(t, m.Offsets[k], tr.SlabOffset)
		for e := range Elements(tr.Count) {
			in := coords(tr.Count, e)
			var dst, elem int64
			for i := range in {
				dst += in[i] * tr.DstStrides[i]
				elem = elem*l.Shape()[i] + tr.Chunk[i]*l.Chunks()[i] + tr.Start[i] + in[i]
			}
			for b := tr.ByteLo; b < tr.ByteHi; b++ {
				pos := tr.DstOff + dst + int64(b)
				require.Equal(t, elem*is+int64(b), off+pos, "transfer %d element %v byte %d", i, in, b)
				written[pos]++
			}
		}
	}
	for i, w := range written {
		require.Equal(t, 1, w, "byte %d of [%d,+%d) written once", i, off, n)
	}
}

func TestGetItemPlan(t *testing.T) {
	for ci, c := range configs {
		t.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(t *testing.T) {
			l, err := NewLayout(c.shape, c.chunks, c.itemSize)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(ci), 1))
			m := randomMap(&l, rng)
			size := l.Size()
			for range 300 {
				off, n := rng.Int64N(size+3), rng.Int64N(size+3)
				p, err := l.GetItemPlan(m, off, n)
				require.NoError(t, err)
				checkPlan(t, &l, m, p, off, n)
			}
		})
	}
}

// TestRuns: where every chunk is one run of the stream, Runs gives one run per chunk a
// range touches, in order, each from the chunk that holds its bytes; else it declines.
func TestRuns(t *testing.T) {
	for ci, c := range configs {
		t.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(t *testing.T) {
			l, err := NewLayout(c.shape, c.chunks, c.itemSize)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(ci), 2))
			m := randomMap(&l, rng)
			size, cb := l.Size(), int64(l.ChunkBytes())
			for range 300 {
				off, n := rng.Int64N(size+3), rng.Int64N(size+3)
				runs, ok := l.Runs(m, off, n)
				if !slices.Equal(c.shape[1:], c.chunks[1:]) {
					require.False(t, ok)
					return
				}
				require.True(t, ok)
				var next int64
				for i, r := range runs {
					require.Equal(t, next, r.DstOff, "run %d", i)
					require.Positive(t, r.N)
					require.LessOrEqual(t, r.ChunkOff+r.N, cb, "run %d inside its chunk", i)
					k := (off + r.DstOff) / cb
					require.Equal(t, (off+r.DstOff)%cb, r.ChunkOff, "run %d", i)
					require.Equal(t, m.Slabs[k], r.Slab)
					require.Equal(t, m.Offsets[k], r.SlabOffset)
					next += r.N
				}
				require.Equal(t, max(0, min(n, size-off)), next, "the runs cover [%d,+%d)", off, n)
			}
		})
	}
}

func TestNewLayoutErrors(t *testing.T) {
	for _, tc := range []struct {
		name          string
		shape, chunks []int64
		itemSize      int
		msg           string
	}{
		{"no axes", nil, nil, 1, "at least one axis"},
		{"axes mismatch", []int64{4}, []int64{2, 2}, 1, "axes"},
		{"zero chunk", []int64{4}, []int64{0}, 1, "positive"},
		{"negative shape", []int64{-1}, []int64{1}, 1, "negative"},
		{"zero item", []int64{4}, []int64{2}, 0, "item size"},
		{"overflow", []int64{1 << 40, 1 << 40}, []int64{1 << 20, 1 << 20}, 1, "overflow"},
		{"chunk too large", []int64{4}, []int64{1 << 40}, 1 << 30, "too large"},
		{"too many chunks", []int64{1 << 32}, []int64{1}, 1, "too many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLayout(tc.shape, tc.chunks, tc.itemSize)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	l, err := NewLayout([]int64{4, 5}, []int64{2, 2}, 1)
	require.NoError(t, err)
	_, err = l.Reshape([]int64{4})
	require.ErrorContains(t, err, "axes")
	_, err = l.GetItemPlan(ChunkMap{}, -1, 3)
	require.ErrorContains(t, err, "invalid byte range")
	_, err = l.SetItemPlan(ChunkMap{}, 18, 3)
	require.ErrorContains(t, err, "beyond the array size")
	_, err = l.FlatChunk([]int64{2, 0})
	require.ErrorContains(t, err, "out of range")
}

func TestLayout(t *testing.T) {
	l, err := NewLayout([]int64{5, 7}, []int64{2, 3}, 8)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 3}, l.Grid())
	require.Equal(t, int64(9), l.NumChunks())
	require.Equal(t, int64(5*7*8), l.Size())
	require.Equal(t, 2*3*8, l.ChunkBytes())
	require.Equal(t, int64(3*8), l.RowBytes())
	require.Equal(t, []int64{24, 8}, l.ChunkStrides())
	require.Equal(t, []int64{56, 8}, l.Strides())
	require.Equal(t, []int64{1, 1}, l.Trimmed([]int64{2, 2}))
	require.Equal(t, []int64{2, 3}, l.Trimmed([]int64{0, 1}))
	g, err := l.Reshape([]int64{6, 7})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1}, g.Trimmed([]int64{2, 2}))
	require.Equal(t, []int64{5, 7}, l.Shape(), "Reshape leaves the layout it starts from as it was")
}

func TestGetItemPlanString(t *testing.T) {
	l, err := NewLayout([]int64{5, 7}, []int64{2, 3}, 8)
	require.NoError(t, err)
	m := ChunkMap{Slabs: make([]int32, 9), Offsets: make([]int64, 9)}
	m.Slabs[0], m.Offsets[0] = BaseSlab, 4 // chunk (0, 0)
	m.Slabs[3], m.Offsets[3] = BaseSlab, 0 // chunk (1, 0)
	// Bytes [13, 132): element 1 from byte 5, elements 2..15, element 16 up to byte 4.
	plan, err := l.GetItemPlan(m, 13, 119)
	require.NoError(t, err)
	s := plan.String()
	for _, line := range []string{
		"GetItemPlan bytes [13, 132) of shape (5, 7) chunks (2, 3) itemsize 8\n",
		"# 5 hyperslabs\n",
		"out[0:1, 1:2].bytes[5:8]  # out byte 0\n",
		"out[2:3, 2:3].bytes[0:4]  # out byte 115\n",
		"# 4 transfers from slabs[0] (fill)\n",
		"out[0:1, 3:6] = slabs[0][0:1, 0:3]  # out byte 11\n",
		"# 5 transfers from slabs[1] (base)\n",
		"out[0:1, 1:2].bytes[5:8] = slabs[1][4:5, 1:2].bytes[5:8]  # out byte 0\n",
	} {
		require.Contains(t, s, line)
	}
	require.Equal(t, []int64{0, 4}, plan.BaseOffsets())
}

func TestSetItemPlanString(t *testing.T) {
	l, err := NewLayout([]int64{5, 7}, []int64{2, 3}, 8)
	require.NoError(t, err)
	m := ChunkMap{Slabs: make([]int32, 9), Offsets: make([]int64, 9)}
	m.Slabs[0], m.Offsets[0] = BaseSlab, 4 // chunk (0, 0)
	m.Slabs[1] = 2                         // chunk (0, 1): staged
	plan, err := l.SetItemPlan(m, 13, 119)
	require.NoError(t, err)
	s := plan.String()
	for _, line := range []string{
		"SetItemPlan bytes [13, 132) of shape (5, 7) chunks (2, 3) itemsize 8\n",
		"# 1 chunks wholly covered on full/base slabs: new staged chunk, old chunk not read\n",
		"chunk (0, 2): slabs[0][0:2] (fill)\n",
		"# 2 chunks partially covered on full/base slabs: copy old chunk to a new staged chunk, then update\n",
		"chunk (0, 0): slabs[1][4:6] (base)\n",
		"# 1 chunks already staged: update in place\n",
		"chunk (0, 1): slabs[2][0:2] (staged)\n",
		"chunk (1, 0)[0:1, 0:2] = value[2:3, 0:2]  # value byte 99\n",
	} {
		require.Contains(t, s, line)
	}
	for i := 1; i < len(plan.Transfers); i++ {
		a, _ := l.Flat(plan.Transfers[i-1].Chunk)
		b, _ := l.Flat(plan.Transfers[i].Chunk)
		require.LessOrEqual(t, a, b, "transfers grouped by chunk in grid order")
	}
	for _, c := range plan.Chunks {
		require.Positive(t, c.Spans, "chunk %v", c.Chunk)
	}
	require.Equal(t, "in place", UpdateInPlace.String())
}

func TestNext(t *testing.T) {
	tests := []struct {
		extent []int64
		want   [][]int64
	}{
		{[]int64{2, 3}, [][]int64{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}},
		{[]int64{3}, [][]int64{{0}, {1}, {2}}},
		{[]int64{}, [][]int64{{}}},
		{[]int64{1, 1, 2}, [][]int64{{0, 0, 0}, {0, 0, 1}}},
	}
	for _, tt := range tests {
		idx := make([]int64, len(tt.extent))
		var got [][]int64
		for {
			got = append(got, append([]int64{}, idx...))
			if !Next(idx, tt.extent) {
				break
			}
		}
		require.Equal(t, tt.want, got, "%v", tt.extent)
		require.Equal(t, make([]int64, len(tt.extent)), idx, "back at zeros")
	}
}
