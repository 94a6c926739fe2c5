// Package chunkplan plans reads and writes of a chunked n-D array in shapes, chunks and
// indices only, never touching the array's data: the counterpart of the plans of
// versioned-hdf5's StagedChangesArray. Package chunkmap executes read plans over the
// chunks' bytes and package staged write plans; chunkstore and versions plan the reads of
// stored datasets with them.
//
// # Layout
//
// A Layout is an array's geometry: its shape, chunk shape and item size, and what follows
// from them (the chunk grid, the byte size of the C-order stream, byte strides). Chunks
// are always stored with the full chunk shape C, even at the edges of the array; the
// trimmed extent of an edge chunk (Trimmed) is what lies inside the array, and bytes
// beyond it are padding, never read.
//
// # Slabs, slab_indices and slab_offsets
//
// Every chunk lies on a slab, a concatenation of chunks along axis 0 (an array of shape
// (n*C[0], C[1], ..., C[d-1])): slab 0 (FullSlab) is one read-only chunk entirely the fill
// value, slab 1 (BaseSlab) is the raw_data dataset on disk, and slabs 2 and up are staged
// slabs, held by package staged. A ChunkMap records where each chunk of the grid
// (flattened in C order) is: its slab index and the row offset of the chunk along axis 0
// within that slab (always 0 on the full slab). Several chunks may share one (slab,
// offset) pair: versioned-hdf5 deduplicates identical chunks in raw_data.
//
// # Plans
//
// GetItemPlan turns a byte range of the C-order stream of the array (what a FUSE read
// asks for) into rectangular hyperslabs of the array and then into per-chunk transfers
// grouped by source slab; SetItemPlan does the same for a write and says, per chunk
// touched, how the write treats it; Runs is the shortcut for layouts whose chunks are
// each one contiguous run of the stream. Plans are plain data and print with String for
// debugging.
//
// A Layout and the plans are immutable: slices they return are shared, to be read and
// never modified. Errors carry no package prefix: the caller that plans names the
// operation.
package chunkplan

import (
	"fmt"
	"math"
	"slices"
)

// Slab indices with a fixed meaning; indices >= 2 are staged slabs.
const (
	FullSlab = 0
	BaseSlab = 1
)

// ChunkMap is where every chunk of a Layout's grid lies, in C order over the grid:
// versioned-hdf5's slab_indices and slab_offsets, flattened. Plans read it and keep
// nothing of it.
type ChunkMap struct {
	Slabs   []int32 // slab index per chunk
	Offsets []int64 // row offset of the chunk along axis 0 in its slab
}

// Layout is the geometry of a chunked n-D array of fixed-size elements (see the package
// documentation). The zero Layout is not valid: make one with NewLayout.
type Layout struct {
	shape, chunks []int64
	itemSize      int
	grid          []int64 // chunks per axis: ceil(shape/chunks)
	nChunks       int64
	size          int64   // bytes of the C-order stream
	chunkBytes    int     // bytes of one full chunk
	rowBytes      int64   // bytes of one axis-0 row of a chunk (a slab row)
	chunkStrides  []int64 // byte strides inside a chunk buffer
	strides       []int64 // byte strides of the C-order stream
}

// NewLayout validates an array's shape, chunk shape and item size and returns their
// Layout. The chunk grid may hold at most math.MaxInt32 chunks, and a chunk at most
// math.MaxInt bytes.
func NewLayout(shape, chunks []int64, itemSize int) (Layout, error) {
	switch {
	case len(shape) == 0:
		return Layout{}, fmt.Errorf("shape must have at least one axis")
	case len(chunks) != len(shape):
		return Layout{}, fmt.Errorf("chunks %v has %d axes, shape %v has %d", chunks, len(chunks), shape, len(shape))
	case itemSize <= 0:
		return Layout{}, fmt.Errorf("item size %d must be positive", itemSize)
	}
	chunkElems := int64(1)
	var ok bool
	for _, c := range chunks {
		if c <= 0 {
			return Layout{}, fmt.Errorf("chunks %v must be positive", chunks)
		}
		if chunkElems, ok = mulCheck(chunkElems, c); !ok {
			return Layout{}, fmt.Errorf("chunks %v overflow", chunks)
		}
	}
	cb, ok := mulCheck(chunkElems, int64(itemSize))
	if !ok || cb > math.MaxInt {
		return Layout{}, fmt.Errorf("chunk %v with item size %d is too large", chunks, itemSize)
	}
	chunks = slices.Clone(chunks)
	l := Layout{
		chunks:       chunks,
		itemSize:     itemSize,
		chunkBytes:   int(cb),
		rowBytes:     cb / chunks[0],
		chunkStrides: byteStrides(chunks, itemSize),
	}
	return l.Reshape(shape)
}

