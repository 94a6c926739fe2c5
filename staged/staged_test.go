package staged

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// fakeSource is raw_data: slots of full chunks concatenated along axis 0.
// It counts loads per offset.
type fakeSource struct {
	raw        []byte
	chunkBytes int
	rows       int64 // chunks[0]
	calls      map[int64]int
}

func (f *fakeSource) Chunk(off int64) ([]byte, error) {
	f.calls[off]++
	if off%f.rows != 0 {
		return nil, fmt.Errorf("misaligned offset %d", off)
	}
	slot := int(off / f.rows)
	if (slot+1)*f.chunkBytes > len(f.raw) {
		return nil, fmt.Errorf("bad read off=%d", off)
	}
	return f.raw[slot*f.chunkBytes : (slot+1)*f.chunkBytes], nil
}

// fixture is an array plus an independent description of where every chunk
// lives, used by the naive reference.
type fixture struct {
	shape, chunks []int64
	itemSize      int
	fill          []byte
	slab          []int32 // per flat chunk, as recorded by the test
	offs          []int64
	raw           []byte
	staged        []byte // contents of slab 2
	arr           *Array
	src           *fakeSource
}

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
	{[]int64{9, 11}, []int64{4, 1}, 3},
	{[]int64{5, 6, 7}, []int64{2, 3, 4}, 3},
	{[]int64{4, 1, 9}, []int64{3, 1, 4}, 8},
	{[]int64{2, 0, 3}, []int64{1, 1, 1}, 3},
	{[]int64{3, 4, 5, 6}, []int64{2, 3, 2, 4}, 3},
	{[]int64{2, 3, 1, 5}, []int64{1, 2, 1, 5}, 1},
	{[]int64{3, 2, 4, 3}, []int64{5, 5, 5, 5}, 8},
}

func prod(xs []int64) int64 {
	p := int64(1)
	for _, x := range xs {
		p *= x
	}
	return p
}

// newFixture builds an array with a random mix of unmapped (fill) chunks,
// base chunks at shuffled (sometimes shared) slots, and staged chunks.
func newFixture(t testing.TB, c config, seed uint64) *fixture {
	rng := rand.New(rand.NewPCG(seed, 7))
	f := &fixture{shape: c.shape, chunks: c.chunks, itemSize: c.itemSize}
	f.fill = make([]byte, c.itemSize)
	for i := range f.fill {
		f.fill[i] = byte(0xF0 + i)
	}
	arr, err := New(c.shape, c.chunks, c.itemSize, f.fill)
	require.NoError(t, err)
	f.arr = arr
	nd := len(c.shape)
	grid := make([]int64, nd)
	for i := range nd {
		grid[i] = (c.shape[i] + c.chunks[i] - 1) / c.chunks[i]
	}
	n := prod(grid)
	cb := int(prod(c.chunks)) * c.itemSize
	f.raw = make([]byte, int(n+1)*cb)
	for i := range f.raw {
		f.raw[i] = byte(rng.Uint32())
	}
	f.staged = make([]byte, int(n)*cb)
	for i := range f.staged {
		f.staged[i] = byte(rng.Uint32())
	}
	require.Equal(t, int32(2), arr.appendSlab(f.staged))
	f.src = &fakeSource{raw: f.raw, chunkBytes: cb, rows: c.chunks[0], calls: map[int64]int{}}
	f.slab = make([]int32, n)
	f.offs = make([]int64, n)
	perm := rng.Perm(int(n) + 1)
	g := make([]int64, nd)
	for k := range n {
		rem := k
		for i := nd - 1; i >= 0; i-- {
			g[i] = rem % grid[i]
			rem /= grid[i]
		}
		switch r := rng.IntN(8); {
		case r < 2: // unmapped: fill
		case r == 2:
			f.slab[k], f.offs[k] = 2, int64(rng.IntN(int(n)))*c.chunks[0]
			require.NoError(t, arr.setChunk(g, 2, f.offs[k]))
		case r == 3: // shared slot, like deduplicated chunks
			f.slab[k], f.offs[k] = chunkplan.BaseSlab, int64(rng.IntN(int(n)+1))*c.chunks[0]
			require.NoError(t, arr.MapBase(g, f.offs[k]))
		default:
			f.slab[k], f.offs[k] = chunkplan.BaseSlab, int64(perm[k])*c.chunks[0]
			require.NoError(t, arr.MapBase(g, f.offs[k]))
		}
		s, o := arr.Slab(g)
		require.Equal(t, f.slab[k], s)
		require.Equal(t, f.offs[k], o)
	}
	return f
}

