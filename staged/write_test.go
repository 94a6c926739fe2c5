package staged

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// model is the naive reference: the whole array as one C-order byte slice.
type model struct {
	shape    []int64
	itemSize int
	fill     []byte
	data     []byte
}

func (m *model) write(p []byte, off int64) {
	for i, b := range p { // byte by byte, on purpose
		m.data[off+int64(i)] = b
	}
}

// coords returns the coordinates of element e for shape.
func coords(shape []int64, e int64) []int64 {
	c := make([]int64, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		c[i] = e % shape[i]
		e /= shape[i]
	}
	return c
}

func linearIn(shape, c []int64) (int64, bool) {
	var k int64
	for i, x := range c {
		if x >= shape[i] {
			return 0, false
		}
		k = k*shape[i] + x
	}
	return k, true
}

// resize reshapes with the fill value: elements keep their coordinates.
func (m *model) resize(shape []int64) {
	is := int64(m.itemSize)
	n := prod(shape)
	data := make([]byte, n*is)
	for e := range n {
		dst := data[e*is : (e+1)*is]
		if old, ok := linearIn(m.shape, coords(shape, e)); ok {
			copy(dst, m.data[old*is:(old+1)*is])
		} else {
			copy(dst, m.fill)
		}
	}
	m.shape, m.data = slices.Clone(shape), data
}

// chunk returns chunk g as a full-shape buffer with fill outside the array.
func (m *model) chunk(g, chunks []int64) []byte {
	is := int64(m.itemSize)
	n := prod(chunks)
	out := make([]byte, 0, n*is)
	for e := range n {
		c := coords(chunks, e)
		for i := range c {
			c[i] += g[i] * chunks[i]
		}
		if k, ok := linearIn(m.shape, c); ok {
			out = append(out, m.data[k*is:(k+1)*is]...)
		} else {
			out = append(out, m.fill...)
		}
	}
	return out
}

// newWriteFixture builds an array whose chunks lie on the full slab or on
// the base slab (shuffled, sometimes shared slots; raw_data padding is
// garbage), and the model of its contents.
func newWriteFixture(t testing.TB, c config, seed uint64) (*Array, *fakeSource, *model) {
	rng := rand.New(rand.NewPCG(seed, 11))
	fill := make([]byte, c.itemSize)
	for i := range fill {
		fill[i] = byte(0xF0 + i)
	}
	a, err := New(c.shape, c.chunks, c.itemSize, fill)
	require.NoError(t, err)
	nd := len(c.shape)
	grid := make([]int64, nd)
	for i := range nd {
		grid[i] = (c.shape[i] + c.chunks[i] - 1) / c.chunks[i]
	}
	n := prod(grid)
	cb := int(prod(c.chunks)) * c.itemSize
	raw := make([]byte, int(n+1)*cb)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	src := &fakeSource{raw: raw, chunkBytes: cb, rows: c.chunks[0], calls: map[int64]int{}}
	perm := rng.Perm(int(n) + 1)
	for k := range n {
		g := coords(grid, k)
		switch r := rng.IntN(6); {
		case r < 2: // fill
		case r == 2:
			require.NoError(t, a.MapBase(g, int64(rng.IntN(int(n)+1))*c.chunks[0]))
		default:
			require.NoError(t, a.MapBase(g, int64(perm[k])*c.chunks[0]))
		}
	}
	m := &model{shape: slices.Clone(c.shape), itemSize: c.itemSize, fill: fill}
	is := int64(c.itemSize)
	rowBytes := prod(c.chunks[1:]) * is
	total := prod(c.shape)
	m.data = make([]byte, 0, total*is)
	for e := range total {
		co := coords(c.shape, e)
		var in int64
		for i := range nd {
			in = in*c.chunks[i] + co[i]%c.chunks[i]
			co[i] /= c.chunks[i]
		}
		slab, off := a.Slab(co)
		if slab == chunkplan.FullSlab {
			m.data = append(m.data, fill...)
		} else {
			m.data = append(m.data, raw[off*rowBytes+in*is:off*rowBytes+(in+1)*is]...)
		}
	}
	return a, src, m
}

func randBytes(rng *rand.Rand, n int64) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// stagedChunks is a.StagedChunks(), which must not fail.
func stagedChunks(t *testing.T, a *Array) []StagedChunk {
	t.Helper()
	sc, err := a.StagedChunks()
	require.NoError(t, err)
	return sc
}

