package staged

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkmap"
)

// resizeGeneral runs Resize's general path, which growAxis0 must agree with.
func resizeGeneral(a *Array, shape []int64, src chunkmap.ChunkSource) error {
	next, err := a.Layout().Reshape(shape)
	if err != nil {
		return err
	}
	return a.resize(&next, src)
}

// TestGrowAxis0MatchesGeneral: growing axis 0 through the fast path leaves exactly the
// state the general path leaves (chunk map, staged bytes, origins, staging order, dirtiness), on
// arrays with base, staged and fill chunks and trimmed edges.
func TestGrowAxis0MatchesGeneral(t *testing.T) {
	for ci, c := range configs {
		t.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(t *testing.T) {
			for seed := range uint64(4) {
				fast, src, m := newWriteFixture(t, c, seed*7+uint64(ci))
				slow, _, _ := newWriteFixture(t, c, seed*7+uint64(ci))
				rng := rand.New(rand.NewPCG(seed, uint64(ci)))
				for step := range 30 {
					if size := fast.Size(); size > 0 && rng.IntN(2) == 0 {
						off := rng.Int64N(size)
						p := randBytes(rng, min(size-off, 1+rng.Int64N(int64(2*fast.ChunkBytes()))))
						_, err := fast.WriteAt(p, off, src)
						require.NoError(t, err)
						_, err = slow.WriteAt(p, off, src)
						require.NoError(t, err)
						m.write(p, off)
						continue
					}
					shape := fast.Shape()
					shape[0] += rng.Int64N(c.chunks[0] + 2)
					what := fmt.Sprintf("step %d: grow %v -> %v", step, fast.Shape(), shape)
					require.NoError(t, fast.Resize(shape, src), what)
					require.NoError(t, resizeGeneral(slow, shape, src), what)
					m.resize(shape)
					require.Equal(t, slow.ChunkMap().Slabs, fast.ChunkMap().Slabs, what)
					require.Equal(t, slow.ChunkMap().Offsets, fast.ChunkMap().Offsets, what)
					require.Equal(t, slow.nStaged, fast.nStaged, what)
					require.Equal(t, slow.Dirty(), fast.Dirty(), what)
					fs, ss := stagedChunks(t, fast), stagedChunks(t, slow)
					require.Len(t, fs, len(ss), what)
					for i := range ss {
						require.Equal(t, ss[i].Grid, fs[i].Grid, what)
						require.Equal(t, ss[i].Data, fs[i].Data, what)
						require.Equal(t, ss[i].Origin, fs[i].Origin, what)
					}
					require.Equal(t, seqOrder(ss), seqOrder(fs), "%s: staging order", what)
					checkArray(t, fast, src, m, what)
				}
			}
		})
	}
}

// seqOrder is the grid order in which the chunks were staged.
func seqOrder(cs []StagedChunk) []string {
	cs = slices.Clone(cs)
	slices.SortStableFunc(cs, func(x, y StagedChunk) int { return int(x.Seq) - int(y.Seq) })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprint(c.Grid)
	}
	return out
}

// BenchmarkGrowingWrites is cp's pattern: a 1-D float64 array of 64 KiB chunks grown by
// 128 KiB writes past its end, from empty. Its time per MiB must not grow with the size of
// the array.
func BenchmarkGrowingWrites(b *testing.B) {
	const write = 128 << 10
	p := make([]byte, write)
	for _, mib := range []int64{64, 256} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			b.SetBytes(mib << 20)
			for b.Loop() {
				a, err := New([]int64{0}, []int64{8192}, 8, make([]byte, 8))
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < mib<<20; off += write {
					if err := a.Resize([]int64{(off + write) / 8}, nil); err != nil {
						b.Fatal(err)
					}
					if _, err := a.WriteAt(p, off, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
