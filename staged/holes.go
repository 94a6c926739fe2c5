package staged

import (
	"fmt"
	"slices"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkplan"
)

// holes records which bytes of a staged chunk were written since it left the base or the
// full slab, when a write covered it only partly (or covered an edge chunk that growing
// axis 0 may extend): the rest is still the base chunk's (or the fill value), read
// only when a read, the commit or an eviction needs those bytes (settle). A chunk that
// later writes complete never reads its base (for a compressed dataset, never decodes
// it), and is digested as soon as it is whole.
//
// A chunk with holes is always in memory (evicting it settles it first), and its trimmed
// extent only grows while it has them (a resize settles every chunk first, except that
// growing axis 0 keeps a fill chunk's holes: what it exposes is unwritten, the fill
// value), so the bytes that complete it are those of its current trimmed extent.
type holes struct {
	src     chunkmap.ChunkSource // the base chunk's source, as the write that staged it gave it; nil: the fill value
	base    int64                // the base chunk's offset on the base slab
	grid    []int64
	spans   []span // written byte ranges of the chunk buffer, sorted, disjoint, not adjacent
	written int64  // bytes in spans
}

type span struct{ lo, hi int64 }

// maxSpans bounds the written ranges a chunk keeps: a write that would leave more
// settles the chunk first (scattered small writes read the base once, as before).
const maxSpans = 256

// add records bytes [lo, hi) as written.
func (h *holes) add(lo, hi int64) {
	if lo >= hi {
		return
	}
	// Sequential writes append to the last span or after it: the common case is O(1).
	if n := len(h.spans); n == 0 || h.spans[n-1].hi < lo {
		h.spans = append(h.spans, span{lo, hi})
		h.written += hi - lo
		return
	} else if last := &h.spans[n-1]; last.lo <= lo {
		if hi > last.hi {
			h.written += hi - last.hi
			last.hi = hi
		}
		return
	}
	i, _ := slices.BinarySearchFunc(h.spans, lo, func(s span, lo int64) int {
		switch {
		case s.hi < lo:
			return -1
		case s.lo > lo:
			return 1
		}
		return 0
	})
	// Merge every span that overlaps or touches [lo, hi) into one.
	j := i
	for j < len(h.spans) && h.spans[j].lo <= hi {
		lo, hi = min(lo, h.spans[j].lo), max(hi, h.spans[j].hi)
		h.written -= h.spans[j].hi - h.spans[j].lo
		j++
	}
	h.spans = slices.Replace(h.spans, i, j, span{lo, hi})
	h.written += hi - lo
}

// holesOf is staged slab i's holes, or nil if it is whole.
func (a *Array) holesOf(i int32) *holes { return a.slabs[i].holes }

// setHoles records staged slab i's holes (nil: whole), counting the slabs with holes so
// that the calls that settle them all cost nothing when there are none.
func (a *Array) setHoles(i int32, h *holes) {
	switch old := a.slabs[i].holes; {
	case old == nil && h != nil:
		a.nHoles++
	case old != nil && h == nil:
		a.nHoles--
	}
	a.slabs[i].holes = h
}

// complete drops slab i's holes once its trimmed extent is all written, and reports
// whether it did. A fill chunk that growing axis 0 may still extend to its full shape (a
// file written at its end) keeps them: it is whole only once the writes fill it.
func (a *Array) complete(i int32) bool {
	h := a.holesOf(i)
	if h == nil {
		return false
	}
	l := a.Layout().Trimmed(h.grid)
	if h.written != chunkplan.Elements(l)*int64(a.ItemSize()) || (h.src == nil && a.mayGrow(l)) {
		return false
	}
	a.setHoles(i, nil)
	return true
}

// mayGrow reports whether a chunk of trimmed extent l becomes whole as axis 0 grows: it
// is short on axis 0 alone.
func (a *Array) mayGrow(l []int64) bool {
	return l[0] < a.Layout().Chunks()[0] && slices.Equal(l[1:], a.Layout().Chunks()[1:])
}

// fillHoles puts the base chunk's bytes (or the fill value) into data wherever h records
// no write.
func (a *Array) fillHoles(h *holes, data []byte) error {
	gap := func(lo, hi int64) { a.FillBytes(data[lo:hi], int(lo%int64(a.ItemSize()))) }
	if h.src != nil {
		base, err := a.chunkData(h.grid, chunkplan.BaseSlab, h.base, h.src)
		if err != nil {
			return err
		}
		gap = func(lo, hi int64) { copy(data[lo:hi], base[lo:hi]) }
	}
	at := int64(0)
	for _, s := range h.spans {
		gap(at, s.lo)
		at = s.hi
	}
	gap(at, int64(len(data)))
	return nil
}

// settle fills staged slab i's holes from its base chunk: it is then an ordinary staged
// chunk. Its contents as read do not change, so a failure leaves the array as it was.
func (a *Array) settle(i int32) error {
	h := a.holesOf(i)
	if h == nil {
		return nil
	}
	if err := a.fillHoles(h, a.slabs[i].buf); err != nil {
		return fmt.Errorf("filling chunk %v from its base: %w", h.grid, err)
	}
	a.setHoles(i, nil)
	return nil
}

// settleAll settles every staged slab with holes.
func (a *Array) settleAll() error {
	if a.nHoles == 0 {
		return nil
	}
	for i := range a.slabs {
		if a.slabs[i].holes != nil {
			if err := a.settle(int32(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// withHoles is a copy of staged slab i's chunk data with its holes filled from the base,
// for readers, which must not modify the array.
func (a *Array) withHoles(h *holes, data []byte) ([]byte, error) {
	out := make([]byte, len(data))
	copy(out, data)
	if err := a.fillHoles(h, out); err != nil {
		return nil, fmt.Errorf("chunk %v: filling from its base: %w", h.grid, err)
	}
	return out, nil
}