// checkRead compares the whole array, read as a reader does, with the model.
func checkRead(t *testing.T, a *Array, src *fakeSource, m *model, what string) {
	t.Helper()
	require.Equal(t, m.shape, a.Shape(), what)
	require.Equal(t, int64(len(m.data)), a.Size(), what)
	got := make([]byte, len(m.data)+3)
	n, err := a.ReadAt(got, 0, src)
	require.NoError(t, err, what)
	require.Equal(t, len(m.data), n, what)
	if !bytes.Equal(m.data, got[:n]) {
		require.Equal(t, m.data, got[:n], "%s: contents", what)
	}
	holed := 0
	for i, s := range a.slabs {
		places := 0
		for _, in := range []bool{s.buf != nil, s.spillOff != 0, s.sunk != 0} {
			if in {
				places++
			}
		}
		require.LessOrEqual(t, places, 1, "%s: slab %d is in memory, spilled or sunk, not several", what, i)
		if s.holes != nil {
			holed++
			require.NotNil(t, s.buf, "%s: a chunk with holes is in memory", what)
		}
		if i < 2 {
			require.Zero(t, places, "%s: the full and base slabs have no staged state", what)
			require.Nil(t, s.holes, what)
			require.Nil(t, s.job, what)
		}
	}
	require.Equal(t, holed, a.nHoles, "%s: slabs with holes", what)
}

// checkArray compares the whole array, every chunk's placement and the
// staged chunks with the model.
func checkArray(t *testing.T, a *Array, src *fakeSource, m *model, what string) {
	t.Helper()
	checkRead(t, a, src, m, what)
	var staged [][]int64
	require.NoError(t, a.Each(func(g []int64, slab int32, off int64) error {
		s, o := a.Slab(g)
		require.Equal(t, s, slab)
		require.Equal(t, o, off)
		if slab >= 2 {
			staged = append(staged, slices.Clone(g))
		}
		return nil
	}))
	sc := stagedChunks(t, a)
	require.Len(t, sc, len(staged), what)
	digests := 0
	defer func() { digestsSeen += digests }()
	for i, c := range sc {
		require.Equal(t, staged[i], c.Grid, what)
		data, err := a.StagedData(c, nil)
		require.NoError(t, err, what)
		require.Len(t, data, a.ChunkBytes())
		if c.Digest != nil {
			digests++
			require.Equal(t, cornerDigest(data, a.Chunks(), a.Trimmed(c.Grid), a.ItemSize()), *c.Digest,
				"%s: digest made at write time of chunk %v", what, c.Grid)
		}
		if c.Encoded != nil {
			encodedSeen++
			require.Equal(t, a.Trimmed(c.Grid), a.Chunks(), "%s: only whole chunks are encoded", what)
			require.Equal(t, testEncode(data), c.Encoded, "%s: encoding made at write time of chunk %v", what, c.Grid)
		}
		if want := m.chunk(c.Grid, a.Chunks()); !bytes.Equal(want, data) {
			require.Equal(t, want, data, "%s: staged chunk %v (trimmed %v)", what, c.Grid, a.Trimmed(c.Grid))
		}
	}
	// One live staged slab per staged chunk: dropped chunks free memory (and spill slots).
	live, inMemory := 0, 0
	for i, s := range a.slabs[2:] {
		if s.buf != nil {
			inMemory++
			require.Len(t, s.buf, a.ChunkBytes(), "staged slabs hold one chunk")
		}
		if !a.gone(int32(i + 2)) {
			live++
		}
	}
	require.Equal(t, len(staged), live, "%s: live staged slabs", what)
	require.Equal(t, int64(len(staged)), a.nStaged)
	if st := a.Store(); st != nil {
		var enc int64 // encodings made at write time, still held
		for _, s := range a.slabs {
			if j := s.job; j != nil {
				<-j.done
				enc += int64(len(j.encoded))
			}
		}
		require.Equal(t, enc, st.encoded.Load(), "%s: encoded bytes", what)
		require.Equal(t, int64(inMemory*a.ChunkBytes())+enc, st.Resident(), "%s: resident bytes", what)
		st.mu.Lock()
		used := st.used
		st.mu.Unlock()
		require.Equal(t, int64(live-inMemory), used, "%s: spill slots in use", what)
	}
}

// flat is the flat index of grid index g of a.
func flat(a *Array, g []int64) int64 {
	k, ok := a.Layout().Flat(g)
	if !ok {
		panic(fmt.Sprintf("no chunk %v", g))
	}
	return k
}

