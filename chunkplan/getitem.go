package chunkplan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Destination offsets (Hyperslab.DstOff, Transfer.DstOff) are the output
// byte offset of byte 0 of the first selected element, i.e. stream offset
// of that element minus the requested Off. For an element cut by the start
// of the range this is negative (-ByteLo): only bytes [ByteLo, ByteHi) of an
// element are ever written, so the first byte written lands at
// DstOff+ByteLo. Keeping DstOff element-aligned lets the executor use the
// same offset arithmetic for partial and whole elements.

// GetItemPlan is the read plan for a byte range of the C-order stream.
type GetItemPlan struct {
	Off, N int64 // requested byte range, clipped to the array size

	// Hyperslabs decompose [Off, Off+N) into boxes of the array, in output
	// order; each is contiguous in the output. At most 2*ndim+1: up to
	// 2*ndim-1 boxes of whole elements plus a partial element at each end.
	Hyperslabs []Hyperslab

	// Transfers are the (hyperslab, chunk) intersections, sorted by source
	// slab index then slab offset so that each chunk is loaded once.
	Transfers []Transfer

	shape, chunks []int64
	itemSize      int
}

// Hyperslab is a rectangular box of the array that is contiguous in the
// output. A partial element is a one-element box with ByteLo/ByteHi
// narrowing the bytes kept; otherwise ByteLo=0 and ByteHi=itemSize.
type Hyperslab struct {
	Start, Count   []int64 // element coordinates in the array
	DstOff         int64   // output offset of byte 0 of the first element (see above)
	ByteLo, ByteHi int     // bytes of each element that are kept
}

// Transfer copies a box inside one chunk to the output.
type Transfer struct {
	Slab       int32
	SlabOffset int64   // row offset of the chunk along axis 0 in its slab
	Chunk      []int64 // chunk grid index
	Start      []int64 // selection inside the chunk, relative to the chunk origin
	Count      []int64
	DstOff     int64   // output offset of byte 0 of element Start (may be negative, see above)
	DstStrides []int64 // output byte strides per axis (shared among transfers; read-only)
	ByteLo     int     // sub-element byte window; 0 and itemSize for whole elements
	ByteHi     int
}