func (f *fixture) size() int64 { return prod(f.shape) * int64(f.itemSize) }

// ref computes stream byte b naively, and which chunk (flat index) holds it.
func (f *fixture) ref(b int64) (byte, int64) {
	is := int64(f.itemSize)
	e, j := b/is, b%is
	nd := len(f.shape)
	var chunk, in int64
	coord := make([]int64, nd)
	for i := nd - 1; i >= 0; i-- {
		coord[i] = e % f.shape[i]
		e /= f.shape[i]
	}
	for i := range nd {
		grid := (f.shape[i] + f.chunks[i] - 1) / f.chunks[i]
		chunk = chunk*grid + coord[i]/f.chunks[i]
		in = in*f.chunks[i] + coord[i]%f.chunks[i]
	}
	rowBytes := prod(f.chunks[1:]) * is
	switch f.slab[chunk] {
	case chunkplan.FullSlab:
		return f.fill[j], chunk
	case chunkplan.BaseSlab:
		return f.raw[f.offs[chunk]*rowBytes+in*is+j], chunk
	default:
		return f.staged[f.offs[chunk]*rowBytes+in*is+j], chunk
	}
}

// check reads [off, off+n) and compares with the reference, and checks the
// plan invariants and chunk loads.
func (f *fixture) check(t testing.TB, off, n int64) {
	size := f.size()
	want := max(0, min(n, size-off))
	p := make([]byte, n)
	for i := range p {
		p[i] = 0xAA
	}
	clear(f.src.calls)
	got, err := f.arr.ReadAt(p, off, f.src)
	require.NoError(t, err)
	require.Equal(t, int(want), got, "bytes read")

	needed := map[int64]bool{}
	for b := range want {
		exp, chunk := f.ref(off + b)
		if p[b] != exp {
			require.Equalf(t, exp, p[b], "byte %d (stream %d) of read [%d,+%d) shape %v chunks %v is %d",
				b, off+b, off, n, f.shape, f.chunks, f.itemSize)
		}
		if f.slab[chunk] == chunkplan.BaseSlab {
			needed[f.offs[chunk]] = true
		}
	}
	for b := want; b < n; b++ {
		require.Equal(t, byte(0xAA), p[b], "byte beyond the end written")
	}
	loaded := map[int64]bool{}
	for o, c := range f.src.calls {
		require.Equal(t, 1, c, "base offset %d loaded %d times", o, c)
		loaded[o] = true
	}
	require.Equal(t, needed, loaded, "loaded chunks")

	plan, err := f.arr.GetItemPlan(off, n)
	require.NoError(t, err)
	f.checkPlan(t, plan, want)
}

func (f *fixture) checkPlan(t testing.TB, plan *chunkplan.GetItemPlan, want int64) {
	nd := len(f.shape)
	is := int64(f.itemSize)
	require.Equal(t, want, plan.N)
	require.LessOrEqual(t, len(plan.Hyperslabs), 2*nd+1)
	// Hyperslabs tile the output in order.
	var next int64
	for _, h := range plan.Hyperslabs {
		elems := prod(h.Count)
		require.Positive(t, elems)
		if elems > 1 {
			require.Equal(t, 0, h.ByteLo)
			require.Equal(t, f.itemSize, h.ByteHi)
		}
		require.Equal(t, next, h.DstOff+int64(h.ByteLo), "hyperslab %+v", h)
		next = h.DstOff + (elems-1)*is + int64(h.ByteHi)
	}
	require.Equal(t, want, next)
	// Transfers cover the same bytes and are grouped by slab and offset.
	var total int64
	for i, tr := range plan.Transfers {
		total += (prod(tr.Count)-1)*is + int64(tr.ByteHi-tr.ByteLo)
		if i > 0 {
			prev := plan.Transfers[i-1]
			require.True(t, prev.Slab < tr.Slab || prev.Slab == tr.Slab && prev.SlabOffset <= tr.SlabOffset)
		}
	}
	require.Equal(t, want, total)
}

