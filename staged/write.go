package staged

import (
	"fmt"
	"slices"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkplan"
)

// WriteAt writes p at byte offset off of the C-order stream, following a
// chunkplan.SetItemPlan. Partial and unaligned writes work: a range may start or end
// inside an element. Writing bytes past Size() is an error (grow with Resize
// first). Per chunk touched: wholly covered and on the full or base slab, a
// new staged chunk is filled from p without reading the old chunk; partially
// covered, a new staged chunk holds p's bytes and which they are (the fill
// value, or for the base slab src.Chunk, supply the others when they are
// needed: by a read, the commit, an eviction, or at once for a write in too
// many pieces); already staged, it is updated in place. Only
// touched chunks are held in memory, one ChunkBytes() allocation each. src
// may be nil if no partially covered chunk lies on the base slab.
//
// On error nothing is modified. The caller serialises WriteAt against every
// other call on the Array (see Concurrency in the package documentation).
func (a *Array) WriteAt(p []byte, off int64, src chunkmap.ChunkSource) (int, error) {
	plan, err := a.Layout().SetItemPlan(a.ChunkMap(), off, int64(len(p)))
	if err != nil {
		return 0, fmt.Errorf("staged: write at %d: %w", off, err)
	}
	if err := a.executeSet(plan, p, src); err != nil {
		return 0, fmt.Errorf("staged: write at %d: %w", off, err)
	}
	return len(p), nil
}