// wantActions classifies the chunks a write of [off, off+n) touches, naively:
// the range is contiguous, so a chunk is wholly covered iff the first byte
// of its first element and the last byte of its last element are inside.
func wantActions(a *Array, off, n int64) map[string]chunkplan.WriteAction {
	out := map[string]chunkplan.WriteAction{}
	is := int64(a.ItemSize())
	_ = a.Each(func(g []int64, slab int32, _ int64) error {
		l := a.Trimmed(g)
		first, last := int64(-1), int64(-1)
		touched := false
		for e := range prod(l) {
			c := coords(l, e)
			for i := range c {
				c[i] += g[i] * a.Layout().Chunks()[i]
			}
			k, _ := linearIn(a.Layout().Shape(), c)
			if first < 0 {
				first = k
			}
			last = k
			if k*is < off+n && (k+1)*is > off {
				touched = true
			}
		}
		if !touched {
			return nil
		}
		switch {
		case slab >= 2:
			out[fmt.Sprint(g)] = chunkplan.UpdateInPlace
		case first*is >= off && (last+1)*is <= off+n:
			out[fmt.Sprint(g)] = chunkplan.NewChunk
		default:
			out[fmt.Sprint(g)] = chunkplan.CopyChunk
		}
		return nil
	})
	return out
}

func randomShape(rng *rand.Rand, shape, chunks []int64) []int64 {
	s := slices.Clone(shape)
	for i := range s {
		if i > 0 && rng.IntN(3) != 0 {
			continue
		}
		switch rng.IntN(4) {
		case 0:
			s[i] = rng.Int64N(s[i] + 1) // shrink
		case 1:
			s[i] += 1 + rng.Int64N(chunks[i]+2) // grow
		case 2:
			s[i] = rng.Int64N(2*chunks[i] + 6)
		default:
			if s[i] > 0 {
				s[i]--
			} else {
				s[i]++
			}
		}
		s[i] = min(s[i], 14)
	}
	return s
}

// storeBudgets are the ways the model tests keep staged chunks: plain memory (nil), a
// store that spills everything, and one that keeps two chunks in memory.
var storeBudgets = []struct {
	name   string
	chunks int64 // budget in chunks; -1: no store
}{{"memory", -1}, {"spill-all", 0}, {"budget-2", 2}}

func TestWriteResizeMatchesModel(t *testing.T) {
	for _, sb := range storeBudgets {
		t.Run(sb.name, func(t *testing.T) { testWriteResizeMatchesModel(t, sb.chunks) })
	}
	require.Positive(t, digestsSeen, "write-time digests were made and checked")
	require.Positive(t, encodedSeen, "write-time encodings were made and checked")
}

func testWriteResizeMatchesModel(t *testing.T, budget int64) {
	for ci, c := range configs {
		t.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(t *testing.T) {
			for seed := range uint64(4) {
				a, src, m := newWriteFixture(t, c, seed*131+uint64(ci))
				if budget >= 0 {
					st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), budget*int64(a.ChunkBytes()))
					st.SetDigester(cornerDigest)
					t.Cleanup(func() { st.Close() })
					a.UseStore(st)
					a.SetEncoder(testEncode)
				}
				rng := rand.New(rand.NewPCG(seed, uint64(ci)+99))
				checkArray(t, a, src, m, "initial")
				for step := range 60 {
					size := a.Size()
					var what string
					switch op := rng.IntN(10); {
					case op < 6 && size > 0:
						off := rng.Int64N(size)
						lengths := []int64{1, 2, 3, int64(c.itemSize), int64(a.ChunkBytes()), rng.Int64N(size-off) + 1}
						n := min(lengths[rng.IntN(len(lengths))], size-off)
						if op == 0 { // whole array: every chunk wholly covered
							off, n = 0, size
						}
						what = fmt.Sprintf("step %d: write [%d, +%d) shape %v", step, off, n, a.Shape())
						want := wantActions(a, off, n)
						plan, err := a.SetItemPlan(off, n)
						require.NoError(t, err)
						got := map[string]chunkplan.WriteAction{}
						baseCopies := 0
						for _, ch := range plan.Chunks {
							got[fmt.Sprint(ch.Chunk)] = ch.Action
							if ch.Action == chunkplan.CopyChunk && ch.Slab == chunkplan.BaseSlab {
								baseCopies++
							}
						}
						require.Equal(t, want, got, what)
						before := map[string][2]int64{}
						require.NoError(t, a.Each(func(g []int64, s int32, o int64) error {
							before[fmt.Sprint(g)] = [2]int64{int64(s), o}
							return nil
						}))

						p := randBytes(rng, n)
						clear(src.calls)
						holed := 0
						for _, s := range a.slabs {
							if s.holes != nil {
								holed++
							}
						}
						w, err := a.WriteAt(p, off, src)
						require.NoError(t, err, what)
						require.Equal(t, int(n), w)
						m.write(p, off)
						calls := 0
						for _, n := range src.calls {
							calls += n
						}
						// A write reads no base chunk: a partially covered one records the bytes
						// written. Only chunks with holes that a store evicts are read, to
						// complete them.
						if budget < 0 {
							require.Zero(t, calls, "%s: %d partially covered base chunks: no base chunk is read", what, baseCopies)
						} else {
							require.LessOrEqual(t, calls, holed, "%s: base chunks read to complete evicted chunks", what)
						}
						for _, ch := range plan.Chunks {
							s, o := a.Slab(ch.Chunk)
							require.GreaterOrEqual(t, s, int32(2), what)
							if ch.Action == chunkplan.UpdateInPlace {
								require.Equal(t, before[fmt.Sprint(ch.Chunk)], [2]int64{int64(s), o}, "%s: in place", what)
							}
						}
					default:
						shape := randomShape(rng, a.Shape(), c.chunks)
						what = fmt.Sprintf("step %d: resize %v -> %v", step, a.Shape(), shape)
						require.NoError(t, a.Resize(shape, src), what)
						m.resize(shape)
					}
					// Listing the staged chunks completes them: every fourth step, so that
					// chunks with holes meet later writes, resizes and evictions.
					if step%4 == 3 {
						checkArray(t, a, src, m, what)
					} else {
						checkRead(t, a, src, m, what)
					}
					require.Equal(t, a.nStaged > 0 || a.dropped || !slices.Equal(a.Shape(), c.shape), a.Dirty())
				}
			}
		})
	}
}

