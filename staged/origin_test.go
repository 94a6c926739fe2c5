package staged

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// TestOrigin: each staged chunk records the operation that staged it (the writes between
// two resizes are one), whether that operation's writes covered it whole (at once, or in
// pieces), and the slab and offset it came from.
func TestOrigin(t *testing.T) {
	// 1-D int64, chunks of 4 elements (32 bytes): chunks 0..2 on the base at slots 2, 0,
	// 1; the last chunk (elements 12..13) on the full slab.
	a, err := New([]int64{14}, []int64{4}, 8, make([]byte, 8))
	require.NoError(t, err)
	for g, off := range []int64{8, 0, 4} {
		require.NoError(t, a.MapBase([]int64{int64(g)}, off))
	}
	src := &fakeSource{raw: make([]byte, 3*32), chunkBytes: 32, rows: 4, calls: map[int64]int{}}
	write := func(off, n int64) {
		t.Helper()
		_, err := a.WriteAt(make([]byte, n), off, src)
		require.NoError(t, err)
	}
	origins := func() map[int64]Origin {
		t.Helper()
		cs, err := a.StagedChunks()
		require.NoError(t, err)
		out := map[int64]Origin{}
		for _, c := range cs {
			out[c.Grid[0]] = c.Origin
		}
		return out
	}
	write(8, 8)   // chunk 0 in part
	write(32, 32) // chunk 1 whole at once
	write(64, 16) // chunk 2 in two pieces...
	write(80, 16) // ...that cover it
	write(96, 8)  // the edge chunk 3 (2 elements) in part
	require.Equal(t, map[int64]Origin{
		0: {Op: 0, Slab: chunkplan.BaseSlab, Offset: 8},
		1: {Op: 0, Whole: true, Slab: chunkplan.BaseSlab, Offset: 0},
		2: {Op: 0, Whole: true, Slab: chunkplan.BaseSlab, Offset: 4},
		3: {Op: 0, Slab: chunkplan.FullSlab},
	}, origins())

	// A resize is an operation of its own, and the writes after it another: the edge chunk
	// completed now does not become whole, a chunk staged now is of the new operation.
	require.NoError(t, a.Resize([]int64{20}, src))
	write(104, 8)
	write(128, 32)
	got := origins()
	require.Equal(t, Origin{Op: 0, Slab: chunkplan.FullSlab}, got[3])
	require.Equal(t, Origin{Op: 2, Whole: true, Slab: chunkplan.FullSlab}, got[4])
}