// Reshape returns the Layout of the same chunk shape and item size for shape, which has
// as many axes.
func (l *Layout) Reshape(shape []int64) (Layout, error) {
	if len(shape) != len(l.chunks) {
		return Layout{}, fmt.Errorf("shape %v has %d axes, chunks %v have %d", shape, len(shape), l.chunks, len(l.chunks))
	}
	n := *l
	n.shape = slices.Clone(shape)
	n.grid = make([]int64, len(shape))
	elems, nChunks := int64(1), int64(1)
	var ok bool
	for i, s := range shape {
		if s < 0 {
			return Layout{}, fmt.Errorf("shape %v has a negative axis", shape)
		}
		n.grid[i] = (s + l.chunks[i] - 1) / l.chunks[i]
		if elems, ok = mulCheck(elems, s); !ok {
			return Layout{}, fmt.Errorf("shape %v overflows", shape)
		}
		if nChunks, ok = mulCheck(nChunks, n.grid[i]); !ok {
			return Layout{}, fmt.Errorf("chunk grid %v overflows", n.grid)
		}
	}
	if n.size, ok = mulCheck(elems, int64(l.itemSize)); !ok {
		return Layout{}, fmt.Errorf("size of shape %v with item size %d overflows", shape, l.itemSize)
	}
	if nChunks > math.MaxInt32 {
		return Layout{}, fmt.Errorf("%d chunks is too many", nChunks)
	}
	n.nChunks = nChunks
	n.strides = byteStrides(n.shape, l.itemSize)
	return n, nil
}

// Shape is the array's shape in elements.
func (l *Layout) Shape() []int64 { return l.shape }

// Chunks is the chunk shape in elements.
func (l *Layout) Chunks() []int64 { return l.chunks }

// Grid is the number of chunks along each axis: ceil(shape/chunks).
func (l *Layout) Grid() []int64 { return l.grid }

// ItemSize is the size of one element in bytes.
func (l *Layout) ItemSize() int { return l.itemSize }

// Size is the length in bytes of the C-order stream: prod(shape)*itemSize.
func (l *Layout) Size() int64 { return l.size }

// ChunkBytes is the size of one full chunk: prod(chunks)*itemSize.
func (l *Layout) ChunkBytes() int { return l.chunkBytes }

// RowBytes is the size of one row of a slab along axis 0: ChunkBytes()/chunks[0].
func (l *Layout) RowBytes() int64 { return l.rowBytes }

// NumChunks is the number of chunks in the chunk grid.
func (l *Layout) NumChunks() int64 { return l.nChunks }

// ChunkStrides are the byte strides of a chunk buffer (full chunk shape, C order).
func (l *Layout) ChunkStrides() []int64 { return l.chunkStrides }

// Strides are the byte strides of the array's C-order stream.
func (l *Layout) Strides() []int64 { return l.strides }

// Flat is the C-order flat index of grid index g, and whether g is a grid index.
func (l *Layout) Flat(g []int64) (k int64, ok bool) {
	if len(g) != len(l.grid) {
		return 0, false
	}
	for i, x := range g {
		if uint64(x) >= uint64(l.grid[i]) {
			return 0, false
		}
		k = k*l.grid[i] + x
	}
	return k, true
}

// FlatChunk is Flat with an error saying why g is not a grid index.
func (l *Layout) FlatChunk(g []int64) (int64, error) {
	if k, ok := l.Flat(g); ok {
		return k, nil
	}
	if len(g) != len(l.grid) {
		return 0, fmt.Errorf("chunk index %v has %d axes, array has %d", g, len(g), len(l.grid))
	}
	return 0, fmt.Errorf("chunk index %v out of range for chunk grid %v", g, l.grid)
}

// flatUnchecked is the C-order flat index of a valid grid index.
func (l *Layout) flatUnchecked(g []int64) int64 {
	var k int64
	for i, x := range g {
		k = k*l.grid[i] + x
	}
	return k
}

// Trimmed is the trimmed extent L of chunk grid index g (a valid one): L[i] = C[i],
// except for the last chunk along axis i where L[i] = S[i] - (ceil(S[i]/C[i])-1)*C[i].
func (l *Layout) Trimmed(g []int64) []int64 {
	t := make([]int64, len(g))
	for i := range g {
		t[i] = l.chunks[i]
		if g[i] == l.grid[i]-1 {
			t[i] = l.shape[i] - g[i]*l.chunks[i]
		}
	}
	return t
}

// Each calls fn for every chunk of m in C order of the chunk grid with its grid index (a
// buffer reused between calls: copy it to keep it), slab index and slab offset, and
// stops at and returns the first error fn returns.
func (l *Layout) Each(m ChunkMap, fn func(grid []int64, slab int32, off int64) error) error {
	nd := len(l.grid)
	g := make([]int64, nd)
	for k := range m.Slabs {
		if err := fn(g, m.Slabs[k], m.Offsets[k]); err != nil {
			return err
		}
		for i := nd - 1; i >= 0; i-- {
			if g[i]++; g[i] < l.grid[i] {
				break
			}
			g[i] = 0
		}
	}
	return nil
}

// linear is the C-order linear element index of coordinates c.
func (l *Layout) linear(c []int64) int64 {
	var k int64
	for i, x := range c {
		k = k*l.shape[i] + x
	}
	return k
}

// Elements is the number of elements of an extent (the product of its lengths; 1 for a
// rank-0 extent).
func Elements(xs []int64) int64 {
	p := int64(1)
	for _, x := range xs {
		p *= x
	}
	return p
}

// byteStrides returns C-order byte strides for shape with the given item size.
func byteStrides(shape []int64, itemSize int) []int64 {
	s := make([]int64, len(shape))
	acc := int64(itemSize)
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

func mulCheck(x, y int64) (int64, bool) {
	if x == 0 || y == 0 {
		return 0, true
	}
	if x > math.MaxInt64/y {
		return 0, false
	}
	return x * y, true
}