// executeSet runs a chunkplan.SetItemPlan with value p (len(p) == plan.N). All chunk
// buffers are prepared (and base chunks read) before anything is modified,
// so a failing ChunkSource leaves the array unchanged.
func (a *Array) executeSet(plan *chunkplan.SetItemPlan, p []byte, src chunkmap.ChunkSource) error {
	// Room under the store's budget for the chunks this write brings into memory, made
	// (by spilling older chunks) before anything changes.
	var extra int64
	keep := map[int32]bool{}
	for _, c := range plan.Chunks {
		if c.Action != chunkplan.UpdateInPlace || a.offMemory(c.Slab) {
			extra += int64(a.ChunkBytes())
		} else {
			keep[c.Slab] = true
		}
	}
	if err := a.makeRoom(extra, keep); err != nil {
		return err
	}
	for _, c := range plan.Chunks {
		if c.Action != chunkplan.UpdateInPlace && c.Slab >= 2 && int(c.Slab) < len(a.slabs) && a.isSunk(c.Slab) {
			a.sinkStop = true // a sunk chunk replaced: it leaves the staging order
		}
		if c.Action == chunkplan.UpdateInPlace {
			if err := a.faultIn(c.Slab); err != nil {
				return err
			}
			if h := a.holesOf(c.Slab); h != nil && int64(len(h.spans))+c.Spans > maxSpans {
				if err := a.settle(c.Slab); err != nil {
					return err
				}
			}
			a.forgetDigest(c.Slab) // written again: its digest would be stale
		}
	}
	bufs := make([][]byte, len(plan.Chunks))
	hs := make([]*holes, len(plan.Chunks)) // the chunks whose written bytes are recorded
	release := func() {
		for i, c := range plan.Chunks {
			if c.Action != chunkplan.UpdateInPlace && bufs[i] != nil && a.store != nil {
				a.store.release(bufs[i])
			}
		}
	}
	for i, c := range plan.Chunks {
		switch c.Action {
		case chunkplan.NewChunk:
			bufs[i] = a.newBuffer()
			if c.Spans <= maxSpans && a.mayGrow(a.Layout().Trimmed(c.Chunk)) {
				hs[i] = &holes{grid: slices.Clone(c.Chunk)} // an edge chunk that may grow (complete)
			}
		case chunkplan.CopyChunk:
			buf := a.newBuffer()
			bufs[i] = buf
			switch {
			case c.Spans <= maxSpans && c.Slab == chunkplan.FullSlab:
				hs[i] = &holes{grid: slices.Clone(c.Chunk)} // the fill value where not written
			case c.Spans <= maxSpans && src != nil:
				// The base chunk is read only if a read, the commit or an eviction needs
				// bytes this write and later ones leave unwritten.
				hs[i] = &holes{src: src, base: c.SlabOffset, grid: slices.Clone(c.Chunk)}
			case c.Slab == chunkplan.FullSlab:
				a.FillBytes(buf, 0)
			default:
				old, err := a.chunkData(c.Chunk, c.Slab, c.SlabOffset, src)
				if err != nil {
					release()
					return err
				}
				copy(buf, old)
			}
		case chunkplan.UpdateInPlace:
			data, err := a.chunkData(c.Chunk, c.Slab, c.SlabOffset, nil)
			if err != nil {
				release()
				return err
			}
			bufs[i] = data
			hs[i] = a.holesOf(c.Slab)
		}
	}
	// Staged in grid order. Commits order new chunks by their Origin, not by staging
	// order (commit's appendOrder); a sink takes chunks in staging order, which is the
	// commit's for sequential writes.
	for i, c := range plan.Chunks {
		if c.Action == chunkplan.UpdateInPlace {
			continue
		}
		o := Origin{Op: a.op, Whole: c.Action == chunkplan.NewChunk, Slab: c.Slab}
		if c.Slab == chunkplan.BaseSlab {
			o.Offset = c.SlabOffset
		}
		slab := a.newStagedSlab(bufs[i], o)
		a.setHoles(slab, hs[i])
		if err := a.setChunk(plan.Chunks[i].Chunk, slab, 0); err != nil {
			return err // unreachable: the plan's chunks are valid
		}
	}

	ci := 0
	for i := range plan.Transfers {
		t := &plan.Transfers[i]
		for !slices.Equal(plan.Chunks[ci].Chunk, t.Chunk) {
			ci++
		}
		data, h := bufs[ci], hs[ci]
		t.Rows(a.ItemSize(), a.Layout().ChunkStrides(), func(s, d, n int64) {
			copy(data[s:s+n], p[d:d+n])
			if h != nil {
				h.add(s, s+n)
			}
		})
	}
	for i, c := range plan.Chunks {
		if hs[i] != nil {
			s, _ := a.Slab(c.Chunk)
			a.coveredBy(s, hs[i])
		}
		switch {
		case c.Action == chunkplan.NewChunk && hs[i] == nil: // wholly written: digest it while the writes go on
			s, _ := a.Slab(c.Chunk)
			a.startDigest(s, c.Chunk)
		case hs[i] != nil:
			if s, _ := a.Slab(c.Chunk); a.complete(s) { // written whole in pieces: likewise
				a.startDigest(s, c.Chunk)
			}
		}
	}
	return nil
}

// Resize changes the shape (any axis: truncate on axis 0, or a shape
// change along any axis). Elements keep their coordinates; elements new to
// the array read as the fill value. Chunks beyond the new chunk grid are
// dropped (staged slabs no chunk references any more are freed); new chunks
// lie on the full slab. An edge chunk that grows and lies on the base slab
// is materialised into a new staged chunk (read through src) whose region
// outside its old trimmed extent is set to the fill value; a staged edge
// chunk that grows gets the same fill in place, so bytes beyond the old edge
// never leak stale contents. A chunk that shrinks keeps its slab. src may be
// nil if no growing edge chunk lies on the base slab.
//
// On error nothing is modified.
func (a *Array) Resize(shape []int64, src chunkmap.ChunkSource) error {
	if len(shape) != len(a.Layout().Shape()) {
		return fmt.Errorf("staged: resize to %v: shape has %d axes, array has %d", shape, len(shape), len(a.Layout().Shape()))
	}
	next, err := a.Layout().Reshape(shape)
	if err != nil {
		return fmt.Errorf("staged: resize to %v: %w", shape, err)
	}
	if old := a.Layout().Shape(); shape[0] >= old[0] && slices.Equal(shape[1:], old[1:]) {
		if err := a.growAxis0(&next, src); err != nil {
			return fmt.Errorf("staged: resize to %v: %w", shape, err)
		}
		return nil
	}
	return a.resize(&next, src)
}