func TestReadAtMatchesReference(t *testing.T) {
	for ci, c := range configs {
		t.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(t *testing.T) {
			for seed := range uint64(3) {
				f := newFixture(t, c, seed*100+uint64(ci))
				size := f.size()
				ranges := [][2]int64{
					{0, size}, {0, size + 10}, {0, 1}, {0, 0}, {size, 5}, {size + 3, 7},
				}
				if size > 0 {
					ranges = append(ranges, [2]int64{size - 1, 1}, [2]int64{size - 1, 4097}, [2]int64{1, size - 2})
				}
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				for range 200 {
					off := rng.Int64N(size + 5)
					lengths := []int64{1, 2, 3, 7, int64(c.itemSize), 4097, rng.Int64N(size + 2)}
					ranges = append(ranges, [2]int64{off, lengths[rng.IntN(len(lengths))]})
				}
				for _, r := range ranges {
					f.check(t, r[0], r[1])
				}
			}
		})
	}
}

func TestExhaustiveSmall(t *testing.T) {
	// Every byte range of a few small arrays.
	for ci, c := range []config{
		{[]int64{5, 7}, []int64{2, 3}, 3},
		{[]int64{3, 2, 4}, []int64{2, 2, 3}, 2},
		{[]int64{2, 2, 2, 3}, []int64{1, 2, 2, 2}, 1},
	} {
		f := newFixture(t, c, uint64(ci))
		size := f.size()
		for off := int64(0); off <= size; off++ {
			for n := int64(0); off+n <= size+1; n++ {
				f.check(t, off, n)
			}
		}
	}
}

func TestAllFillAndNilSource(t *testing.T) {
	a, err := New([]int64{4, 5}, []int64{3, 2}, 3, []byte{1, 2, 3})
	require.NoError(t, err)
	p := make([]byte, 10)
	n, err := a.ReadAt(p, 4, nil)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	require.Equal(t, []byte{2, 3, 1, 2, 3, 1, 2, 3, 1, 2}, p)

	require.NoError(t, a.MapBase([]int64{0, 0}, 0))
	_, err = a.ReadAt(p, 0, nil)
	require.ErrorContains(t, err, "no chunk source")
}

func TestZeroSize(t *testing.T) {
	a, err := New([]int64{3, 0, 2}, []int64{2, 2, 2}, 4, make([]byte, 4))
	require.NoError(t, err)
	require.Equal(t, int64(0), a.Size())
	require.Equal(t, int64(0), a.NumChunks())
	plan, err := a.GetItemPlan(0, 100)
	require.NoError(t, err)
	require.Empty(t, plan.Hyperslabs)
	require.Empty(t, plan.Transfers)
	n, err := a.ReadAt(make([]byte, 8), 0, nil)
	require.NoError(t, err)
	require.Equal(t, 0, n)
}

type errSource struct{}

func (errSource) Chunk(int64) ([]byte, error) { return nil, errors.New("disk on fire") }

func TestErrors(t *testing.T) {
	fill := []byte{0}
	for _, tc := range []struct {
		name          string
		shape, chunks []int64
		itemSize      int
		fill          []byte
		msg           string
	}{
		{"no axes", nil, nil, 1, fill, "at least one axis"},
		{"axes mismatch", []int64{4}, []int64{2, 2}, 1, fill, "axes"},
		{"zero chunk", []int64{4}, []int64{0}, 1, fill, "positive"},
		{"negative shape", []int64{-1}, []int64{1}, 1, fill, "negative"},
		{"zero item", []int64{4}, []int64{2}, 0, nil, "item size"},
		{"fill size", []int64{4}, []int64{2}, 2, fill, "fill value"},
		{"overflow", []int64{1 << 40, 1 << 40}, []int64{1 << 40, 1 << 40}, 1, fill, "overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.shape, tc.chunks, tc.itemSize, tc.fill)
			require.ErrorContains(t, err, tc.msg)
			require.ErrorContains(t, err, "staged:")
		})
	}

	a, err := New([]int64{4, 5}, []int64{2, 2}, 1, fill)
	require.NoError(t, err)
	require.ErrorContains(t, a.MapBase([]int64{2, 0}, 0), "out of range")
	require.ErrorContains(t, a.MapBase([]int64{0}, 0), "axes")
	require.ErrorContains(t, a.MapBase([]int64{0, 0}, -2), "invalid offset")
	s, o := a.Slab([]int64{0, 3})
	require.Equal(t, int32(-1), s)
	require.Equal(t, int64(-1), o)
	_, err = a.GetItemPlan(-1, 3)
	require.Error(t, err)
	_, err = a.ReadAt(make([]byte, 1), -1, nil)
	require.Error(t, err)

	require.NoError(t, a.MapBase([]int64{1, 1}, 4))
	_, err = a.ReadAt(make([]byte, 20), 0, errSource{})
	require.ErrorContains(t, err, "disk on fire")
	require.ErrorContains(t, err, "base offset 4")
	// Reads that avoid the base chunk never touch the source.
	_, err = a.ReadAt(make([]byte, 5), 0, errSource{})
	require.NoError(t, err)
}

