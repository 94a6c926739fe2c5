package h5meta

import (
	"encoding/binary"
	"fmt"
)

// Mapping mirrors one VDS mapping: the virtual selection and source selection as single
// regular blocks.
type Mapping struct {
	VStart, VCount      []int64 // block start and extent in the virtual dataset
	SrcFile, SrcDataset string
	SrcStart, SrcCount  []int64 // block start and extent in the source dataset
}

// Selection types (H5S_sel_type).
const (
	selNone   = 0
	selPoints = 1
	selHyper  = 2
	selAll    = 3
)

// maxCoord bounds decoded coordinates and extents so that sums and products cannot overflow.
const maxCoord = 1 << 62

// VirtualMappings decodes the layout message of the dataset whose object header is at
// address ohdr (as libhdf5's H5Oget_info reports it) and returns its mappings in stored
// order (the order of H5Pget_virtual_count's indexes). It returns an error wrapping
// ErrUnsupported when the layout is not virtual or a selection is not one regular block.
// A virtual "all" selection gives start 0 and count = the dataset's dims.
func (f *File) VirtualMappings(ohdr uint64) ([]Mapping, error) {
	l, err := f.Mappings(ohdr)
	if err != nil {
		return nil, err
	}
	if err := l.Verify(); err != nil {
		return nil, err
	}
	ms := make([]Mapping, 0, l.Len())
	for {
		m, ok, err := l.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return ms, nil
		}
		ms = append(ms, m)
	}
}

// MappingList decodes a virtual dataset's mapping list one mapping at a time, so that a
// reader can start on the first mappings of a long list before it has decoded the rest.
// Verify checks the list's checksum; a caller serves nothing decoded from it before
// Verify has succeeded. A MappingList is not safe for concurrent use, except that Verify
// may run alongside Next.
type MappingList struct {
	f    *File
	ohdr uint64
	obj  []byte // the list as stored, checksum included
	b    buf
	n, i uint64   // mappings in the list, mappings decoded
	prev Mapping  // the last one decoded: names repeat
	dims []uint64 // the VDS's dims, loaded when a virtual selection is "all"
	a    arena
}

// Mappings reads the mapping list of the virtual dataset whose object header is at ohdr
// and decodes its header (see VirtualMappings for the errors).
func (f *File) Mappings(ohdr uint64) (*MappingList, error) {
	l, err := f.layoutOf(ohdr, classVirtual)
	if err != nil {
		return nil, err
	}
	ml := &MappingList{f: f, ohdr: ohdr}
	if l.heapAddr == f.undef() {
		return ml, nil
	}
	if ml.obj, err = f.globalHeapObject(l.heapAddr, l.heapIndex); err != nil {
		return nil, fmt.Errorf("h5meta: mappings of dataset at %d: %w", ohdr, err)
	}
	if len(ml.obj) < 4 {
		return nil, fmt.Errorf("h5meta: mapping list of dataset at %d: %d bytes, too short for its checksum", ohdr, len(ml.obj))
	}
	ml.b = buf{b: ml.obj[:len(ml.obj)-4], what: "mapping list of the dataset", at: ohdr}
	b := &ml.b
	if v := b.u8(); v != 0 && b.err == nil {
		return nil, fmt.Errorf("h5meta: mapping list of dataset at %d: encoding version %d: %w", ohdr, v, ErrUnsupported)
	}
	ml.n = b.uint(f.sl)
	if b.err != nil {
		return nil, b.err
	}
	// Each entry takes at least 2 name bytes and two 16-byte selections.
	if ml.n > uint64(b.rest())/34 {
		return nil, fmt.Errorf("h5meta: mapping list of dataset at %d: %d entries do not fit in %d bytes", ohdr, ml.n, b.rest())
	}
	return ml, nil
}

// Len is the number of mappings in the list.
func (l *MappingList) Len() int { return int(l.n) }

