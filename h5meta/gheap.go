package h5meta

import "fmt"

// The global heap holds variable-length strings and virtual datasets' mapping lists: objects
// addressed by a collection ("GCOL") and an index in it.

// largeHeap is the collection size from which an object is mapped on its own (see
// MappingList) rather than read with its whole collection: a list of 10k mappings is
// about 1 MB, which a fresh process takes about 0.7 ms longer to copy (page faults on new
// memory) than to map; 100k mappings are about 12 MB.
const largeHeap = 64 << 10

// globalHeapObject returns object index idx of the global heap collection at addr.
func (f *File) globalHeapObject(addr uint64, idx uint32) ([]byte, error) {
	c, err := f.globalHeap(addr)
	if err != nil {
		return nil, err
	}
	if idx >= uint32(len(c.objs)) || c.objs[idx] == (heapSpan{}) {
		return nil, fmt.Errorf("h5meta: global heap collection at %d has no object %d", addr, idx)
	}
	o := c.objs[idx]
	return c.raw[o.data : o.data+o.n], nil
}

// globalHeap returns the global heap collection at addr, walked and indexed. The last few
// read are kept: consecutive objects (the strings of one group after another) are usually
// in one, and callers walking a long list of groups split it between a few goroutines.
func (f *File) globalHeap(addr uint64) (*heapCollection, error) {
	f.heapMu.Lock()
	for _, c := range f.heaps {
		if c != nil && c.addr == addr {
			f.heapMu.Unlock()
			return c, nil
		}
	}
	f.heapMu.Unlock()
	size, err := f.heapSize(addr)
	if err != nil {
		return nil, err
	}
	raw, err := f.read(addr, int(size), "global heap collection")
	if err != nil {
		return nil, err
	}
	c := &heapCollection{addr: addr, raw: raw}
	err = heapObjects(size, f.sl, func(p uint64) ([]byte, error) { return raw[p:], nil }, func(i uint16, data, n uint64) bool {
		if int(i) >= len(c.objs) {
			c.objs = append(c.objs, make([]heapSpan, int(i)+1-len(c.objs))...)
		}
		if c.objs[i] == (heapSpan{}) { // the first of two objects of one index, as a walk finds it
			c.objs[i] = heapSpan{data, n}
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("h5meta: global heap collection at %d: %w", addr, err)
	}
	f.heapMu.Lock()
	f.heaps[f.heapNext] = c
	f.heapNext = (f.heapNext + 1) % len(f.heaps)
	f.heapMu.Unlock()
	return c, nil
}

// heapSize reads the header of the global heap collection at addr: its size in bytes.
func (f *File) heapSize(addr uint64) (uint64, error) {
	hdr, err := f.read(addr, 8+f.sl, "global heap collection")
	if err != nil {
		return 0, err
	}
	b := &buf{b: hdr, what: "global heap collection", at: addr}
	b.signature("GCOL")
	if v := b.u8(); v != 1 && b.err == nil {
		return 0, fmt.Errorf("h5meta: global heap collection at %d: version %d: %w", addr, v, ErrUnsupported)
	}
	b.skip(3)
	size := b.uint(f.sl)
	if b.err != nil {
		return 0, b.err
	}
	if size > maxRead || size < uint64(8+f.sl) {
		return 0, fmt.Errorf("h5meta: global heap collection at %d: size %d", addr, size)
	}
	return size, nil
}

// heapObject finds object idx in the global heap collection at addr of size bytes, whose
// object headers header(p) returns (at least the header at offset p): the offset of the
// object's data in the collection and its length. The collection is walked to its end, as
// globalHeap walks the ones it reads.
func (f *File) heapObject(addr, size uint64, idx uint32, header func(p uint64) ([]byte, error)) (data, n uint64, err error) {
	found := false
	err = heapObjects(size, f.sl, header, func(i uint16, d, l uint64) bool {
		if !found && uint32(i) == idx {
			data, n, found = d, l, true
		}
		return true
	})
	if err != nil {
		return 0, 0, fmt.Errorf("h5meta: global heap collection at %d: %w", addr, err)
	}
	if !found {
		return 0, 0, fmt.Errorf("h5meta: global heap collection at %d has no object %d", addr, idx)
	}
	return data, n, nil
}

// heapObjects walks the objects of a global heap collection of size bytes as libhdf5 does
// when it loads one (H5HG__cache_heap_deserialize) and refuses what would stop that walk
// from ending at the collection's end: libhdf5 1.10 loops forever on a free-space object of
// size 0 (its step is the size), which a torn write can leave. header(p) returns at least
// the header of the object at offset p. visit, if set, is called with each object before
// the free space: its index, the offset of its data and its length; the walk stops early
// when it returns false.
func heapObjects(size uint64, sl int, header func(p uint64) ([]byte, error), visit func(idx uint16, data, n uint64) bool) error {
	hdr := uint64(8 + sl) // index, references, reserved, size; then the object's data
	free := false
	for p := hdr; p < size; {
		if p+hdr > size {
			return nil // too small for an object header: free space
		}
		raw, err := header(p)
		if err != nil {
			return err
		}
		b := &buf{b: raw, what: "global heap object header"}
		idx := uint16(b.u16())
		b.skip(6)
		n := b.uint(sl)
		if b.err != nil {
			return b.err
		}
		need := n
		if idx > 0 {
			need = hdr + (n+7)&^7
		} else {
			free = true
		}
		if n > size || need == 0 || need > size-p {
			return fmt.Errorf("object %d at offset %d: size %d does not fit the collection (%d bytes)", idx, p, n, size)
		}
		if !free && visit != nil && !visit(idx, p+hdr, n) {
			return nil
		}
		p += need
	}
	return nil
}

// largeHeapObject locates object idx of the global heap collection at addr without reading
// the collection when the collection is large (largeHeap bytes or more): the file address
// of the object's data and its length. large is false for a smaller collection, which
// globalHeapObject reads whole.
func (f *File) largeHeapObject(addr uint64, idx uint32) (at, n uint64, large bool, err error) {
	size, err := f.heapSize(addr)
	if err != nil || size < largeHeap {
		return 0, 0, false, err
	}
	// Object headers are read through a window: a long object's collection holds it and the
	// free space after it, or a few more objects close together.
	var win []byte
	var winAt uint64
	header := func(p uint64) ([]byte, error) {
		if p < winAt || p+uint64(8+f.sl) > winAt+uint64(len(win)) {
			var err error
			if win, err = f.read(addr+p, int(min(4096, size-p)), "global heap collection"); err != nil {
				return nil, err
			}
			winAt = p
		}
		return win[p-winAt:], nil
	}
	data, n, err := f.heapObject(addr, size, idx, header)
	if err != nil {
		return 0, 0, false, err
	}
	return addr + data, n, true, nil
}
