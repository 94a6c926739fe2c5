package h5meta

import "fmt"

// Layout classes.
const (
	classCompact    = 0
	classContiguous = 1
	classChunked    = 2
	classVirtual    = 3
)

// Chunk index types of layout message version 4.
const (
	idxSingle     = 1
	idxImplicit   = 2
	idxFixedArray = 3
	idxExtArray   = 4
	idxBTree2     = 5
)

// layout is a decoded data layout message (only the fields used here).
type layout struct {
	version int
	class   int

	// chunked
	dims     []uint64 // chunk dims, without the element size
	elemSize uint64
	idxType  int    // 0 for the version 1 B-tree of layout version 3
	idxAddr  uint64 // index (or single chunk) address
	flags    uint8  // layout v4 flags
	// single chunk, filtered
	singleSize uint64
	singleMask uint32
	// fixed array: page bits
	faPageBits uint8
	// extensible array creation parameters
	eaMaxBits, eaIdxElmts, eaMinPtrs, eaMinElmts, eaPageBits uint8

	// virtual
	heapAddr  uint64
	heapIndex uint32
}

// layoutOf is the layout of the dataset at ohdr, which must be of class want (chunked or
// virtual); another class is ErrUnsupported.
func (f *File) layoutOf(ohdr uint64, want int) (*layout, error) {
	l, err := f.layout(ohdr)
	if err != nil {
		return nil, err
	}
	if l.class != want {
		name := "chunked"
		if want == classVirtual {
			name = "virtual"
		}
		return nil, fmt.Errorf("h5meta: dataset at %d: layout class %d is not %s: %w", ohdr, l.class, name, ErrUnsupported)
	}
	return l, nil
}

func (f *File) layout(ohdr uint64) (*layout, error) {
	data, err := f.message(ohdr, msgLayout, "data layout")
	if err != nil {
		return nil, err
	}
	b := &buf{b: data, what: "layout message of the object", at: ohdr}
	l := &layout{version: int(b.u8()), class: int(b.u8())}
	if b.err != nil {
		return nil, b.err
	}
	if l.version != 3 && l.version != 4 {
		return nil, fmt.Errorf("h5meta: layout message of %d: version %d: %w", ohdr, l.version, ErrUnsupported)
	}
	switch l.class {
	case classChunked:
		if l.version == 3 {
			nd := int(b.u8())
			l.idxAddr = b.offset(f.so)
			if b.err == nil && (nd < 2 || nd > maxRank+1) {
				return nil, fmt.Errorf("h5meta: layout message of %d: chunk dimensionality %d", ohdr, nd)
			}
			all := make([]uint64, 0, nd)
			for range nd {
				all = append(all, b.u32())
			}
			if b.err != nil {
				return nil, b.err
			}
			l.dims, l.elemSize = all[:nd-1], all[nd-1]
			return l, nil
		}
		l.flags = uint8(b.u8())
		nd := int(b.u8())
		enc := int(b.u8())
		if b.err == nil && (nd < 2 || nd > maxRank+1 || enc < 1 || enc > 8) {
			return nil, fmt.Errorf("h5meta: layout message of %d: chunk dimensionality %d, encoded size %d", ohdr, nd, enc)
		}
		all := make([]uint64, 0, nd)
		for range nd {
			all = append(all, b.uint(enc))
		}
		l.idxType = int(b.u8())
		switch l.idxType {
		case idxSingle:
			if l.flags&0x02 != 0 {
				l.singleSize = b.uint(f.sl)
				l.singleMask = uint32(b.u32())
			}
		case idxImplicit:
		case idxFixedArray:
			l.faPageBits = uint8(b.u8())
		case idxExtArray:
			l.eaMaxBits, l.eaIdxElmts, l.eaMinPtrs = uint8(b.u8()), uint8(b.u8()), uint8(b.u8())
			l.eaMinElmts, l.eaPageBits = uint8(b.u8()), uint8(b.u8())
		case idxBTree2:
			b.skip(6)
		default:
			if b.err == nil {
				return nil, fmt.Errorf("h5meta: layout message of %d: chunk index type %d: %w", ohdr, l.idxType, ErrUnsupported)
			}
		}
		l.idxAddr = b.offset(f.so)
		if b.err != nil {
			return nil, b.err
		}
		l.dims, l.elemSize = all[:nd-1], all[nd-1]
		return l, nil
	case classVirtual:
		l.heapAddr = b.offset(f.so)
		l.heapIndex = uint32(b.u32())
		return l, b.err
	case classCompact, classContiguous:
		return l, nil
	}
	return nil, fmt.Errorf("h5meta: layout message of %d: class %d: %w", ohdr, l.class, ErrUnsupported)
}
