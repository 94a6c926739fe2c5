package staged

import (
	"fmt"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkplan"
)

// ReadAt reads min(len(p), Size()-off) bytes of the C-order stream starting at off into p
// and returns the number of bytes read, as chunkmap.Map.ReadAt does, staged chunks
// included. Base slab chunks are fetched through src (which may be nil if no needed chunk
// lies on the base slab), each at most once per call.
func (a *Array) ReadAt(p []byte, off int64, src chunkmap.ChunkSource) (int, error) {
	n, err := a.ReadAtFrom(p, off, src, a.loader(src))
	if err != nil {
		return 0, fmt.Errorf("staged: %w", err)
	}
	return n, nil
}

// ReadPlan executes a GetItemPlan of this array into p (at least plan.N bytes), for
// callers that looked at the plan first.
func (a *Array) ReadPlan(plan *chunkplan.GetItemPlan, p []byte, src chunkmap.ChunkSource) error {
	if err := a.ReadPlanFrom(plan, p, src, a.loader(src)); err != nil {
		return fmt.Errorf("staged: %w", err)
	}
	return nil
}

// loader loads the chunks a read of the array needs (loadChunk), base chunks from src.
func (a *Array) loader(src chunkmap.ChunkSource) chunkmap.Loader {
	return func(grid []int64, slab int32, off int64) ([]byte, error) {
		return a.loadChunk(grid, slab, off, src)
	}
}

// loadChunk returns the bytes of the chunk a read needs: the base slab's from src, a
// staged slab's sliced in place (or, with holes, a copy filled from its base).
func (a *Array) loadChunk(grid []int64, slab int32, off int64, src chunkmap.ChunkSource) ([]byte, error) {
	data, err := a.chunkData(grid, slab, off, src)
	if err != nil || slab < 2 {
		return data, err
	}
	if h := a.holesOf(slab); h != nil {
		return a.withHoles(h, data)
	}
	return data, nil
}

// chunkData returns the ChunkBytes() bytes of the chunk at (slab, off) (for a spilled
// staged chunk, a copy read from the spill file: fault it in first to update it), a
// non-full slab: fetched through src for the base slab (the caller must not
// modify them), sliced in place for a staged slab.
func (a *Array) chunkData(grid []int64, slab int32, off int64, src chunkmap.ChunkSource) ([]byte, error) {
	if slab == chunkplan.BaseSlab {
		return a.BaseChunk(grid, off, src)
	}
	if slab < 0 || int(slab) >= len(a.slabs) || a.gone(slab) {
		return nil, fmt.Errorf("chunk %v lies on missing slab %d", grid, slab)
	}
	if a.offMemory(slab) { // one chunk per staged slab
		data, err := a.loadSpilled(slab, nil)
		if err != nil {
			return nil, fmt.Errorf("chunk %v: %w", grid, err)
		}
		return data, nil
	}
	data := a.slabs[slab].buf
	start := off * a.Layout().RowBytes()
	if start < 0 || start > int64(len(data))-int64(a.ChunkBytes()) {
		return nil, fmt.Errorf("chunk %v at offset %d overruns slab %d of %d bytes", grid, off, slab, len(data))
	}
	return data[start : start+int64(a.ChunkBytes())], nil
}