// Verify checks the checksum that ends the list, as libhdf5 does before it decodes one: a
// list whose bytes changed is corrupt.
func (l *MappingList) Verify() error {
	if l.obj == nil {
		return nil
	}
	return verifyMappingList(l.obj, l.ohdr)
}

// Next decodes the next mapping; ok is false after the last one.
func (l *MappingList) Next() (m Mapping, ok bool, err error) {
	if l.i >= l.n {
		return Mapping{}, false, nil
	}
	f, b, i := l.f, &l.b, l.i
	m.SrcFile = b.cstringLike(l.prev.SrcFile)
	m.SrcDataset = b.cstringLike(l.prev.SrcDataset)
	var all bool
	m.SrcStart, m.SrcCount, all, err = f.selection(b, &l.a)
	if err != nil {
		return Mapping{}, false, fmt.Errorf("h5meta: mapping %d of dataset at %d: source selection: %w", i, l.ohdr, err)
	}
	if all {
		return Mapping{}, false, fmt.Errorf("h5meta: mapping %d of dataset at %d: source selection \"all\" (extent not stored): %w", i, l.ohdr, ErrUnsupported)
	}
	m.VStart, m.VCount, all, err = f.selection(b, &l.a)
	if err != nil {
		return Mapping{}, false, fmt.Errorf("h5meta: mapping %d of dataset at %d: virtual selection: %w", i, l.ohdr, err)
	}
	if all {
		if l.dims == nil {
			if l.dims, _, err = f.dataspace(l.ohdr); err != nil {
				return Mapping{}, false, err
			}
		}
		m.VStart = make([]int64, len(l.dims))
		m.VCount = make([]int64, len(l.dims))
		for d, x := range l.dims {
			if x >= maxCoord {
				return Mapping{}, false, fmt.Errorf("h5meta: dataset at %d: dimension %d is %d", l.ohdr, d, x)
			}
			m.VCount[d] = int64(x)
		}
	}
	if b.err != nil {
		return Mapping{}, false, b.err
	}
	l.i++
	l.prev = m
	return m, true, nil
}

// arena hands out small []int64 carved from large blocks: a list of 100k mappings needs
// 400k of them, and one allocation each dominated decoding.
type arena struct{ free []int64 }

func (a *arena) take(n int) []int64 {
	if len(a.free) < n {
		a.free = make([]int64, max(n, 1<<14))
	}
	s := a.free[:n:n]
	a.free = a.free[n:]
	return s
}