// TestSetItemPlanCases checks the three SetItemPlan cases by counting chunk
// source loads: shape (6, 4), chunks (2, 4), item size 2, so each chunk is
// 16 contiguous bytes of the stream.
func TestSetItemPlanCases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pre     [][2]int64 // writes done first (off, n)
		off, n  int64
		actions []chunkplan.WriteAction // of the chunks touched, in grid order
		loads   int                     // base chunks read to complete the staged chunks (none at the write)
	}{
		{"base wholly covered", nil, 0, 16, []chunkplan.WriteAction{chunkplan.NewChunk}, 0},
		{"base partially covered", nil, 16, 4, []chunkplan.WriteAction{chunkplan.CopyChunk}, 1},
		{"base partial element", nil, 17, 1, []chunkplan.WriteAction{chunkplan.CopyChunk}, 1},
		{"full wholly covered", nil, 32, 16, []chunkplan.WriteAction{chunkplan.NewChunk}, 0},
		{"full partially covered", nil, 33, 7, []chunkplan.WriteAction{chunkplan.CopyChunk}, 0},
		{"staged in place", [][2]int64{{0, 3}}, 4, 8, []chunkplan.WriteAction{chunkplan.UpdateInPlace}, 1},
		{"base completed by writes", [][2]int64{{0, 3}, {9, 7}}, 3, 6, []chunkplan.WriteAction{chunkplan.UpdateInPlace}, 0},
		{"split element across chunks", nil, 15, 2, []chunkplan.WriteAction{chunkplan.CopyChunk, chunkplan.CopyChunk}, 2},
		{"mixed", [][2]int64{{20, 1}}, 8, 40, []chunkplan.WriteAction{chunkplan.CopyChunk, chunkplan.UpdateInPlace, chunkplan.NewChunk}, 1},
		{"all wholly covered", nil, 0, 48, []chunkplan.WriteAction{chunkplan.NewChunk, chunkplan.NewChunk, chunkplan.NewChunk}, 0},
		{"empty", nil, 48, 0, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fill := []byte{7, 9}
			a, err := New([]int64{6, 4}, []int64{2, 4}, 2, fill)
			require.NoError(t, err)
			raw := make([]byte, 3*16)
			for i := range raw {
				raw[i] = byte(100 + i)
			}
			src := &fakeSource{raw: raw, chunkBytes: 16, rows: 2, calls: map[int64]int{}}
			require.NoError(t, a.MapBase([]int64{0, 0}, 2)) // slot 1
			require.NoError(t, a.MapBase([]int64{1, 0}, 0)) // slot 0
			m := &model{shape: []int64{6, 4}, itemSize: 2, fill: fill}
			m.data = append(append(append([]byte(nil), raw[16:32]...), raw[:16]...), bytes.Repeat(fill, 8)...)
			rng := rand.New(rand.NewPCG(1, 2))
			for _, w := range tc.pre {
				p := randBytes(rng, w[1])
				_, err := a.WriteAt(p, w[0], src)
				require.NoError(t, err)
				m.write(p, w[0])
			}
			plan, err := a.SetItemPlan(tc.off, tc.n)
			require.NoError(t, err)
			var actions []chunkplan.WriteAction
			for _, c := range plan.Chunks {
				actions = append(actions, c.Action)
			}
			require.Equal(t, tc.actions, actions, plan.String())

			clear(src.calls)
			p := randBytes(rng, tc.n)
			n, err := a.WriteAt(p, tc.off, src)
			require.NoError(t, err)
			require.Equal(t, int(tc.n), n)
			m.write(p, tc.off)
			require.Empty(t, src.calls, "the write reads no base chunk")
			stagedChunks(t, a)
			loads := 0
			for _, c := range src.calls {
				loads += c
			}
			require.Equal(t, tc.loads, loads, "base chunks read to complete the staged chunks")
			checkArray(t, a, src, m, tc.name)
		})
	}
}

