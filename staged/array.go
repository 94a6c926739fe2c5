// Package staged is the Go counterpart of versioned-hdf5's StagedChangesArray:
// a chunked n-D array whose chunks live on "slabs", read (and later written)
// through plans.
//
// # Slabs
//
// A slab is a concatenation of chunks along axis 0, i.e. an array of shape
// (n*C[0], C[1], ..., C[d-1]) for chunk shape C. Every chunk of the virtual
// array lies on exactly one slab:
//
//   - slab 0 (FullSlab) is the full slab: one read-only chunk that is
//     entirely the fill value. It is never materialised; readers repeat
//     the fill element.
//   - slab 1 (BaseSlab) is the base slab: the raw_data dataset on disk.
//     Chunks are fetched through a ChunkSource.
//   - slabs 2 and up are staged slabs: writeable in-memory byte slices with
//     the same layout as raw_data. They are created by writes (WriteAt with
//     a SetItemPlan, and Resize) and discarded on commit (MarkClean). Writes
//     give every staged chunk a slab of its own (one chunk long), so memory
//     is only held for touched chunks and a chunk is freed individually;
//     staged chunks are never shared between grid positions. A chunk that
//     leaves the base or full slab through a partial write records which
//     bytes were written and reads its base chunk (or fills in the fill
//     value) only when the others are needed (holes.go). An array that uses
//     a Store (UseStore) keeps them under the store's memory budget: beyond
//     it its oldest staged chunks move to the store's spill file and are
//     read back when a read, a write or the commit needs them.
//
// # slab_indices and slab_offsets
//
// Two arrays with one entry per chunk of the chunk grid (flattened in C
// order) record where each chunk is: slabIndices[k] is the slab index and
// slabOffsets[k] is the row offset of the chunk along axis 0 within that
// slab (a multiple of C[0] in practice; always 0 on the full slab). Several
// chunks may share one (slab, offset) pair: versioned-hdf5 deduplicates
// identical chunks in raw_data.
//
// Chunks are always stored with the full chunk shape C, even at the edges of
// the array; bytes beyond the trimmed edge are padding and never read.
//
// # Plans
//
// Operations are split, as in the design, into a planning step that deals
// only in shapes, chunks and indices, and a dumb executor. GetItemPlan turns
// a byte range of the C-order stream of the array (what a FUSE read asks
// for) into rectangular hyperslabs of the array and then into per-chunk
// transfers grouped by source slab. Plans are plain data and can be printed
// with String for debugging, without touching any data. Array.ReadAt builds
// and executes a plan; Array.WriteAt does the same with a SetItemPlan.
//
// # Concurrency
//
// An Array does no locking. Concurrent ReadAt calls are safe with each
// other, but every mutation (WriteAt, Resize, MapBase, MapFull, MarkClean,
// and StagedChunks, which normalises padding in place) must be serialised
// by the caller against all other calls on the same Array, typically with a
// sync.RWMutex held by the file handle that owns it. The digest workers of a
// Store (SetDigester) only read a chunk's buffer; every call that changes or
// frees that buffer waits for its worker first.
package staged

import (
	"fmt"
	"math"
)

// Slab indices with a fixed meaning; indices >= 2 are staged slabs.
const (
	FullSlab = 0
	BaseSlab = 1
)

// ChunkSource loads chunks of the base slab. off is the row offset along
// axis 0 in the base slab (raw_data) as stored in slab_offsets. Chunk returns
// the whole chunk in C order with the full chunk shape C, ChunkBytes() long
// (padding beyond the trimmed edge may hold anything). The caller only reads
// the slice, so a source may hand out its cached, shared buffers.
type ChunkSource interface {
	Chunk(off int64) ([]byte, error)
}

// Array is a chunked n-D array of fixed-size elements whose chunks lie on
// slabs (see the package documentation). It is not safe for concurrent
// mutation; concurrent reads are fine (see Concurrency in the package
// documentation: the caller serialises writes against reads).
type Array struct {
	shape    []int64
	chunks   []int64
	itemSize int
	fill     []byte // one element

	grid        []int64 // chunks per axis: ceil(shape/chunks)
	slabIndices []int32 // per chunk, C order over grid
	slabOffsets []int64 // per chunk, row offset along axis 0 in its slab
	// slabs holds one record per slab index; 0 and 1 (the full and base slabs) are unused.
	slabs      []stagedSlab
	freeSlabs  []int32 // staged slab indices whose slab was dropped, for reuse
	nextSeq    uint64  // the next stagedSlab.seq
	op         uint64  // the operation under way (origin.go)
	nStaged    int64   // chunks whose slab index is >= 2
	store      *Store  // where staged chunks live under a memory budget (nil: memory only)
	sink       Sink    // where evicted chunks go first (UseSink), or nil
	sinkStop   bool    // the staging order's prefix in the sink ended: the rest spill, until MarkClean
	resident   []int32 // staged slabs in memory, oldest first (may hold stale entries)
	nHoles     int     // staged slabs with holes
	encode     Encoder // encodes wholly written chunks at write time (SetEncoder), or nil
	cleanShape []int64 // shape at New or the last MarkClean
	// dropped: a resize since New or the last MarkClean dropped a chunk that held data
	// (base or staged). Growing back to cleanShape then reads the fill value where that
	// data was, from chunks on the full slab, which neither nStaged nor the shape shows.
	dropped bool

	size         int64   // total bytes of the C-order stream
	chunkBytes   int     // bytes of one full chunk
	rowBytes     int64   // bytes of one axis-0 row of a chunk (slab row)
	chunkStrides []int64 // byte strides inside a chunk buffer
	dstStrides   []int64 // byte strides of the array's C-order stream
}