// selection decodes one serialized dataspace selection (H5S_SELECT_SERIALIZE) that is a
// single regular block. all reports an "all" selection (start and count are then nil).
func (f *File) selection(b *buf, a *arena) (start, count []int64, all bool, err error) {
	typ := b.u32()
	ver := b.u32()
	if b.err != nil {
		return nil, nil, false, b.err
	}
	switch typ {
	case selAll:
		b.skip(8) // reserved, length
		return nil, nil, true, b.err
	case selNone, selPoints:
		return nil, nil, false, fmt.Errorf("selection type %d: %w", typ, ErrUnsupported)
	case selHyper:
	default:
		return nil, nil, false, fmt.Errorf("unknown selection type %d", typ)
	}
	rank := 0
	enc := 4
	regular := false
	switch ver {
	case 1:
		b.skip(8) // reserved, length
		rank = int(b.u32())
	case 2:
		regular = b.u8()&1 != 0
		b.skip(4) // length
		rank = int(b.u32())
		enc = 8
	case 3:
		regular = b.u8()&1 != 0
		enc = int(b.u8())
		rank = int(b.u32())
		if b.err == nil && enc != 2 && enc != 4 && enc != 8 {
			return nil, nil, false, fmt.Errorf("hyperslab encoded size %d", enc)
		}
	default:
		return nil, nil, false, fmt.Errorf("hyperslab selection version %d: %w", ver, ErrUnsupported)
	}
	if b.err != nil {
		return nil, nil, false, b.err
	}
	if rank < 1 || rank > maxRank {
		return nil, nil, false, fmt.Errorf("hyperslab selection rank %d", rank)
	}
	unlim := uint64(1)<<(8*uint(enc)) - 1
	if enc == 8 {
		unlim = ^uint64(0)
	}
	start, count = a.take(rank), a.take(rank)
	if regular {
		if ver == 1 {
			return nil, nil, false, fmt.Errorf("regular flag in hyperslab version 1")
		}
		field, err := fields(b, enc, 4*rank)
		if err != nil {
			return nil, nil, false, err
		}
		for d := range rank {
			st, stride, cnt, blk := field.at(4*d), field.at(4*d+1), field.at(4*d+2), field.at(4*d+3)
			if cnt == unlim || blk == unlim {
				return nil, nil, false, fmt.Errorf("unlimited hyperslab: %w", ErrUnsupported)
			}
			if st >= maxCoord || cnt >= maxCoord || blk >= maxCoord {
				return nil, nil, false, fmt.Errorf("hyperslab coordinates out of range")
			}
			var ext uint64
			switch {
			case cnt == 1 || cnt == 0:
				ext = cnt * blk
			case stride == blk:
				if blk != 0 && cnt > maxCoord/blk {
					return nil, nil, false, fmt.Errorf("hyperslab extent overflows")
				}
				ext = cnt * blk
			default:
				return nil, nil, false, fmt.Errorf("strided hyperslab (stride %d, count %d, block %d): %w", stride, cnt, blk, ErrUnsupported)
			}
			if st+ext >= maxCoord {
				return nil, nil, false, fmt.Errorf("hyperslab coordinates out of range")
			}
			start[d], count[d] = int64(st), int64(ext)
		}
		return start, count, false, nil
	}
	if ver == 2 {
		return nil, nil, false, fmt.Errorf("irregular hyperslab version 2: %w", ErrUnsupported)
	}
	nblocks := b.uint(enc)
	if b.err != nil {
		return nil, nil, false, b.err
	}
	if nblocks != 1 {
		return nil, nil, false, fmt.Errorf("hyperslab of %d blocks: %w", nblocks, ErrUnsupported)
	}
	field, err := fields(b, enc, 2*rank)
	if err != nil {
		return nil, nil, false, err
	}
	for d := range rank {
		start[d] = int64(field.at(d)) // enc <= 4 or checked below
	}
	for d := range rank {
		end := field.at(rank + d)
		s := uint64(start[d])
		if enc == 8 && (s >= maxCoord || end >= maxCoord) {
			return nil, nil, false, fmt.Errorf("hyperslab coordinates out of range")
		}
		if end < s {
			return nil, nil, false, fmt.Errorf("hyperslab block ends (%d) before it starts (%d)", end, s)
		}
		count[d] = int64(end - s + 1)
	}
	return start, count, false, nil
}

// fields takes n fields of enc bytes each from b with one bounds check (a mapping list
// holds two selections per mapping, 100k mappings and more).
func fields(b *buf, enc, n int) (packed, error) {
	p := b.bytes(enc * n)
	return packed{p, enc}, b.err
}

// packed is a run of little-endian fields of enc bytes (2, 4 or 8).
type packed struct {
	p   []byte
	enc int
}

// at is field i.
func (f packed) at(i int) uint64 {
	switch f.enc {
	case 8:
		return binary.LittleEndian.Uint64(f.p[8*i:])
	case 4:
		return uint64(binary.LittleEndian.Uint32(f.p[4*i:]))
	}
	return uint64(binary.LittleEndian.Uint16(f.p[2*i:]))
}