// A wholly covered write never asks the source: even a failing one.
func TestWhollyCoveredNeverReadsBase(t *testing.T) {
	a, err := New([]int64{8}, []int64{4}, 1, []byte{0})
	require.NoError(t, err)
	require.NoError(t, a.MapBase([]int64{0}, 0))
	require.NoError(t, a.MapBase([]int64{1}, 4))
	n, err := a.WriteAt([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 0, errSource{})
	require.NoError(t, err)
	require.Equal(t, 8, n)
	got := make([]byte, 8)
	_, err = a.ReadAt(got, 0, errSource{})
	require.NoError(t, err)
	require.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, got)
}

func TestSetItemPlanString(t *testing.T) {
	a, err := New([]int64{5, 7}, []int64{2, 3}, 8, make([]byte, 8))
	require.NoError(t, err)
	require.NoError(t, a.MapBase([]int64{0, 0}, 4))
	_, err = a.WriteAt(make([]byte, 8), 8*8, nil) // element (1, 1): chunk (0, 0) is on base, needs src
	require.ErrorContains(t, err, "no chunk source")
	_, err = a.WriteAt(make([]byte, 8), 7*8+3*8, nil) // element (1, 3): chunk (0, 1) on full
	require.NoError(t, err)
	plan, err := a.SetItemPlan(13, 119)
	require.NoError(t, err)
	s := plan.String()
	t.Log("\n" + s)
	for _, line := range []string{
		"SetItemPlan bytes [13, 132) of shape (5, 7) chunks (2, 3) itemsize 8\n",
		"# 5 hyperslabs\n",
		"value[0:1, 1:2].bytes[5:8]  # value byte 0\n",
		"# 1 chunks wholly covered on full/base slabs: new staged chunk, old chunk not read\n",
		"chunk (0, 2): slabs[0][0:2] (fill)\n",
		"# 2 chunks partially covered on full/base slabs: copy old chunk to a new staged chunk, then update\n",
		"chunk (1, 0): slabs[0][0:2] (fill)\n",
		"chunk (0, 0): slabs[1][4:6] (base)\n",
		"# 1 chunks already staged: update in place\n",
		"chunk (0, 1): slabs[2][0:2] (staged)\n",
		"chunk (0, 0)[0:1, 1:2].bytes[5:8] = value[0:1, 1:2].bytes[5:8]  # value byte 0\n",
		"chunk (1, 0)[0:1, 0:2] = value[2:3, 0:2]  # value byte 99\n",
	} {
		require.Contains(t, s, line)
	}
	// Transfers are grouped by chunk in grid order.
	for i := 1; i < len(plan.Transfers); i++ {
		require.LessOrEqual(t, flat(a, plan.Transfers[i-1].Chunk), flat(a, plan.Transfers[i].Chunk))
	}
	require.Equal(t, "in place", chunkplan.UpdateInPlace.String())
}

