package chunkmap

import (
	"fmt"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// Loader returns the ChunkBytes() bytes of the chunk at grid, which lies on (slab, off)
// and not on the full slab; the caller only reads them. A map's own loader (ReadAt,
// ReadPlan) reads the base slab through a ChunkSource; a staged array's also reads its
// staged slabs.
type Loader func(grid []int64, slab int32, off int64) ([]byte, error)

// ReadAt reads min(len(p), Size()-off) bytes of the C-order stream starting
// at off into p and returns the number of bytes read. Unlike io.ReaderAt it
// returns (n, nil) for a short read at the end and (0, nil) at or after the
// end. Base slab chunks are fetched through src (which may be nil if no
// needed chunk lies on the base slab), each at most once per call.
func (m *Map) ReadAt(p []byte, off int64, src ChunkSource) (int, error) {
	return m.ReadAtFrom(p, off, src, m.BaseLoader(src))
}

// ReadPlan executes a GetItemPlan of this map into p (at least plan.N bytes), for
// callers that looked at the plan first.
func (m *Map) ReadPlan(plan *chunkplan.GetItemPlan, p []byte, src ChunkSource) error {
	return m.ReadPlanFrom(plan, p, src, m.BaseLoader(src))
}

// ReadAtFrom is ReadAt with the chunks off the full slab loaded by load.
func (m *Map) ReadAtFrom(p []byte, off int64, src ChunkSource, load Loader) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at %d: negative offset", off)
	}
	if off >= m.lay.Size() {
		return 0, nil
	}
	n := min(int64(len(p)), m.lay.Size()-off)
	plan, err := m.GetItemPlan(off, n)
	if err != nil {
		return 0, fmt.Errorf("read at %d: %w", off, err)
	}
	if err := m.ReadPlanFrom(plan, p, src, load); err != nil {
		return 0, err
	}
	return int(n), nil
}

// ReadPlanFrom is ReadPlan with the chunks off the full slab loaded by load; src, if a
// Prefetcher, is handed the plan's base offsets first.
func (m *Map) ReadPlanFrom(plan *chunkplan.GetItemPlan, p []byte, src ChunkSource, load Loader) error {
	if int64(len(p)) < plan.N {
		return fmt.Errorf("read of %d bytes into %d", plan.N, len(p))
	}
	if pf, ok := src.(Prefetcher); ok {
		pf.Prefetch(plan.BaseOffsets())
	}
	if err := m.execute(plan, p[:plan.N], load); err != nil {
		return fmt.Errorf("read at %d: %w", plan.Off, err)
	}
	return nil
}

// execute runs plan into out (len(out) == plan.N). Transfers are sorted by
// (slab, offset), so keeping only the current chunk loads each one once
// without a cache.
func (m *Map) execute(plan *chunkplan.GetItemPlan, out []byte, load Loader) error {
	var (
		data    []byte
		curSlab int32 = -1
		curOff  int64
	)
	for i := range plan.Transfers {
		t := &plan.Transfers[i]
		if t.Slab != chunkplan.FullSlab && (t.Slab != curSlab || t.SlabOffset != curOff) {
			var err error
			if data, err = load(t.Chunk, t.Slab, t.SlabOffset); err != nil {
				return err
			}
			curSlab, curOff = t.Slab, t.SlabOffset
		}
		if t.Slab == chunkplan.FullSlab {
			t.Rows(m.lay.ItemSize(), m.lay.ChunkStrides(), func(_, d, n int64) { m.FillBytes(out[d:d+n], t.ByteLo) })
		} else {
			t.Rows(m.lay.ItemSize(), m.lay.ChunkStrides(), func(s, d, n int64) { copy(out[d:d+n], data[s:s+n]) })
		}
	}
	return nil
}

// BaseLoader is the Loader of a map whose chunks lie on the full and base slabs only:
// base chunks through src (BaseChunk).
func (m *Map) BaseLoader(src ChunkSource) Loader {
	return func(grid []int64, slab int32, off int64) ([]byte, error) {
		if slab != chunkplan.BaseSlab {
			return nil, fmt.Errorf("chunk %v lies on missing slab %d", grid, slab)
		}
		return m.BaseChunk(grid, off, src)
	}
}

// BaseChunk returns the ChunkBytes() bytes of chunk grid at base slab row offset off,
// fetched through src (the caller must not modify them).
func (m *Map) BaseChunk(grid []int64, off int64, src ChunkSource) ([]byte, error) {
	if src == nil {
		return nil, fmt.Errorf("chunk %v lies on the base slab but no chunk source was given", grid)
	}
	data, err := src.Chunk(off)
	if err != nil {
		return nil, fmt.Errorf("read chunk %v at base offset %d: %w", grid, off, err)
	}
	if len(data) != m.lay.ChunkBytes() {
		return nil, fmt.Errorf("chunk %v at base offset %d: got %d bytes, want %d", grid, off, len(data), m.lay.ChunkBytes())
	}
	return data, nil
}

// FillBytes fills dst with repetitions of the fill element, starting at
// byte phase of an element, doubling the copied span to stay O(log n) calls.
func (m *Map) FillBytes(dst []byte, phase int) {
	k := copy(dst, m.fill[phase:])
	rest := dst[k:]
	if len(rest) == 0 {
		return
	}
	n := copy(rest, m.fill)
	for n < len(rest) {
		n += copy(rest[n:], rest[:n])
	}
}
