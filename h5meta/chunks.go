package h5meta

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

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
	l, err := f.layoutOf(ohdr, classChunked)
	if err != nil {
		return nil, err
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

// chunkNode is one decoded node of a version 1 B-tree of chunks: entry i is the chunk (at a
// leaf) or the subtree (above) whose chunk offsets start at key i.
type chunkNode struct {
	level    int
	keys     []int64 // n keys of rank offsets each
	children []uint64
	sizes    []uint32
	masks    []uint32
}

func (nd *chunkNode) key(i, rank int) []int64 { return nd.keys[i*rank : (i+1)*rank] }

// chunkNode reads the B-tree node at addr, whose level must be want (any level at the root:
// want < 0).
func (f *File) chunkNode(addr uint64, want, rank int) (*chunkNode, error) {
	hdrLen := 8 + 2*f.so
	hdr, err := f.read(addr, hdrLen, "B-tree node")
	if err != nil {
		return nil, err
	}
	b := &buf{b: hdr, what: "B-tree node", at: addr}
	b.signature("TREE")
	typ, level, n := b.u8(), int(b.u8()), int(b.u16())
	if b.err != nil {
		return nil, b.err
	}
	if typ != 1 {
		return nil, fmt.Errorf("node at %d has type %d, want 1 (raw data chunks)", addr, typ)
	}
	if want >= 0 && level != want {
		return nil, fmt.Errorf("node at %d has level %d, want %d", addr, level, want)
	}
	if level > maxBTreeLevel {
		return nil, fmt.Errorf("node at %d has level %d", addr, level)
	}
	keyLen := 8 + 8*(rank+1)
	raw, err := f.read(addr+uint64(hdrLen), n*(keyLen+f.so)+keyLen, "B-tree node")
	if err != nil {
		return nil, err
	}
	nd := &chunkNode{level: level, keys: make([]int64, n*rank), children: make([]uint64, n), sizes: make([]uint32, n), masks: make([]uint32, n)}
	b = &buf{b: raw, what: "B-tree node", at: addr}
	for i := 0; i < n; i++ {
		nd.sizes[i] = uint32(b.u32())
		nd.masks[i] = uint32(b.u32())
		for d := range rank {
			v := b.u64()
			if v >= maxCoord {
				return nil, fmt.Errorf("node at %d: chunk offset %d out of range", addr, v)
			}
			nd.keys[i*rank+d] = int64(v)
		}
		b.skip(8) // element offset within the chunk: always 0
		nd.children[i] = b.offset(f.so)
		if b.err != nil {
			return nil, b.err
		}
		if level == 0 && nd.children[i] >= maxCoord {
			return nil, fmt.Errorf("node at %d: chunk address %d out of range", addr, nd.children[i])
		}
	}
	return nd, nil
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
	if w.seen[addr] {
		return fmt.Errorf("node at %d is reached twice", addr)
	}
	w.seen[addr] = true
	nd, err := w.f.chunkNode(addr, want, w.rank)
	if err != nil {
		return err
	}
	for i, child := range nd.children {
		if nd.level == 0 {
			off := slices.Clone(nd.key(i, w.rank))
			w.out = append(w.out, Chunk{Offset: off, Addr: int64(child), Size: int64(nd.sizes[i]), FilterMask: nd.masks[i]})
			continue
		}
		if err := w.node(child, nd.level-1); err != nil {
			return err
		}
	}
	return nil
}

// ChunkIndex finds single chunks of a chunked dataset by their offset. A version 1 B-tree
// (what versioned-hdf5's raw_data datasets have) is descended from its root for each
// lookup, keeping the nodes read: the first chunk of a dataset of 100k chunks costs a few
// node reads, not a walk of the whole index. Other index types are listed whole on first
// use. Safe for concurrent use; it reads the file as it was when the index was made, so a
// writer that changes the index must make a new one.
type ChunkIndex struct {
	f    *File
	ohdr uint64
	rank int
	root uint64 // the B-tree's root; 0 when not a B-tree

	mu     sync.Mutex
	nodes  map[uint64]*chunkNode // GUARDED_BY(mu)
	listed bool                  // other index types: list and err are set; GUARDED_BY(mu)
	list   []Chunk               // every chunk, sorted; GUARDED_BY(mu)
	err    error                 // listing them failed; GUARDED_BY(mu)
}

// ChunkIndex returns the chunk index of the chunked dataset whose object header is at ohdr,
// with the same errors as Chunks for layouts it cannot read.
func (f *File) ChunkIndex(ohdr uint64) (*ChunkIndex, error) {
	l, err := f.layoutOf(ohdr, classChunked)
	if err != nil {
		return nil, err
	}
	x := &ChunkIndex{f: f, ohdr: ohdr, rank: len(l.dims), nodes: map[uint64]*chunkNode{}}
	if l.idxType == 0 && l.idxAddr != f.undef() && !slices.Contains(l.dims, 0) {
		x.root = l.idxAddr
	}
	return x, nil
}

// Lookup returns the chunk whose first element is at offset off; ok is false when no chunk
// is stored there.
func (x *ChunkIndex) Lookup(off []int64) (c Chunk, ok bool, err error) {
	if len(off) != x.rank {
		return Chunk{}, false, fmt.Errorf("h5meta: chunk offset %v for a dataset of rank %d", off, x.rank)
	}
	if x.root == 0 {
		return x.lookupList(off)
	}
	nd, i, err := x.leaf(off)
	if err != nil || nd == nil || !slices.Equal(nd.key(i, x.rank), off) {
		return Chunk{}, false, err
	}
	return Chunk{Offset: slices.Clone(off), Addr: int64(nd.children[i]), Size: int64(nd.sizes[i]), FilterMask: nd.masks[i]}, true, nil
}

// LookupRows finds the chunks whose first elements are at rows[i] on the first axis and 0
// on the others, as Lookup, into out[i] (Offset left nil); found is false, with out
// partly set, as soon as one is missing. A B-tree is descended once per leaf: rows in the
// leaf of the row before (a sequential read's) cost a step or a search of that leaf.
func (x *ChunkIndex) LookupRows(rows []int64, out []Chunk) (found bool, err error) {
	off := make([]int64, x.rank)
	if x.root == 0 {
		for i, r := range rows {
			off[0] = r
			c, ok, err := x.lookupList(off)
			if err != nil || !ok {
				return false, err
			}
			out[i] = Chunk{Addr: c.Addr, Size: c.Size, FilterMask: c.FilterMask}
		}
		return true, nil
	}
	var leaf *chunkNode
	at := 0 // entry of leaf that held the row before
	for i, r := range rows {
		off[0] = r
		switch {
		case leaf == nil || !leaf.covers(off, x.rank):
			if leaf, at, err = x.leaf(off); err != nil || leaf == nil {
				return false, err
			}
		case at+1 < len(leaf.children) && slices.Equal(leaf.key(at+1, x.rank), off):
			at++
		default:
			at = leaf.last(off, x.rank)
		}
		if !slices.Equal(leaf.key(at, x.rank), off) {
			return false, nil
		}
		out[i] = Chunk{Addr: int64(leaf.children[at]), Size: int64(leaf.sizes[at]), FilterMask: leaf.masks[at]}
	}
	return true, nil
}

// last returns the last entry whose key is at most off, or -1.
func (nd *chunkNode) last(off []int64, rank int) int {
	return sort.Search(len(nd.children), func(i int) bool { return slices.Compare(nd.key(i, rank), off) > 0 }) - 1
}

// covers reports whether off lies between a leaf's first and last keys: the chunk at off,
// if there is one, is then in it.
func (nd *chunkNode) covers(off []int64, rank int) bool {
	n := len(nd.children)
	return n > 0 && slices.Compare(nd.key(0, rank), off) <= 0 && slices.Compare(off, nd.key(n-1, rank)) <= 0
}

// leaf descends the B-tree to the leaf that holds the chunk at off, if any, and the entry
// of that leaf whose key is the last at most off; a nil leaf when no leaf can hold it.
func (x *ChunkIndex) leaf(off []int64) (*chunkNode, int, error) {
	addr, want := x.root, -1
	for {
		nd, err := x.node(addr, want)
		if err != nil {
			return nil, 0, fmt.Errorf("h5meta: chunk B-tree of dataset at %d: %w", x.ohdr, err)
		}
		i := nd.last(off, x.rank)
		if i < 0 {
			return nil, 0, nil
		}
		if nd.level == 0 {
			return nd, i, nil
		}
		// Levels strictly decrease (chunkNode checks want), which bounds this loop.
		addr, want = nd.children[i], nd.level-1
	}
}

func (x *ChunkIndex) node(addr uint64, want int) (*chunkNode, error) {
	x.mu.Lock()
	nd := x.nodes[addr]
	x.mu.Unlock()
	if nd != nil {
		if want >= 0 && nd.level != want {
			return nil, fmt.Errorf("node at %d has level %d, want %d", addr, nd.level, want)
		}
		return nd, nil
	}
	nd, err := x.f.chunkNode(addr, want, x.rank)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.nodes[addr] = nd
	x.mu.Unlock()
	return nd, nil
}

func (x *ChunkIndex) lookupList(off []int64) (Chunk, bool, error) {
	x.mu.Lock()
	if !x.listed {
		x.listed = true
		x.list, x.err = x.f.Chunks(x.ohdr)
		slices.SortFunc(x.list, func(a, b Chunk) int { return slices.Compare(a.Offset, b.Offset) })
	}
	list, err := x.list, x.err
	x.mu.Unlock()
	if err != nil {
		return Chunk{}, false, err
	}
	i, ok := slices.BinarySearchFunc(list, off, func(c Chunk, off []int64) int { return slices.Compare(c.Offset, off) })
	if !ok {
		return Chunk{}, false, nil
	}
	return list[i], true, nil
}