// TestEdgeGrowExposesFill: growing an edge chunk never exposes what lies in
// the slot beyond the old edge (raw_data padding, or staged data cut off by
// an earlier shrink).
func TestEdgeGrowExposesFill(t *testing.T) {
	for _, tc := range []struct {
		name          string
		shape, chunks []int64
		mapBase       [][]int64 // chunks mapped to consecutive slots
		writes        [][2]int64
		resizes       [][]int64
	}{
		{"1-D base edge", []int64{5}, []int64{4}, [][]int64{{0}, {1}}, nil, [][]int64{{8}}},
		{"1-D base edge grows past chunk", []int64{5}, []int64{4}, [][]int64{{1}}, nil, [][]int64{{11}}},
		{"1-D staged shrink then grow", []int64{8}, []int64{4}, nil, [][2]int64{{0, 8}}, [][]int64{{5}, {8}}},
		{"1-D staged shrink to chunk edge then grow", []int64{8}, []int64{4}, nil, [][2]int64{{0, 8}}, [][]int64{{4}, {8}}},
		{"2-D base grow axis 1", []int64{3, 5}, []int64{2, 4}, [][]int64{{0, 1}, {1, 1}}, nil, [][]int64{{3, 8}}},
		{"2-D base grow both axes", []int64{3, 5}, []int64{2, 4}, [][]int64{{1, 1}, {0, 0}}, nil, [][]int64{{4, 7}}},
		{"2-D staged shrink axis 1 grow axis 0", []int64{3, 8}, []int64{2, 4}, nil, [][2]int64{{0, 24}}, [][]int64{{3, 6}, {4, 8}}},
		{"3-D base", []int64{3, 3, 3}, []int64{2, 2, 2}, [][]int64{{1, 1, 1}}, nil, [][]int64{{4, 4, 4}}},
		{"shrink to zero and back", []int64{5}, []int64{4}, [][]int64{{1}}, [][2]int64{{0, 2}}, [][]int64{{0}, {8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fill := []byte{0xEE}
			a, err := New(tc.shape, tc.chunks, 1, fill)
			require.NoError(t, err)
			cb := a.ChunkBytes()
			raw := bytes.Repeat([]byte{0xBA}, cb*(len(tc.mapBase)+1)) // stale padding
			src := &fakeSource{raw: raw, chunkBytes: cb, rows: tc.chunks[0], calls: map[int64]int{}}
			m := &model{shape: slices.Clone(tc.shape), itemSize: 1, fill: fill,
				data: bytes.Repeat(fill, int(a.Size()))}
			for i, g := range tc.mapBase {
				require.NoError(t, a.MapBase(g, int64(i)*tc.chunks[0]))
			}
			m.data = make([]byte, a.Size())
			_, err = a.ReadAt(m.data, 0, src)
			require.NoError(t, err)
			for _, w := range tc.writes {
				p := bytes.Repeat([]byte{0x11}, int(w[1]))
				_, err := a.WriteAt(p, w[0], src)
				require.NoError(t, err)
				m.write(p, w[0])
			}
			for _, s := range tc.resizes {
				require.NoError(t, a.Resize(s, src))
				m.resize(s)
				checkArray(t, a, src, m, fmt.Sprint("resize ", s))
			}
			// The model never saw the stale 0xBA padding: checkArray proved
			// it did not leak. Double-check the simplest case by hand.
			if tc.name == "1-D base edge" {
				got := make([]byte, 8)
				_, err = a.ReadAt(got, 0, src)
				require.NoError(t, err)
				require.Equal(t, []byte{0xBA, 0xBA, 0xBA, 0xBA, 0xBA, 0xEE, 0xEE, 0xEE}, got)
			}
		})
	}
}

func TestEdgeGrowMaterialises(t *testing.T) {
	a, err := New([]int64{3, 5}, []int64{2, 4}, 1, []byte{0})
	require.NoError(t, err)
	raw := make([]byte, 3*8)
	src := &fakeSource{raw: raw, chunkBytes: 8, rows: 2, calls: map[int64]int{}}
	require.NoError(t, a.MapBase([]int64{0, 0}, 0)) // interior after growth on axis 1 only
	require.NoError(t, a.MapBase([]int64{0, 1}, 2)) // edge on axis 1
	require.NoError(t, a.MapBase([]int64{1, 0}, 4)) // edge on axis 0

	// Shrinking keeps every chunk in place and reads nothing.
	require.NoError(t, a.Resize([]int64{3, 4}, nil))
	s, o := a.Slab([]int64{0, 0})
	require.Equal(t, [2]int64{chunkplan.BaseSlab, 0}, [2]int64{int64(s), o})
	require.Equal(t, int64(2), a.NumChunks())

	// Growing axis 1 again: (0, 1) is new (full slab); (0, 0) and (1, 0) were
	// untrimmed along axis 1 and stay on the base slab.
	require.NoError(t, a.Resize([]int64{3, 6}, nil))
	for _, g := range [][]int64{{0, 1}, {1, 1}} {
		s, _ := a.Slab(g)
		require.Equal(t, int32(chunkplan.FullSlab), s)
	}
	s, _ = a.Slab([]int64{1, 0})
	require.Equal(t, int32(chunkplan.BaseSlab), s)
	require.True(t, a.Dirty(), "shape changed")

	// Growing axis 0 materialises the base edge chunk (1, 0), needing src.
	require.ErrorContains(t, a.Resize([]int64{4, 6}, nil), "no chunk source")
	require.Equal(t, []int64{3, 6}, a.Shape(), "failed resize changes nothing")
	require.NoError(t, a.Resize([]int64{4, 6}, src))
	s, _ = a.Slab([]int64{1, 0})
	require.GreaterOrEqual(t, s, int32(2))
	require.Equal(t, 1, src.calls[4])
	require.Equal(t, []int64{2, 2}, a.Trimmed([]int64{1, 1}))
	require.Equal(t, []int64{2, 4}, a.Trimmed([]int64{0, 0}))
	require.Nil(t, a.Trimmed([]int64{2, 0}))
}

// TestCommitCycle simulates a commit: staged chunks go to new raw_data slots
// (or the full slab if equal to the fill chunk), then MarkClean.
func TestCommitCycle(t *testing.T) {
	c := config{[]int64{7, 5}, []int64{3, 2}, 2}
	a, src, m := newWriteFixture(t, c, 5)
	require.False(t, a.Dirty())
	rng := rand.New(rand.NewPCG(3, 4))
	for range 6 {
		off := rng.Int64N(a.Size())
		p := randBytes(rng, min(a.Size()-off, 9))
		_, err := a.WriteAt(p, off, src)
		require.NoError(t, err)
		m.write(p, off)
	}
	// A chunk written with the fill value maps back to the full slab.
	fillChunk := bytes.Repeat(m.fill, int(prod(c.chunks)))
	_, err := a.WriteAt(bytes.Repeat(m.fill, 5*3), 0, src) // rows 0..2: chunks (0, *) wholly
	require.NoError(t, err)
	m.write(bytes.Repeat(m.fill, 5*3), 0)
	require.NoError(t, a.Resize([]int64{8, 5}, src))
	m.resize([]int64{8, 5})
	require.True(t, a.Dirty())

	staged := stagedChunks(t, a)
	require.NotEmpty(t, staged)
	mappedFull := 0
	for _, sc := range staged {
		if bytes.Equal(sc.Data, fillChunk) {
			require.NoError(t, a.MapFull(sc.Grid))
			mappedFull++
			continue
		}
		slot := int64(len(src.raw) / src.chunkBytes)
		src.raw = append(src.raw, sc.Data...)
		require.NoError(t, a.MapBase(sc.Grid, slot*c.chunks[0]))
	}
	require.Positive(t, mappedFull)
	require.False(t, a.nStaged > 0)
	a.MarkClean()
	require.False(t, a.Dirty())
	require.Len(t, a.slabs, 2, "staged slabs dropped")
	require.Empty(t, stagedChunks(t, a))
	checkArray(t, a, src, m, "after commit")

	// A shape change makes it dirty again, even with no staged chunk.
	require.NoError(t, a.Resize([]int64{8, 6}, src))
	require.True(t, a.Dirty())
}

func TestMarkCleanKeepsReferenced(t *testing.T) {
	a, err := New([]int64{4}, []int64{2}, 1, []byte{0})
	require.NoError(t, err)
	_, err = a.WriteAt([]byte{1, 2, 3, 4}, 0, nil)
	require.NoError(t, err)
	require.NoError(t, a.MapFull([]int64{0}))
	a.MarkClean() // chunk 1 was not re-mapped: its slab must survive
	require.True(t, a.Dirty())
	got := make([]byte, 4)
	_, err = a.ReadAt(got, 0, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 3, 4}, got)
	// The freed slab index is reused by the next staged chunk.
	_, err = a.WriteAt([]byte{9}, 0, nil)
	require.NoError(t, err)
	require.Len(t, a.slabs, 4)
	s, _ := a.Slab([]int64{0})
	require.Equal(t, int32(2), s)
}

