package h5meta

import "fmt"

// Chunk is one allocated chunk of a chunked dataset.
type Chunk struct {
	Offset     []int64 // logical coordinates of the chunk's first element (multiples of chunk dims)
	Addr       int64   // address of the stored chunk, relative to File.Base (as H5Dget_chunk_info)
	Size       int64   // stored size in bytes
	FilterMask uint32  // filters skipped for this chunk
}

// maxBTreeLevel bounds the depth of a version 1 B-tree (libhdf5 trees are far shallower).
const maxBTreeLevel = 64

// Chunks lists every allocated chunk of the chunked dataset whose object header is at
// ohdr, by walking its chunk index once, in index order (the order of
// H5Dget_chunk_info's indexes for the version 1 B-tree). It returns an error wrapping
// ErrUnsupported when the layout is not chunked or its index type is not supported.
func (f *File) Chunks(ohdr uint64) ([]Chunk, error) {
	l, err := f.layout(ohdr)
	if err != nil {
		return nil, err
	}
	if l.class != classChunked {
		return nil, fmt.Errorf("h5meta: dataset at %d: layout class %d is not chunked: %w", ohdr, l.class, ErrUnsupported)
	}
	for d, c := range l.dims {
		if c == 0 {
			return nil, fmt.Errorf("h5meta: dataset at %d: chunk dimension %d is 0", ohdr, d)
		}
	}
	chunks := []Chunk{}
	if l.idxAddr == f.undef() {
		return chunks, nil // no storage allocated
	}
	switch l.idxType {
	case 0:
		w := &btreeWalk{f: f, rank: len(l.dims), seen: map[uint64]bool{}, out: chunks}
		if err := w.node(l.idxAddr, -1); err != nil {
			return nil, fmt.Errorf("h5meta: chunk B-tree of dataset at %d: %w", ohdr, err)
		}
		return w.out, nil
	case idxSingle:
		size := l.elemSize
		for _, c := range l.dims {
			if size > maxCoord/c {
				return nil, fmt.Errorf("h5meta: dataset at %d: chunk size overflows", ohdr)
			}
			size *= c
		}
		c := Chunk{Offset: make([]int64, len(l.dims)), Addr: int64(l.idxAddr), Size: int64(size)}
		if l.flags&0x02 != 0 {
			c.Size, c.FilterMask = int64(l.singleSize), l.singleMask
		}
		if c.Addr < 0 || c.Size < 0 {
			return nil, fmt.Errorf("h5meta: single chunk of dataset at %d: address %d size %d out of range", ohdr, l.idxAddr, c.Size)
		}
		return append(chunks, c), nil
	case idxFixedArray, idxExtArray:
		dims, maxdims, err := f.dataspace(ohdr)
		if err != nil {
			return nil, err
		}
		if len(dims) != len(l.dims) {
			return nil, fmt.Errorf("h5meta: dataset at %d: rank %d, chunk rank %d", ohdr, len(dims), len(l.dims))
		}
		if l.idxType == idxFixedArray {
			return f.fixedArrayChunks(ohdr, l, dims, maxdims)
		}
		return f.extArrayChunks(ohdr, l, dims, maxdims)
	}
	return nil, fmt.Errorf("h5meta: dataset at %d: chunk index type %d: %w", ohdr, l.idxType, ErrUnsupported)
}

type btreeWalk struct {
	f    *File
	rank int
	seen map[uint64]bool
	out  []Chunk
}

// node appends the chunks under the B-tree node at addr, whose level must be want (any
// level at the root: want < 0). Levels strictly decrease, which bounds the recursion.
func (w *btreeWalk) node(addr uint64, want int) error {
	f := w.f
	if w.seen[addr] {
		return fmt.Errorf("node at %d is reached twice", addr)
	}
	w.seen[addr] = true
	hdrLen := 8 + 2*f.so
	hdr, err := f.read(addr, hdrLen, "B-tree node")
	if err != nil {
		return err
	}
	b := &buf{b: hdr, what: "B-tree node", at: addr}
	b.signature("TREE")
	typ, level, n := b.u8(), int(b.u8()), int(b.u16())
	if b.err != nil {
		return b.err
	}
	if typ != 1 {
		return fmt.Errorf("node at %d has type %d, want 1 (raw data chunks)", addr, typ)
	}
	if want >= 0 && level != want {
		return fmt.Errorf("node at %d has level %d, want %d", addr, level, want)
	}
	if level > maxBTreeLevel {
		return fmt.Errorf("node at %d has level %d", addr, level)
	}
	nd := w.rank + 1
	keyLen := 8 + 8*nd
	raw, err := f.read(addr+uint64(hdrLen), n*(keyLen+f.so)+keyLen, "B-tree node")
	if err != nil {
		return err
	}
	b = &buf{b: raw, what: "B-tree node", at: addr}
	for i := 0; i < n; i++ {
		size := b.u32()
		mask := uint32(b.u32())
		off := make([]int64, w.rank)
		for d := range off {
			v := b.u64()
			if v >= maxCoord {
				return fmt.Errorf("node at %d: chunk offset %d out of range", addr, v)
			}
			off[d] = int64(v)
		}
		b.skip(8) // element offset within the chunk: always 0
		child := b.offset(f.so)
		if b.err != nil {
			return b.err
		}
		if level == 0 {
			if child >= maxCoord {
				return fmt.Errorf("node at %d: chunk address %d out of range", addr, child)
			}
			w.out = append(w.out, Chunk{Offset: off, Addr: int64(child), Size: int64(size), FilterMask: mask})
			continue
		}
		if err := w.node(child, level-1); err != nil {
			return err
		}
	}
	return nil
}
