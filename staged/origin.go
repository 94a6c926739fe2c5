package staged

import "github.com/vh5fs/vh5fs/chunkplan"

// Origin records how a staged chunk left the full or base slab: the facts a commit orders
// its new chunks by (commit's appendOrder, versioned-hdf5's order). The array numbers its
// operations: a resize that changes the shape is one, and so are the writes between two
// such resizes, taken together as one assignment (ds[...] = v) would make them.
type Origin struct {
	Op uint64 // the operation that staged the chunk
	// Whole: that operation's writes covered the chunk's whole trimmed extent (the
	// library stages such chunks apart from those it first loads from their slab). Known
	// while the chunk records its written bytes (holes.go), or was written whole at once.
	Whole  bool
	Slab   int32 // where it lay before: chunkplan.FullSlab, or chunkplan.BaseSlab at Offset
	Offset int64
}

// coveredBy marks staged slab i whole if h, its written bytes, covers its trimmed extent
// and the operation that staged it is still under way.
func (a *Array) coveredBy(i int32, h *holes) {
	if h == nil || a.slabs[i].origin.Op != a.op {
		return
	}
	if h.written == chunkplan.Elements(a.Layout().Trimmed(h.grid))*int64(a.ItemSize()) {
		a.slabs[i].origin.Whole = true
	}
}

// resized starts a new operation for a resize that changes the shape, and returns it; the
// writes after it are another one.
func (a *Array) resized() (op uint64) {
	a.op++
	op = a.op
	a.op++
	return op
}