type countingErrSource struct{ n int }

func (c *countingErrSource) Chunk(off int64) ([]byte, error) {
	c.n++
	if c.n > 1 {
		return nil, errors.New("disk on fire")
	}
	return make([]byte, 4), nil
}

func TestWriteErrors(t *testing.T) {
	a, err := New([]int64{4, 5}, []int64{2, 2}, 1, []byte{0})
	require.NoError(t, err)
	for _, tc := range []struct {
		off int64
		n   int
		msg string
	}{
		{-1, 1, "invalid byte range"},
		{20, 1, "beyond the array size"},
		{19, 2, "beyond the array size"},
		{21, 0, "beyond the array size"},
	} {
		_, err := a.WriteAt(make([]byte, tc.n), tc.off, nil)
		require.ErrorContains(t, err, tc.msg)
		require.ErrorContains(t, err, "staged: write at")
		require.Equal(t, 1, strings.Count(err.Error(), "staged:"))
		_, err = a.SetItemPlan(tc.off, int64(tc.n))
		require.ErrorContains(t, err, "staged: set item plan")
	}
	_, err = a.SetItemPlan(0, -1)
	require.Error(t, err)
	n, err := a.WriteAt(nil, 20, nil)
	require.NoError(t, err)
	require.Zero(t, n)

	// Partially covered base chunks are completed from their source only when their other
	// bytes are needed: a source failing half way then fails the listing and the read,
	// and the written bytes stay staged until it works again.
	require.NoError(t, a.MapBase([]int64{0, 0}, 0))
	require.NoError(t, a.MapBase([]int64{0, 1}, 2))
	src := &countingErrSource{}
	_, err = a.WriteAt([]byte{1, 2}, 1, src) // partially covers (0, 0) and (0, 1)
	require.NoError(t, err)
	require.Zero(t, src.n, "the write reads no base chunk")
	_, err = a.StagedChunks()
	require.ErrorContains(t, err, "disk on fire")
	_, err = a.ReadAt(make([]byte, 5), 0, src)
	require.ErrorContains(t, err, "disk on fire")
	src.n = -100 // working again
	row := make([]byte, 5)
	_, err = a.ReadAt(row, 0, src)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 1, 2, 0, 0}, row)
	require.Len(t, stagedChunks(t, a), 2)
	a, err = New([]int64{4, 5}, []int64{2, 2}, 1, []byte{0})
	require.NoError(t, err)

	for _, tc := range []struct {
		shape []int64
		msg   string
	}{
		{[]int64{4}, "axes"},
		{[]int64{4, -1}, "negative"},
		{[]int64{1 << 62, 1 << 62}, "overflow"},
		{[]int64{1 << 20, 1 << 20}, "too many"},
	} {
		err := a.Resize(tc.shape, nil)
		require.ErrorContains(t, err, tc.msg)
		require.ErrorContains(t, err, "staged: resize")
	}
	require.Equal(t, []int64{4, 5}, a.Shape())
	require.ErrorContains(t, a.MapFull([]int64{9, 9}), "staged: map full")
	s, o := a.Slab([]int64{9, 9})
	require.Equal(t, [2]int64{-1, -1}, [2]int64{int64(s), o})
	require.ErrorContains(t, a.setChunk([]int64{0, 0}, 2, 0), "does not exist")
	sentinel := errors.New("stop")
	calls := 0
	require.ErrorIs(t, a.Each(func([]int64, int32, int64) error { calls++; return sentinel }), sentinel)
	require.Equal(t, 1, calls)
}

