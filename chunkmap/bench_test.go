package chunkmap

import (
	"fmt"
	"testing"
)

// chunkSource hands out one chunk for every offset, as a cache of decoded chunks does.
type chunkSource []byte

func (c chunkSource) Chunk(int64) ([]byte, error) { return c, nil }

// BenchmarkReadAt reads 1 MiB of a 2-D map whose chunks all lie on the base slab, through
// a source that costs nothing: the cost is the plan and the copies, one per row of a
// chunk (rows of 512 bytes, and of 4 bytes, the worst case).
func BenchmarkReadAt(b *testing.B) {
	for _, c := range []struct {
		shape, chunks []int64
		itemSize      int
	}{
		{[]int64{1024, 1024}, []int64{64, 64}, 8},
		{[]int64{1024, 1024}, []int64{64, 4}, 1},
	} {
		b.Run(fmt.Sprintf("%v/%v/is%d", c.shape, c.chunks, c.itemSize), func(b *testing.B) {
			m, err := New(c.shape, c.chunks, c.itemSize, make([]byte, c.itemSize))
			if err != nil {
				b.Fatal(err)
			}
			_ = m.Each(func(grid []int64, _ int32, _ int64) error {
				return m.MapBase(grid, grid[0]*c.chunks[0])
			})
			src := chunkSource(make([]byte, m.ChunkBytes()))
			p := make([]byte, 1<<20)
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := m.ReadAt(p, 12345, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMapBase maps every chunk of a grid of a million chunks, as loading a large
// version does.
func BenchmarkMapBase(b *testing.B) {
	m, err := New([]int64{1 << 20}, []int64{1}, 8, make([]byte, 8))
	if err != nil {
		b.Fatal(err)
	}
	g := make([]int64, 1)
	for b.Loop() {
		for k := range int64(1 << 20) {
			g[0] = k
			if err := m.MapBase(g, k); err != nil {
				b.Fatal(err)
			}
		}
	}
}