// Rows calls fn for every row of t's box along the last axis, in C order, with where the
// row's bytes start in a chunk buffer of byte strides chunkStrides (Layout.ChunkStrides)
// and in the output, and how many they are. Each row is one contiguous run in both; only
// bytes [ByteLo, ByteHi) of its first and last element are kept (rows of partial elements
// are one element long). The executors of both plans copy a transfer's bytes so.
func (t *Transfer) Rows(itemSize int, chunkStrides []int64, fn func(src, dst, n int64)) {
	nd := len(t.Count)
	var buf [8]int64
	idx := buf[:0]
	if nd <= len(buf) {
		idx = buf[:nd]
	} else {
		idx = make([]int64, nd)
	}
	lo := int64(t.ByteLo)
	n := (t.Count[nd-1]-1)*int64(itemSize) + int64(t.ByteHi) - lo
	for {
		s, d := lo, t.DstOff+lo
		for k := range nd {
			s += (t.Start[k] + idx[k]) * chunkStrides[k]
			d += idx[k] * t.DstStrides[k]
		}
		fn(s, d, n)
		// The next row: an odometer over every axis but the last.
		i := nd - 2
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < t.Count[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

// GetItemPlan plans reading bytes [off, off+n) of the C-order stream of an array whose
// chunks lie where m says, clipped to Size(); off at or beyond the end gives an empty plan.
func (l *Layout) GetItemPlan(m ChunkMap, off, n int64) (*GetItemPlan, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("invalid byte range off=%d n=%d", off, n)
	}
	p := &GetItemPlan{Off: off, shape: l.shape, chunks: l.chunks, itemSize: l.itemSize}
	if off >= l.size || n == 0 {
		return p, nil
	}
	n = min(n, l.size-off)
	p.N = n

	is := int64(l.itemSize)
	end := off + n
	first, last := off/is, (end-1)/is // elements touched, inclusive
	headCut, tailCut := off%is != 0, end%is != 0
	if first == last && (headCut || tailCut) {
		p.addElement(l, first, int(off-first*is), int(end-first*is))
	} else {
		lo, hi := first, last+1 // whole elements
		if headCut {
			p.addElement(l, first, int(off-first*is), l.itemSize)
			lo++
		}
		if tailCut {
			hi--
		}
		if lo < hi {
			l.decompose(lo, hi, func(start, count []int64) {
				p.Hyperslabs = append(p.Hyperslabs, Hyperslab{
					Start: start, Count: count,
					DstOff: l.linear(start)*is - off,
					ByteLo: 0, ByteHi: l.itemSize,
				})
			})
		}
		if tailCut {
			p.addElement(l, last, 0, int(end-last*is))
		}
	}
	for i := range p.Hyperslabs {
		l.addTransfers(p, m, &p.Hyperslabs[i])
	}
	// Stable: transfers of one chunk stay in output order. A sequential read of chunks
	// stored in order is sorted already.
	bySlab := func(x, y Transfer) int {
		if c := cmp.Compare(x.Slab, y.Slab); c != 0 {
			return c
		}
		return cmp.Compare(x.SlabOffset, y.SlabOffset)
	}
	if !slices.IsSortedFunc(p.Transfers, bySlab) {
		slices.SortStableFunc(p.Transfers, bySlab)
	}
	return p, nil
}

// Run is a piece of a byte range that is contiguous both in one chunk and in the range:
// N bytes at byte ChunkOff of the chunk on slab Slab at row SlabOffset, and at DstOff of
// the range.
type Run struct {
	Slab       int32
	SlabOffset int64
	ChunkOff   int64
	DstOff     int64
	N          int64
}

// Runs plans bytes [off, off+n) of the C-order stream of an array whose chunks lie where
// m says, clipped to Size(), as one Run per chunk touched, in order, without a
// GetItemPlan: it applies when every chunk is one contiguous run of the stream (1-D
// arrays, or chunks as wide as the array on every axis after the first), the layout of
// most arrays read sequentially. ok is false for other arrays.
func (l *Layout) Runs(m ChunkMap, off, n int64) (runs []Run, ok bool) {
	for i := 1; i < len(l.shape); i++ {
		if l.chunks[i] != l.shape[i] {
			return nil, false
		}
	}
	if off < 0 || n < 0 {
		return nil, false
	}
	end := min(off+n, l.size)
	// A chunk's rows are the stream's rows chunks[0]*k onwards; the last may be cut short.
	span := int64(l.chunkBytes)
	if off < end {
		// Sized once: a read of 1 MiB of one-byte chunks is a million runs.
		runs = make([]Run, 0, (end-1)/span-off/span+1)
	}
	for pos := off; pos < end; {
		k := pos / span
		r := min(end, (k+1)*span) - pos
		runs = append(runs, Run{Slab: m.Slabs[k], SlabOffset: m.Offsets[k], ChunkOff: pos - k*span, DstOff: pos - off, N: r})
		pos += r
	}
	return runs, true
}

// addElement appends a one-element hyperslab keeping bytes [lo, hi) of
// element e.
func (p *GetItemPlan) addElement(l *Layout, e int64, lo, hi int) {
	nd := len(l.shape)
	start := make([]int64, 2*nd)
	count := start[nd:]
	start = start[:nd:nd]
	for i := nd - 1; i >= 0; i-- {
		start[i] = e % l.shape[i]
		e /= l.shape[i]
		count[i] = 1
	}
	p.Hyperslabs = append(p.Hyperslabs, Hyperslab{
		Start: start, Count: count,
		DstOff: l.linear(start)*int64(l.itemSize) - p.Off,
		ByteLo: lo, ByteHi: hi,
	})
}

// decompose splits the linear element range [lo, hi) (non-empty, within a
// non-empty array) into at most 2*ndim-1 boxes, each contiguous in C order,
// emitted in order: at each axis a partial leading row (recursively), a
// block of whole rows, and a partial trailing row (recursively).
func (l *Layout) decompose(lo, hi int64, emit func(start, count []int64)) {
	nd := len(l.shape)
	inner := make([]int64, nd) // elements per index step of each axis
	inner[nd-1] = 1
	for i := nd - 2; i >= 0; i-- {
		inner[i] = inner[i+1] * l.shape[i+1]
	}
	cur := make([]int64, nd) // fixed indices of the outer axes
	box := func(axis int, s, c int64) {
		buf := make([]int64, 2*nd)
		start, count := buf[:nd:nd], buf[nd:]
		for i := range nd {
			switch {
			case i < axis:
				start[i], count[i] = cur[i], 1
			case i == axis:
				start[i], count[i] = s, c
			default:
				start[i], count[i] = 0, l.shape[i]
			}
		}
		emit(start, count)
	}
	var rec func(axis int, lo, hi int64)
	rec = func(axis int, lo, hi int64) {
		if axis == nd-1 {
			box(axis, lo, hi-lo)
			return
		}
		in := inner[axis]
		rlo, rhi := lo/in, hi/in
		if rlo == rhi { // within one row
			cur[axis] = rlo
			rec(axis+1, lo%in, hi%in)
			return
		}
		if lo%in != 0 {
			cur[axis] = rlo
			rec(axis+1, lo%in, in)
			rlo++
		}
		if rlo < rhi {
			box(axis, rlo, rhi-rlo)
		}
		if hi%in != 0 {
			cur[axis] = rhi
			rec(axis+1, 0, hi%in)
		}
	}
	rec(0, lo, hi)
}

// addTransfers intersects a hyperslab with the chunk grid: the cartesian
// product of the chunk pieces along each axis.
func (l *Layout) addTransfers(p *GetItemPlan, m ChunkMap, h *Hyperslab) {
	nd := len(l.shape)
	type piece struct{ chunk, lo, hi int64 } // lo, hi relative to chunk origin
	pieces := make([][]piece, nd)
	for i := range nd {
		c := l.chunks[i]
		s, e := h.Start[i], h.Start[i]+h.Count[i]
		pieces[i] = make([]piece, 0, (e-1)/c-s/c+1)
		for g := s / c; g*c < e; g++ {
			pieces[i] = append(pieces[i], piece{g, max(s, g*c) - g*c, min(e, (g+1)*c) - g*c})
		}
	}
	// One allocation for the coordinates of all the hyperslab's transfers.
	total := 1
	for i := range nd {
		total *= len(pieces[i])
	}
	p.Transfers = slices.Grow(p.Transfers, total)
	coords := make([]int64, 3*nd*total)
	idx := make([]int, nd)
	for {
		buf := coords[: 3*nd : 3*nd]
		coords = coords[3*nd:]
		t := Transfer{
			Chunk:      buf[:nd:nd],
			Start:      buf[nd : 2*nd : 2*nd],
			Count:      buf[2*nd:],
			DstOff:     h.DstOff,
			DstStrides: l.strides,
			ByteLo:     h.ByteLo,
			ByteHi:     h.ByteHi,
		}
		var k int64
		for i := range nd {
			pc := pieces[i][idx[i]]
			t.Chunk[i], t.Start[i], t.Count[i] = pc.chunk, pc.lo, pc.hi-pc.lo
			t.DstOff += (pc.chunk*l.chunks[i] + pc.lo - h.Start[i]) * l.strides[i]
			k = k*l.grid[i] + pc.chunk
		}
		t.Slab, t.SlabOffset = m.Slabs[k], m.Offsets[k]
		p.Transfers = append(p.Transfers, t)

		i := nd - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < len(pieces[i]) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

// String renders the plan in the style of the design document. out[...] is
// indexed with array coordinates; the comment gives the output byte offset
// of the first byte written. Slab rows include the slab offset; the full
// slab is a single chunk at offset 0.
func (p *GetItemPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "GetItemPlan bytes [%d, %d) of shape %s chunks %s itemsize %d\n",
		p.Off, p.Off+p.N, Tuple(p.shape), Tuple(p.chunks), p.itemSize)
	fmt.Fprintf(&b, "# %d hyperslabs\n", len(p.Hyperslabs))
	for _, h := range p.Hyperslabs {
		fmt.Fprintf(&b, "out[%s]%s  # out byte %d\n",
			box(h.Start, h.Count, 0), p.window(h.ByteLo, h.ByteHi), h.DstOff+int64(h.ByteLo))
	}
	for i := 0; i < len(p.Transfers); {
		j := i
		for j < len(p.Transfers) && p.Transfers[j].Slab == p.Transfers[i].Slab {
			j++
		}
		fmt.Fprintf(&b, "# %d transfers from slabs[%d]%s\n", j-i, p.Transfers[i].Slab, slabKind(p.Transfers[i].Slab))
		for _, t := range p.Transfers[i:j] {
			global := make([]int64, len(t.Start))
			for k := range global {
				global[k] = t.Chunk[k]*p.chunks[k] + t.Start[k]
			}
			w := p.window(t.ByteLo, t.ByteHi)
			fmt.Fprintf(&b, "out[%s]%s = slabs[%d][%s]%s  # out byte %d\n",
				box(global, t.Count, 0), w, t.Slab, box(t.Start, t.Count, t.SlabOffset), w,
				t.DstOff+int64(t.ByteLo))
		}
		i = j
	}
	return b.String()
}

// window renders a sub-element byte window, or nothing for whole elements.
func (p *GetItemPlan) window(lo, hi int) string {
	if lo == 0 && hi == p.itemSize {
		return ""
	}
	return fmt.Sprintf(".bytes[%d:%d]", lo, hi)
}

func slabKind(s int32) string {
	switch s {
	case FullSlab:
		return " (fill)"
	case BaseSlab:
		return " (base)"
	}
	return " (staged)"
}

// box renders start:start+count per axis, shifting axis 0 by off0.
func box(start, count []int64, off0 int64) string {
	parts := make([]string, len(start))
	for i := range start {
		s := start[i]
		if i == 0 {
			s += off0
		}
		parts[i] = fmt.Sprintf("%d:%d", s, s+count[i])
	}
	return strings.Join(parts, ", ")
}

// BaseOffsets lists the distinct base slab offsets the plan reads, in order: the chunks
// of raw_data it needs, for a source that loads many at once.
func (p *GetItemPlan) BaseOffsets() []int64 {
	var out []int64
	for i := range p.Transfers {
		t := &p.Transfers[i]
		if t.Slab == BaseSlab && (len(out) == 0 || out[len(out)-1] != t.SlabOffset) {
			out = append(out, t.SlabOffset)
		}
	}
	return out
}