func TestSetChunkChecksStagedBounds(t *testing.T) {
	a, err := New([]int64{4}, []int64{2}, 1, []byte{0})
	require.NoError(t, err)
	s := a.appendSlab(make([]byte, 4))
	require.NoError(t, a.setChunk([]int64{1}, s, 2))
	require.ErrorContains(t, a.setChunk([]int64{0}, s, 3), "overruns")
	require.True(t, a.Dirty())
}

func FuzzWriteAt(f *testing.F) {
	f.Add(uint8(4), uint16(13), uint16(40), uint16(3))
	f.Add(uint8(9), uint16(0), uint16(4097), uint16(20))
	f.Fuzz(func(t *testing.T, cfg uint8, off, n, newLen uint16) {
		c := configs[int(cfg)%len(configs)]
		a, src, m := newWriteFixture(t, c, uint64(cfg))
		size := a.Size()
		if size > 0 {
			o := int64(off) % size
			p := bytes.Repeat([]byte{0x5A}, int(min(int64(n), size-o)))
			_, err := a.WriteAt(p, o, src)
			require.NoError(t, err)
			m.write(p, o)
		}
		shape := a.Shape()
		shape[0] = int64(newLen) % 16
		require.NoError(t, a.Resize(shape, src))
		m.resize(shape)
		checkArray(t, a, src, m, "fuzz")
	})
}

// digestsSeen counts the write-time digests checkArray compared (so that a test can tell
// they were made).
var digestsSeen int

// encodedSeen counts the write-time encodings checkArray compared.
var encodedSeen int

// testEncode stands for a filter pipeline: the chunk's SHA-256, a compressed form.
func testEncode(chunk []byte) []byte {
	d := sha256.Sum256(chunk)
	return d[:]
}

// cornerDigest is a Digester for the tests: SHA-256 of the trimmed corner, element by
// element (the slow, obvious way), then the extent.
func cornerDigest(chunk []byte, chunkShape, trimmed []int64, itemSize int) [32]byte {
	h := sha256.New()
	n := prod(trimmed)
	for e := range n {
		c := coords(trimmed, e)
		k, _ := linearIn(chunkShape, c)
		h.Write(chunk[k*int64(itemSize) : (k+1)*int64(itemSize)])
	}
	fmt.Fprint(h, trimmed)
	var d [32]byte
	h.Sum(d[:0])
	return d
}