// growAxis0 is Resize for a shape that only grows along axis 0 (a file written past its
// end). The C-order grid keeps every old chunk at its flat index and appends the new ones,
// so only the old last row of chunks along axis 0 can need work: its chunks off the full
// slab get the fill value where the new shape exposes their padding. The cost is that of
// the edge row, not of the whole grid: growing writes stay linear in the bytes written.
func (a *Array) growAxis0(next *chunkplan.Layout, src chunkmap.ChunkSource) error {
	shape, grid, nChunks := next.Shape(), next.Grid(), next.NumChunks()
	oldShape, oldGrid, chunks := a.Layout().Shape(), a.Layout().Grid(), a.Layout().Chunks()
	type grow struct {
		k     int64
		g     []int64
		oldL  []int64
		data  []byte
		stage bool
	}
	var grows []grow
	cm := a.ChunkMap()
	old := int64(len(cm.Slabs))
	if last := oldGrid[0] - 1; old > 0 && last < grid[0] && oldShape[0]-last*chunks[0] < min(chunks[0], shape[0]-last*chunks[0]) {
		per := old / oldGrid[0] // chunks per axis-0 row of the grid
		g := make([]int64, len(shape))
		g[0] = last
		for k := last * per; k < old; k++ {
			if s := cm.Slabs[k]; s != chunkplan.FullSlab {
				if s >= 2 {
					if err := a.faultIn(s); err != nil {
						return err
					}
					// Its padding is about to be filled: a base chunk's holes first, as
					// those bytes become the fill value, not the base's (see holes).
					if h := a.holesOf(s); h != nil && h.src != nil {
						if err := a.settle(s); err != nil {
							return err
						}
					}
					a.forgetDigest(s)
				}
				data, err := a.chunkData(g, s, cm.Offsets[k], src)
				if err != nil {
					return err
				}
				gr := grow{k: k, g: slices.Clone(g), oldL: a.Layout().Trimmed(g), data: data}
				if s == chunkplan.BaseSlab {
					gr.data = append(a.newBuffer()[:0], data...)
					gr.stage = true
				}
				grows = append(grows, gr)
			}
			for i := len(g) - 1; i >= 1; i-- {
				if g[i]++; g[i] < oldGrid[i] {
					break
				}
				g[i] = 0
			}
		}
	}
	// Nothing can fail from here on.
	cm.Slabs = slices.Grow(cm.Slabs, int(nChunks-old))[:nChunks]
	cm.Offsets = slices.Grow(cm.Offsets, int(nChunks-old))[:nChunks]
	clear(cm.Slabs[old:])
	clear(cm.Offsets[old:])
	var op uint64
	if shape[0] != oldShape[0] {
		op = a.resized()
	}
	for _, gr := range grows {
		a.fillOutside(gr.data, gr.oldL)
		if gr.stage {
			cm.Slabs[gr.k] = a.newStagedSlab(gr.data, Origin{Op: op, Slab: chunkplan.BaseSlab, Offset: cm.Offsets[gr.k]})
			cm.Offsets[gr.k] = 0
			a.nStaged++
		}
	}
	a.Reshape(*next, cm)
	return nil
}