// globalHeapObject returns object index idx of the global heap collection at addr.
func (f *File) globalHeapObject(addr uint64, idx uint32) ([]byte, error) {
	raw, err := f.globalHeap(addr)
	if err != nil {
		return nil, err
	}
	b := &buf{b: raw, what: "global heap collection", at: addr}
	b.skip(8 + f.sl)
	for b.rest() >= 8+f.sl {
		i := b.u16()
		b.skip(6) // reference count, reserved
		n := b.uint(f.sl)
		if b.err != nil {
			return nil, b.err
		}
		if i == 0 { // free space: the last object
			break
		}
		if n > uint64(b.rest()) {
			return nil, fmt.Errorf("h5meta: global heap collection at %d: object %d of %d bytes overruns the collection", addr, i, n)
		}
		if uint32(i) == idx {
			return b.bytes(int(n)), nil
		}
		pad := (n + 7) &^ 7
		if pad > uint64(b.rest()) {
			break
		}
		b.skip(int(pad))
	}
	return nil, fmt.Errorf("h5meta: global heap collection at %d has no object %d", addr, idx)
}

// globalHeap returns the global heap collection at addr. The last few read are kept:
// consecutive objects (the strings of one group after another) are usually in one, and
// callers walking a long list of groups split it between a few goroutines.
func (f *File) globalHeap(addr uint64) ([]byte, error) {
	f.heapMu.Lock()
	for _, h := range f.heaps {
		if h.addr == addr && h.raw != nil {
			f.heapMu.Unlock()
			return h.raw, nil
		}
	}
	f.heapMu.Unlock()
	hdr, err := f.read(addr, 8+f.sl, "global heap collection")
	if err != nil {
		return nil, err
	}
	b := &buf{b: hdr, what: "global heap collection", at: addr}
	b.signature("GCOL")
	if v := b.u8(); v != 1 && b.err == nil {
		return nil, fmt.Errorf("h5meta: global heap collection at %d: version %d: %w", addr, v, ErrUnsupported)
	}
	b.skip(3)
	size := b.uint(f.sl)
	if b.err != nil {
		return nil, b.err
	}
	if size > maxRead || size < uint64(8+f.sl) {
		return nil, fmt.Errorf("h5meta: global heap collection at %d: size %d", addr, size)
	}
	raw, err := f.read(addr, int(size), "global heap collection")
	if err != nil {
		return nil, err
	}
	if err := walkCollection(raw, f.sl); err != nil {
		return nil, fmt.Errorf("h5meta: global heap collection at %d: %w", addr, err)
	}
	f.heapMu.Lock()
	f.heaps[f.heapNext] = heapCollection{addr, raw}
	f.heapNext = (f.heapNext + 1) % len(f.heaps)
	f.heapMu.Unlock()
	return raw, nil
}

// walkCollection walks a global heap collection's objects as libhdf5 does when it loads one
// (H5HG__cache_heap_deserialize) and refuses what would stop that walk from ending at the
// collection's end: libhdf5 1.10 loops forever on a free-space object of size 0 (its step
// is the size), which a torn write can leave.
func walkCollection(raw []byte, sl int) error {
	hdr := 8 + sl // index, references, reserved, size; then the object's data
	for p := 8 + sl; p < len(raw); {
		if p+hdr > len(raw) {
			return nil // too small for an object header: free space
		}
		b := &buf{b: raw[p:]}
		idx := b.u16()
		b.skip(6)
		size := b.uint(sl)
		var need uint64
		if idx > 0 {
			need = uint64(hdr) + (size+7)&^7
		} else {
			need = size
		}
		if need == 0 || need > uint64(len(raw)-p) {
			return fmt.Errorf("object %d at offset %d: size %d does not fit the collection (%d bytes)", idx, p, size, len(raw))
		}
		p += int(need)
	}
	return nil
}

// Shape returns the current dimensions of the dataset whose object header is at ohdr.
func (f *File) Shape(ohdr uint64) ([]int64, error) {
	dims, _, err := f.dataspace(ohdr)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(dims))
	for i, d := range dims {
		out[i] = int64(d)
	}
	return out, nil
}