// stagedSlab is the state of one staged slab, which holds one chunk: where its bytes are
// (in memory, in the spill file or in the sink; none of them once dropped) and what is
// known about them. At most one of buf, spillOff and sunk is set.
type stagedSlab struct {
	buf []byte // the chunk in memory, or nil
	// seq orders staged slabs by creation (indices are reused, so they do not): the
	// order a sink takes chunks in (commits order them by origin, see Origin).
	seq    uint64
	origin Origin  // how its chunk was staged (origin.go)
	grid   []int64 // the grid index of the chunk last put on it by setChunk; empty: none
	// sunk is 1 + its sink reference while the sink holds the chunk, else 0.
	sunk int64
	// spillOff is 1 + its spill-file offset while spilled, -1 - that offset once
	// ReleaseSpilled gave the bytes up, else 0.
	spillOff int64
	job      *digestJob // its digest made at write time (digest.go), or nil
	holes    *holes     // the bytes written of a chunk whose base is not read yet (holes.go), or nil
}

// New returns an array whose chunks all lie on the full slab (read as fill).
// fill is one element (len == itemSize).
func New(shape, chunks []int64, itemSize int, fill []byte) (*Array, error) {
	nd := len(shape)
	switch {
	case nd == 0:
		return nil, fmt.Errorf("staged: new array: shape must have at least one axis")
	case len(chunks) != nd:
		return nil, fmt.Errorf("staged: new array: chunks %v has %d axes, shape %v has %d", chunks, len(chunks), shape, nd)
	case itemSize <= 0:
		return nil, fmt.Errorf("staged: new array: item size %d must be positive", itemSize)
	case len(fill) != itemSize:
		return nil, fmt.Errorf("staged: new array: fill value has %d bytes, item size is %d", len(fill), itemSize)
	}
	a := &Array{
		shape:      append([]int64(nil), shape...),
		chunks:     append([]int64(nil), chunks...),
		itemSize:   itemSize,
		fill:       append([]byte(nil), fill...),
		grid:       make([]int64, nd),
		cleanShape: append([]int64(nil), shape...),
		slabs:      make([]stagedSlab, 2),
	}
	elems, chunkElems, nChunks := int64(1), int64(1), int64(1)
	var ok bool
	for i := range nd {
		if shape[i] < 0 {
			return nil, fmt.Errorf("staged: new array: shape %v has a negative axis", shape)
		}
		if chunks[i] <= 0 {
			return nil, fmt.Errorf("staged: new array: chunks %v must be positive", chunks)
		}
		a.grid[i] = (shape[i] + chunks[i] - 1) / chunks[i]
		if elems, ok = mulCheck(elems, shape[i]); !ok {
			return nil, fmt.Errorf("staged: new array: shape %v overflows", shape)
		}
		if chunkElems, ok = mulCheck(chunkElems, chunks[i]); !ok {
			return nil, fmt.Errorf("staged: new array: chunks %v overflow", chunks)
		}
		if nChunks, ok = mulCheck(nChunks, a.grid[i]); !ok {
			return nil, fmt.Errorf("staged: new array: chunk grid %v overflows", a.grid)
		}
	}
	if a.size, ok = mulCheck(elems, int64(itemSize)); !ok {
		return nil, fmt.Errorf("staged: new array: size of shape %v with item size %d overflows", shape, itemSize)
	}
	cb, ok := mulCheck(chunkElems, int64(itemSize))
	if !ok || cb > math.MaxInt {
		return nil, fmt.Errorf("staged: new array: chunk %v with item size %d is too large", chunks, itemSize)
	}
	if nChunks > math.MaxInt32 {
		return nil, fmt.Errorf("staged: new array: %d chunks is too many", nChunks)
	}
	a.chunkBytes = int(cb)
	a.rowBytes = cb / chunks[0]
	a.chunkStrides = strides(a.chunks, itemSize)
	a.dstStrides = strides(a.shape, itemSize)
	// Zero-valued metadata means "every chunk on the full slab at offset 0".
	a.slabIndices = make([]int32, nChunks)
	a.slabOffsets = make([]int64, nChunks)
	return a, nil
}