// resize is Resize's general case: any axis, growing or shrinking.
func (a *Array) resize(next *chunkplan.Layout, src chunkmap.ChunkSource) error {
	shape, grid, nChunks := next.Shape(), next.Grid(), next.NumChunks()
	oldGrid := a.Layout().Grid()
	if err := a.settleAll(); err != nil { // chunks with holes keep their extent (see holes)
		return fmt.Errorf("staged: resize to %v: %w", shape, err)
	}
	nd := len(shape)
	idx := make([]int32, nChunks)
	offs := make([]int64, nChunks)
	type grow struct {
		k     int64   // new flat index
		g     []int64 // grid index
		oldL  []int64 // trimmed extent under the old shape
		data  []byte
		slab  int32
		stage bool // data is a new buffer to stage (was on the base slab)
	}
	var grows []grow
	var kept int64 // chunks off the full slab that the new grid keeps
	cur := a.ChunkMap()
	if nChunks > 0 {
		g := make([]int64, nd)
		for k := range nChunks {
			inOld := true
			var ko int64
			for i := range nd {
				if g[i] >= oldGrid[i] {
					inOld = false
					break
				}
				ko = ko*oldGrid[i] + g[i]
			}
			if inOld {
				s, o := cur.Slabs[ko], cur.Offsets[ko]
				idx[k], offs[k] = s, o
				if s != chunkplan.FullSlab {
					kept++
					oldL := a.Layout().Trimmed(g)
					newL := next.Trimmed(g)
					for i := range nd {
						// Growing exposes padding (fill it); a base chunk that shrinks is
						// re-materialised too, as versioned-hdf5 does, so that its new
						// trimmed extent gets its own slot and hash.
						if newL[i] > oldL[i] || (s == chunkplan.BaseSlab && newL[i] < oldL[i]) {
							gr := grow{k: k, g: slices.Clone(g), oldL: oldL, slab: s}
							if s >= 2 {
								if err := a.faultIn(s); err != nil {
									return fmt.Errorf("staged: resize to %v: %w", shape, err)
								}
								a.forgetDigest(s) // its padding is about to be filled
							}
							data, err := a.chunkData(g, s, o, src)
							if err != nil {
								return fmt.Errorf("staged: resize to %v: %w", shape, err)
							}
							if s == chunkplan.BaseSlab {
								gr.data = append(a.newBuffer()[:0], data...)
								gr.stage = true
							} else {
								gr.data = data
							}
							grows = append(grows, gr)
							break
						}
					}
				}
			}
			for i := nd - 1; i >= 0; i-- {
				if g[i]++; g[i] < grid[i] {
					break
				}
				g[i] = 0
			}
		}
	}

	// Nothing can fail from here on.
	for _, s := range cur.Slabs {
		if s != chunkplan.FullSlab {
			kept--
		}
	}
	if kept < 0 {
		a.dropped = true
	}
	var op uint64
	if !slices.Equal(shape, a.Layout().Shape()) {
		op = a.resized()
	}
	a.Reshape(*next, chunkplan.ChunkMap{Slabs: idx, Offsets: offs})
	a.collectSlabs()
	for _, gr := range grows {
		a.fillOutside(gr.data, gr.oldL)
		if gr.stage {
			idx[gr.k] = a.newStagedSlab(gr.data, Origin{Op: op, Slab: chunkplan.BaseSlab, Offset: offs[gr.k]})
			offs[gr.k] = 0
		}
	}
	a.countStaged()
	return nil
}

// StagedChunk is a chunk on a staged slab: its grid index and its bytes
// (ChunkBytes() long, full chunk shape, C order, the fill value outside the
// trimmed extent).
type StagedChunk struct {
	Grid []int64
	Data []byte // nil if the chunk is spilled: StagedData reads it
	Seq  uint64 // staging order: lower was staged earlier
	// Origin: how the chunk was staged, the facts a commit orders new chunks by.
	Origin Origin
	// Digest, if not nil, is the chunk's digest (the store's Digester) for its trimmed
	// extent, made when it was written: the commit need not read the chunk to hash it.
	Digest *[32]byte
	// Encoded, if not nil, is the whole chunk as the dataset's filters store it (the
	// array's Encoder), made when it was written: the commit writes it as it is.
	Encoded []byte

	slab int32
}