func TestAccessors(t *testing.T) {
	a, err := New([]int64{5, 7}, []int64{2, 3}, 8, make([]byte, 8))
	require.NoError(t, err)
	require.Equal(t, []int64{5, 7}, a.Shape())
	require.Equal(t, []int64{2, 3}, a.Chunks())
	require.Equal(t, 8, a.ItemSize())
	require.Equal(t, int64(5*7*8), a.Size())
	require.Equal(t, 2*3*8, a.ChunkBytes())
	require.Equal(t, int64(9), a.NumChunks())
	a.Shape()[0] = 99
	require.Equal(t, []int64{5, 7}, a.Shape(), "Shape returns a copy")
	s, o := a.Slab([]int64{2, 2})
	require.Equal(t, int32(chunkplan.FullSlab), s)
	require.Equal(t, int64(0), o)
}

func FuzzReadAt(f *testing.F) {
	f.Add(uint8(0), uint16(0), uint16(100))
	f.Add(uint8(4), uint16(13), uint16(4097))
	f.Add(uint8(12), uint16(1001), uint16(7))
	fixtures := make([]*fixture, len(configs))
	f.Fuzz(func(t *testing.T, cfg uint8, off, n uint16) {
		i := int(cfg) % len(configs)
		if fixtures[i] == nil {
			fixtures[i] = newFixture(t, configs[i], uint64(i))
		}
		fixtures[i].check(t, int64(off)%(fixtures[i].size()+8), int64(n))
	})
}

// TestRuns: where every chunk is one run of the stream, Runs gives one run per chunk a
// range touches, in order, whose bytes (from the chunk's slab) are the reference's; on
// other layouts it declines.
func TestRuns(t *testing.T) {
	for ci, c := range []config{
		{[]int64{10}, []int64{3}, 1},
		{[]int64{5}, []int64{8}, 3},
		{[]int64{0}, []int64{4}, 8},
		{[]int64{17}, []int64{4}, 8},
		{[]int64{4, 4}, []int64{4, 4}, 3},
		{[]int64{9, 5}, []int64{4, 5}, 3},
		{[]int64{7, 2, 3}, []int64{3, 2, 3}, 2},
		{[]int64{5, 7}, []int64{2, 3}, 8},   // declined: chunks narrower than the array
		{[]int64{6, 5}, []int64{10, 10}, 1}, // declined: chunks wider than the array
	} {
		t.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(t *testing.T) {
			f := newFixture(t, c, uint64(ci))
			size := f.size()
			rowBytes := prod(f.chunks[1:]) * int64(f.itemSize)
			cb := int64(f.src.chunkBytes)
			rng := rand.New(rand.NewPCG(uint64(ci), 3))
			for range 300 {
				off, n := rng.Int64N(size+3), rng.Int64N(size+3)
				runs, ok := f.arr.Runs(off, n)
				if !slices.Equal(c.shape[1:], c.chunks[1:]) {
					require.False(t, ok)
					return
				}
				require.True(t, ok)
				want := max(0, min(n, size-off))
				var next int64
				for i, r := range runs {
					require.Equal(t, next, r.DstOff, "run %d", i)
					require.Positive(t, r.N)
					require.LessOrEqual(t, r.ChunkOff+r.N, cb, "run %d inside its chunk", i)
					if i > 0 {
						require.Zero(t, r.ChunkOff, "run %d starts its chunk", i)
					}
					for b := range r.N {
						var got byte
						switch r.Slab {
						case chunkplan.FullSlab:
							got = f.fill[(r.ChunkOff+b)%int64(f.itemSize)]
						case chunkplan.BaseSlab:
							got = f.raw[r.SlabOffset*rowBytes+r.ChunkOff+b]
						default:
							got = f.staged[r.SlabOffset*rowBytes+r.ChunkOff+b]
						}
						exp, _ := f.ref(off + r.DstOff + b)
						require.Equal(t, exp, got, "byte %d of [%d,+%d)", r.DstOff+b, off, n)
					}
					next += r.N
				}
				require.Equal(t, want, next, "the runs cover [%d,+%d)", off, n)
			}
		})
	}
}