// MapBase points chunk grid (one grid index per axis) at base slab row
// offset off. It is setChunk without the checks the base slab needs none of:
// loading a version calls it once per chunk, 100k times for a large one.
func (a *Array) MapBase(grid []int64, off int64) error {
	k, ok := a.flat(grid)
	if !ok || off < 0 {
		return a.mapBaseError(grid, off)
	}
	if a.slabIndices[k] >= 2 {
		a.nStaged--
	}
	a.slabIndices[k], a.slabOffsets[k] = BaseSlab, off
	return nil
}

// mapBaseError is MapBase's error, apart so that MapBase stays small enough to inline.
func (a *Array) mapBaseError(grid []int64, off int64) error {
	_, err := a.flatChunk(grid)
	if err == nil {
		err = fmt.Errorf("invalid offset %d on slab %d", off, BaseSlab)
	}
	return fmt.Errorf("staged: map base: %w", err)
}

// Shape returns a copy of the array shape in elements.
func (a *Array) Shape() []int64 { return append([]int64(nil), a.shape...) }

// Chunks returns a copy of the chunk shape in elements.
func (a *Array) Chunks() []int64 { return append([]int64(nil), a.chunks...) }

// Fill returns the fill value (one element).
func (a *Array) Fill() []byte { return append([]byte(nil), a.fill...) }

// ItemSize returns the size of one element in bytes.
func (a *Array) ItemSize() int { return a.itemSize }

// Size returns the length in bytes of the C-order stream: prod(shape)*itemSize.
func (a *Array) Size() int64 { return a.size }

// ChunkBytes returns the size of one full chunk: prod(chunks)*itemSize.
func (a *Array) ChunkBytes() int { return a.chunkBytes }

// NumChunks returns the number of chunks in the chunk grid.
func (a *Array) NumChunks() int64 { return int64(len(a.slabIndices)) }

// Slab returns (slab index, slab offset) of chunk grid index g, or (-1, -1)
// if g is not a valid grid index.
func (a *Array) Slab(grid []int64) (int32, int64) {
	k, err := a.flatChunk(grid)
	if err != nil {
		return -1, -1
	}
	return a.slabIndices[k], a.slabOffsets[k]
}

// setChunk points a chunk at (slab, off). Staged slabs must already exist
// and hold the whole chunk at off (staged slabs never grow).
func (a *Array) setChunk(grid []int64, slab int32, off int64) error {
	k, err := a.flatChunk(grid)
	if err != nil {
		return err
	}
	if slab < 0 || int(slab) >= len(a.slabs) {
		return fmt.Errorf("slab %d does not exist (%d slabs)", slab, len(a.slabs))
	}
	if off < 0 || (slab == FullSlab && off != 0) {
		return fmt.Errorf("invalid offset %d on slab %d", off, slab)
	}
	if slab >= 2 {
		data := a.slabs[slab].buf
		if a.gone(slab) {
			return fmt.Errorf("staged slab %d was dropped", slab)
		}
		if data != nil && off > (int64(len(data))-int64(a.chunkBytes))/a.rowBytes {
			return fmt.Errorf("offset %d overruns staged slab %d of %d bytes", off, slab, len(data))
		}
	}
	if a.slabIndices[k] >= 2 {
		a.nStaged--
	}
	if slab >= 2 {
		a.nStaged++
	}
	a.slabIndices[k] = slab
	a.slabOffsets[k] = off
	if slab >= 2 { // a chunk's grid index outlives resizes: the sink needs its extent
		a.slabs[slab].grid = append(a.slabs[slab].grid[:0], grid...)
	}
	return nil
}

// appendSlab adds a staged slab (layout of raw_data: chunks concatenated
// along axis 0) and returns its index. It is the hook for the write plans.
func (a *Array) appendSlab(data []byte) int32 {
	n := len(a.slabs)
	if n < cap(a.slabs) { // a record dropped by collectSlabs: its grid's memory is reused
		a.slabs = a.slabs[:n+1]
		a.slabs[n] = stagedSlab{buf: data, grid: a.slabs[n].grid[:0]}
	} else {
		a.slabs = append(a.slabs, stagedSlab{buf: data})
	}
	return int32(n)
}

// flatChunk validates a grid index and returns its C-order flat index.
func (a *Array) flatChunk(grid []int64) (int64, error) {
	if k, ok := a.flat(grid); ok {
		return k, nil
	}
	if len(grid) != len(a.grid) {
		return 0, fmt.Errorf("chunk index %v has %d axes, array has %d", grid, len(grid), len(a.grid))
	}
	return 0, fmt.Errorf("chunk index %v out of range for chunk grid %v", grid, a.grid)
}

// flat is flatChunk without its errors: the flat index, and whether grid is a grid index.
func (a *Array) flat(grid []int64) (k int64, ok bool) {
	if len(grid) != len(a.grid) {
		return 0, false
	}
	for i, g := range grid {
		if uint64(g) >= uint64(a.grid[i]) {
			return 0, false
		}
		k = k*a.grid[i] + g
	}
	return k, true
}

// strides returns C-order byte strides for shape with the given item size.
func strides(shape []int64, itemSize int) []int64 {
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
