package chunkplan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// WriteAction says how a write treats one chunk touched by a SetItemPlan,
// after the three cases of the design's __setitem__ algorithm.
type WriteAction int8

const (
	// NewChunk: the write wholly covers the chunk's trimmed extent and the
	// chunk lies on the full or base slab. It moves to a new staged chunk
	// filled from the value; the old chunk is never read.
	NewChunk WriteAction = iota
	// CopyChunk: the write partially covers a chunk on the full or base
	// slab. It moves to a new staged chunk that takes the rest of its bytes
	// from the old chunk (package staged reads the base chunk only when those
	// bytes are needed).
	CopyChunk
	// UpdateInPlace: the chunk already lies on a staged slab and is updated
	// in place; its slab index and offset do not change.
	UpdateInPlace
)

func (w WriteAction) String() string {
	switch w {
	case NewChunk:
		return "new"
	case CopyChunk:
		return "copy"
	case UpdateInPlace:
		return "in place"
	}
	return fmt.Sprintf("WriteAction(%d)", int8(w))
}

// ChunkWrite is one chunk touched by a SetItemPlan, with where it lies
// before the write.
type ChunkWrite struct {
	Chunk      []int64 // chunk grid index
	Slab       int32
	SlabOffset int64
	Action     WriteAction

	// Spans is the number of contiguous byte ranges the transfers write in the chunk.
	Spans int64

	flat int64
}

// SetItemPlan is the write plan for a byte range of the C-order stream. The
// Hyperslabs and Transfers are those a GetItemPlan of the same range has, run
// in the other direction: in a SetItemPlan the "destination" fields
// (Hyperslab.DstOff, Transfer.DstOff, Transfer.DstStrides) address the value
// being written, which is the source of the copy.
type SetItemPlan struct {
	Off, N int64 // byte range written

	Hyperslabs []Hyperslab

	// Chunks lists every chunk touched, in C order of the chunk grid.
	Chunks []ChunkWrite

	// Transfers copy boxes of the value into chunks, grouped by chunk in
	// the order of Chunks and, within a chunk, in value order.
	Transfers []Transfer

	shape, chunks []int64
	itemSize      int
}

// SetItemPlan plans writing bytes [off, off+n) of the C-order stream of an array whose
// chunks lie where m says. The range must lie within Size().
func (l *Layout) SetItemPlan(m ChunkMap, off, n int64) (*SetItemPlan, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("invalid byte range off=%d n=%d", off, n)
	}
	if off > l.size || n > l.size-off {
		return nil, fmt.Errorf("byte range [%d, %d) beyond the array size %d (resize first)", off, uint64(off)+uint64(n), l.size)
	}
	gp, err := l.GetItemPlan(m, off, n)
	if err != nil {
		return nil, err
	}
	p := &SetItemPlan{
		Off: gp.Off, N: gp.N, Hyperslabs: gp.Hyperslabs,
		shape: l.shape, chunks: l.chunks, itemSize: l.itemSize,
	}
	is := int64(l.itemSize)
	type keyed struct {
		k int64
		t Transfer
	}
	ts := make([]keyed, len(gp.Transfers))
	at := map[int64]int{} // flat chunk index -> its place in p.Chunks
	var covered []int64   // bytes written per chunk of p.Chunks
	for i, t := range gp.Transfers {
		k := l.flatUnchecked(t.Chunk)
		ts[i] = keyed{k, t}
		j, ok := at[k]
		if !ok {
			j = len(p.Chunks)
			at[k] = j
			p.Chunks = append(p.Chunks, ChunkWrite{Chunk: t.Chunk, Slab: t.Slab, SlabOffset: t.SlabOffset, flat: k})
			covered = append(covered, 0)
		}
		covered[j] += (Elements(t.Count)-1)*is + int64(t.ByteHi-t.ByteLo)
		p.Chunks[j].Spans += Elements(t.Count[:len(t.Count)-1])
	}
	for i := range p.Chunks {
		c := &p.Chunks[i]
		switch {
		case c.Slab >= 2:
			c.Action = UpdateInPlace
		case covered[i] == Elements(l.Trimmed(c.Chunk))*is:
			c.Action = NewChunk
		default:
			c.Action = CopyChunk
		}
	}
	slices.SortFunc(p.Chunks, func(x, y ChunkWrite) int { return cmp.Compare(x.flat, y.flat) })
	slices.SortStableFunc(ts, func(x, y keyed) int { return cmp.Compare(x.k, y.k) })
	p.Transfers = make([]Transfer, len(ts))
	for i := range ts {
		p.Transfers[i] = ts[i].t
	}
	return p, nil
}

// String renders the plan: the value's hyperslabs, the chunks by action, and
// the transfers from the value into each chunk (chunk coordinates are
// relative to the chunk origin).
func (p *SetItemPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "SetItemPlan bytes [%d, %d) of shape %s chunks %s itemsize %d\n",
		p.Off, p.Off+p.N, Tuple(p.shape), Tuple(p.chunks), p.itemSize)
	fmt.Fprintf(&b, "# %d hyperslabs\n", len(p.Hyperslabs))
	for _, h := range p.Hyperslabs {
		fmt.Fprintf(&b, "value[%s]%s  # value byte %d\n",
			box(h.Start, h.Count, 0), window(p.itemSize, h.ByteLo, h.ByteHi), h.DstOff+int64(h.ByteLo))
	}
	for _, g := range []struct {
		action WriteAction
		title  string
	}{
		{NewChunk, "wholly covered on full/base slabs: new staged chunk, old chunk not read"},
		{CopyChunk, "partially covered on full/base slabs: copy old chunk to a new staged chunk, then update"},
		{UpdateInPlace, "already staged: update in place"},
	} {
		n := 0
		for _, c := range p.Chunks {
			if c.Action == g.action {
				n++
			}
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(&b, "# %d chunks %s\n", n, g.title)
		for _, c := range p.Chunks {
			if c.Action != g.action {
				continue
			}
			fmt.Fprintf(&b, "chunk %s: slabs[%d][%s]%s\n", Tuple(c.Chunk), c.Slab,
				rowRange(c.Slab, c.SlabOffset, p.chunks[0]), slabKind(c.Slab))
		}
	}
	fmt.Fprintf(&b, "# %d transfers from value\n", len(p.Transfers))
	for _, t := range p.Transfers {
		global := make([]int64, len(t.Start))
		for k := range global {
			global[k] = t.Chunk[k]*p.chunks[k] + t.Start[k]
		}
		w := window(p.itemSize, t.ByteLo, t.ByteHi)
		fmt.Fprintf(&b, "chunk %s[%s]%s = value[%s]%s  # value byte %d\n",
			Tuple(t.Chunk), box(t.Start, t.Count, 0), w, box(global, t.Count, 0), w, t.DstOff+int64(t.ByteLo))
	}
	return b.String()
}

func rowRange(slab int32, off, c0 int64) string {
	if slab == FullSlab {
		return fmt.Sprintf("0:%d", c0)
	}
	return fmt.Sprintf("%d:%d", off, off+c0)
}

func window(itemSize, lo, hi int) string {
	if lo == 0 && hi == itemSize {
		return ""
	}
	return fmt.Sprintf(".bytes[%d:%d]", lo, hi)
}