// StagedChunks returns the chunks that lie on staged slabs, in C order of
// the chunk grid: what a commit hashes and writes. Data aliases the staged
// memory of the chunks in memory (do not modify it; it is valid until the
// next mutation) and is nil for spilled ones (StagedData). Chunks written
// only in part are completed from their base chunks, and the padding
// outside each chunk's trimmed extent is set to the fill value in place
// first, so this counts as a mutation for locking purposes. It fails only
// if a base chunk cannot be read.
func (a *Array) StagedChunks() ([]StagedChunk, error) {
	if err := a.settleAll(); err != nil {
		return nil, fmt.Errorf("staged: %w", err)
	}
	var out []StagedChunk
	_ = a.Each(func(g []int64, slab int32, off int64) error {
		if slab < 2 {
			return nil
		}
		sc := StagedChunk{Grid: slices.Clone(g), Seq: a.slabs[slab].seq, Origin: a.slabs[slab].origin, slab: slab}
		l := a.Layout().Trimmed(g)
		sc.Digest = a.digestOf(slab, l) // waits for its worker
		sc.Encoded = a.encodedOf(slab, l)
		if !a.offMemory(slab) {
			data, err := a.chunkData(g, slab, off, nil)
			if err != nil {
				return nil // unreachable: setChunk validates staged chunks
			}
			a.fillOutside(data, a.Layout().Trimmed(g))
			sc.Data = data
		}
		out = append(out, sc)
		return nil
	})
	return out, nil
}

// StagedData returns the bytes of a chunk StagedChunks listed: its Data, or for a spilled
// chunk its bytes read into buf (ChunkBytes() long; nil allocates) with the padding set
// to the fill value. It is valid until the next mutation, as StagedChunks.
func (a *Array) StagedData(sc StagedChunk, buf []byte) ([]byte, error) {
	if sc.Data != nil {
		return sc.Data, nil
	}
	if int(sc.slab) >= len(a.slabs) || !a.offMemory(sc.slab) {
		return nil, fmt.Errorf("staged: chunk %v is no longer staged", sc.Grid)
	}
	data, err := a.loadSpilled(sc.slab, buf)
	if err != nil {
		return nil, err
	}
	a.fillOutside(data, a.Layout().Trimmed(sc.Grid))
	return data, nil
}

// Trimmed returns the trimmed extent L of chunk grid index grid: L[i] =
// C[i], except for the last chunk along axis i where L[i] = S[i] -
// (ceil(S[i]/C[i])-1)*C[i]. It returns nil for an invalid grid index.
func (a *Array) Trimmed(grid []int64) []int64 {
	if _, err := a.Layout().FlatChunk(grid); err != nil {
		return nil
	}
	return a.Layout().Trimmed(grid)
}

// MapFull points chunk grid at the full slab (it reads as the fill value),
// e.g. after a commit found it equal to the fill chunk.
func (a *Array) MapFull(grid []int64) error {
	if err := a.setChunk(grid, chunkplan.FullSlab, 0); err != nil {
		return fmt.Errorf("staged: map full: %w", err)
	}
	return nil
}

// Dirty reports whether any chunk lies on a staged slab, the shape changed, or
// a resize dropped a chunk that held data (so that growing back reads the fill
// value there) since New or the last MarkClean.
func (a *Array) Dirty() bool {
	return a.nStaged > 0 || a.dropped || !slices.Equal(a.Layout().Shape(), a.cleanShape)
}

// MarkClean records a commit: the current shape becomes the clean shape and
// the staged slabs are dropped. The caller first re-maps every staged chunk
// (MapBase, MapFull); a staged slab that a chunk still references is kept
// (and keeps the array dirty) rather than left dangling.
func (a *Array) MarkClean() {
	a.collectSlabs()
	a.cleanShape = slices.Clone(a.Layout().Shape())
	a.dropped = false
	a.sinkStop = false // nothing is staged: the next change's prefix starts afresh
}

