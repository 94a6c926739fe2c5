package staged

import (
	"fmt"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// ReadAt reads min(len(p), Size()-off) bytes of the C-order stream starting
// at off into p and returns the number of bytes read. Unlike io.ReaderAt it
// returns (n, nil) for a short read at the end and (0, nil) at or after the
// end. Base slab chunks are fetched through src (which may be nil if no
// needed chunk lies on the base slab), each at most once per call.
func (a *Array) ReadAt(p []byte, off int64, src ChunkSource) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("staged: read at %d: negative offset", off)
	}
	if off >= a.lay.Size() {
		return 0, nil
	}
	n := min(int64(len(p)), a.lay.Size()-off)
	plan, err := a.GetItemPlan(off, n)
	if err != nil {
		return 0, fmt.Errorf("staged: read at %d: %w", off, err)
	}
	if err := a.ReadPlan(plan, p, src); err != nil {
		return 0, err
	}
	return int(n), nil
}

// ReadPlan executes a GetItemPlan of this array into p (at least plan.N bytes), for
// callers that looked at the plan first.
func (a *Array) ReadPlan(plan *chunkplan.GetItemPlan, p []byte, src ChunkSource) error {
	if int64(len(p)) < plan.N {
		return fmt.Errorf("staged: read of %d bytes into %d", plan.N, len(p))
	}
	if pf, ok := src.(Prefetcher); ok {
		pf.Prefetch(plan.BaseOffsets())
	}
	if err := a.execute(plan, p[:plan.N], src); err != nil {
		return fmt.Errorf("staged: read at %d: %w", plan.Off, err)
	}
	return nil
}

// execute runs plan into out (len(out) == plan.N). Transfers are sorted by
// (slab, offset), so keeping only the current chunk loads each one once
// without a cache.
func (a *Array) execute(plan *chunkplan.GetItemPlan, out []byte, src ChunkSource) error {
	nd := len(a.lay.Shape())
	is := int64(a.lay.ItemSize())
	cs := a.lay.ChunkStrides()
	var (
		data     []byte
		curSlab  int32 = -1
		curOff   int64
		outerIdx = make([]int64, nd)
	)
	for i := range plan.Transfers {
		t := &plan.Transfers[i]
		if t.Slab != chunkplan.FullSlab && (t.Slab != curSlab || t.SlabOffset != curOff) {
			var err error
			if data, err = a.loadChunk(t, src); err != nil {
				return err
			}
			curSlab, curOff = t.Slab, t.SlabOffset
		}
		// Each row along the last axis is one contiguous run in both the
		// chunk and the output; only bytes [ByteLo, ByteHi) of the run's
		// first/last element are kept (runs of partial elements are 1 long).
		lo := int64(t.ByteLo)
		hi := (t.Count[nd-1]-1)*is + int64(t.ByteHi)
		clear(outerIdx)
		for {
			s, d := int64(0), t.DstOff
			for k := range nd {
				s += (t.Start[k] + outerIdx[k]) * cs[k]
				d += outerIdx[k] * t.DstStrides[k]
			}
			dst := out[d+lo : d+hi]
			if t.Slab == chunkplan.FullSlab {
				fillPattern(dst, a.fill, t.ByteLo)
			} else {
				copy(dst, data[s+lo:s+hi])
			}
			if !nextRow(outerIdx, t.Count) {
				break
			}
		}
	}
	return nil
}

// loadChunk returns the bytes of the chunk a transfer reads from: the base
// slab's from src, a staged slab's sliced in place (or, with holes, a copy filled
// from its base).
func (a *Array) loadChunk(t *chunkplan.Transfer, src ChunkSource) ([]byte, error) {
	data, err := a.chunkData(t.Chunk, t.Slab, t.SlabOffset, src)
	if err != nil || t.Slab < 2 {
		return data, err
	}
	if h := a.holesOf(t.Slab); h != nil {
		return a.withHoles(h, data)
	}
	return data, nil
}

// chunkData returns the ChunkBytes() bytes of the chunk at (slab, off) (for a spilled
// staged chunk, a copy read from the spill file: fault it in first to update it), a
// non-full slab: fetched through src for the base slab (the caller must not
// modify them), sliced in place for a staged slab.
func (a *Array) chunkData(grid []int64, slab int32, off int64, src ChunkSource) ([]byte, error) {
	if slab == chunkplan.BaseSlab {
		if src == nil {
			return nil, fmt.Errorf("chunk %v lies on the base slab but no chunk source was given", grid)
		}
		data, err := src.Chunk(off)
		if err != nil {
			return nil, fmt.Errorf("read chunk %v at base offset %d: %w", grid, off, err)
		}
		if len(data) != a.lay.ChunkBytes() {
			return nil, fmt.Errorf("chunk %v at base offset %d: got %d bytes, want %d", grid, off, len(data), a.lay.ChunkBytes())
		}
		return data, nil
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
	start := off * a.lay.RowBytes()
	if start < 0 || start > int64(len(data))-int64(a.lay.ChunkBytes()) {
		return nil, fmt.Errorf("chunk %v at offset %d overruns slab %d of %d bytes", grid, off, slab, len(data))
	}
	return data[start : start+int64(a.lay.ChunkBytes())], nil
}

// nextRow advances idx over all axes but the last (an odometer) and reports
// whether another row remains.
func nextRow(idx, count []int64) bool {
	for i := len(idx) - 2; i >= 0; i-- {
		if idx[i]++; idx[i] < count[i] {
			return true
		}
		idx[i] = 0
	}
	return false
}

// fillPattern fills dst with repetitions of the fill element, starting at
// byte phase of an element, doubling the copied span to stay O(log n) calls.
func fillPattern(dst, fill []byte, phase int) {
	k := copy(dst, fill[phase:])
	rest := dst[k:]
	if len(rest) == 0 {
		return
	}
	m := copy(rest, fill)
	for m < len(rest) {
		m += copy(rest[m:], rest[:m])
	}
}

// Prefetcher is a ChunkSource that can load many chunks at once (e.g. decoding them in
// parallel); ReadAt hands it every base slab offset a read needs before reading.
type Prefetcher interface {
	Prefetch(offs []int64)
}