// newStagedSlab stores data (one chunk) as a staged slab, reusing the index
// of a dropped one if possible.
func (a *Array) newStagedSlab(data []byte, o Origin) int32 {
	var s int32
	if n := len(a.freeSlabs); n > 0 {
		s = a.freeSlabs[n-1]
		a.freeSlabs = a.freeSlabs[:n-1]
		a.slabs[s] = stagedSlab{buf: data, grid: a.slabs[s].grid[:0]}
	} else {
		s = a.appendSlab(data)
	}
	a.slabs[s].seq = a.nextSeq
	a.nextSeq++
	a.slabs[s].origin = o
	a.held(s)
	return s
}

// collectSlabs drops the staged slabs no chunk references. If none is left
// the slab list shrinks back to the full and base slabs.
func (a *Array) collectSlabs() {
	used := make([]bool, len(a.slabs))
	referenced := false
	for _, s := range a.ChunkMap().Slabs {
		if s >= 2 {
			used[s], referenced = true, true
		}
	}
	if !referenced {
		for s := 2; s < len(a.slabs); s++ {
			a.dropSlab(int32(s))
		}
		a.slabs = a.slabs[:2]
		a.resident = a.resident[:0]
		a.freeSlabs = nil
		return
	}
	for s := 2; s < len(a.slabs); s++ {
		if !used[s] && !a.gone(int32(s)) {
			a.dropSlab(int32(s))
			a.freeSlabs = append(a.freeSlabs, int32(s))
		}
	}
}

func (a *Array) countStaged() {
	a.nStaged = 0
	for _, s := range a.ChunkMap().Slabs {
		if s >= 2 {
			a.nStaged++
		}
	}
}

// fillOutside sets every element of chunk buffer data outside the corner l
// (the trimmed extent) to the fill value.
func (a *Array) fillOutside(data []byte, l []int64) {
	nd := len(l)
	// full[i]: axes i.. are all untrimmed, so nothing below axis i needs fill.
	full := make([]bool, nd+1)
	full[nd] = true
	for i := nd - 1; i >= 0; i-- {
		full[i] = full[i+1] && l[i] == a.Layout().Chunks()[i]
	}
	var rec func(axis int, base int64)
	rec = func(axis int, base int64) {
		if full[axis] {
			return
		}
		st := a.Layout().ChunkStrides()[axis]
		if l[axis] < a.Layout().Chunks()[axis] {
			a.FillBytes(data[base+l[axis]*st:base+a.Layout().Chunks()[axis]*st], 0)
		}
		if axis == nd-1 || full[axis+1] {
			return
		}
		for j := range l[axis] {
			rec(axis+1, base+j*st)
		}
	}
	rec(0, 0)
}

// StageChunk puts a copy of data, one whole chunk (ChunkBytes long, full chunk shape, C
// order), on a staged slab of its own at grid, with origin o (StagedChunk.Origin as it was
// saved); grid must not be staged already. It restores staged chunks saved elsewhere (a
// stage kept on disk); the chunk is staged after every chunk staged before it, and the
// writes after it belong to o's operation or a later one.
func (a *Array) StageChunk(grid []int64, data []byte, o Origin) error {
	if len(data) != a.ChunkBytes() {
		return fmt.Errorf("staged: stage chunk %v: %d bytes, want %d", grid, len(data), a.ChunkBytes())
	}
	k, err := a.Layout().FlatChunk(grid)
	if err != nil {
		return fmt.Errorf("staged: stage chunk: %w", err)
	}
	if a.ChunkMap().Slabs[k] >= 2 {
		return fmt.Errorf("staged: stage chunk %v: already staged", grid)
	}
	if err := a.makeRoom(int64(a.ChunkBytes()), nil); err != nil {
		return err
	}
	buf := a.newBuffer()
	copy(buf, data)
	a.op = max(a.op, o.Op)
	return a.setChunk(grid, a.newStagedSlab(buf, o), 0)
}
