// Package staged is the write buffer, the Go counterpart of versioned-hdf5's
// StagedChangesArray: a chunked n-D array whose chunks lie on slabs, with the bytes of the
// chunks a write changes held until a commit takes them. An Array is a chunkmap.Map (the
// geometry, the fill value, slab_indices and slab_offsets, and the reads through a
// ChunkSource) that writes point at staged slabs of its own; it starts from a version's
// map (FromMap) or from fill (New). Package chunkplan plans the writes; this package
// executes them and keeps the staged chunks' bytes.
//
// # Slabs
//
// Every chunk of the array lies on one slab (chunkplan's package documentation):
//
//   - slab 0 (chunkplan.FullSlab) is the full slab: one read-only chunk that is
//     entirely the fill value. It is never materialised; readers repeat the fill
//     element.
//   - slab 1 (chunkplan.BaseSlab) is the base slab: the raw_data dataset on disk.
//     Chunks are fetched through a chunkmap.ChunkSource.
//   - slabs 2 and up are staged slabs: writeable byte slices with the same layout as
//     raw_data. They are created by writes (WriteAt, following a chunkplan.SetItemPlan,
//     and Resize) and discarded on commit (MarkClean). Writes give every staged chunk a
//     slab of its own (one chunk long), so memory is only held for touched chunks and a
//     chunk is freed individually; staged chunks are never shared between grid
//     positions. A chunk that leaves the base or full slab through a partial write
//     records which bytes were written and reads its base chunk (or fills in the fill
//     value) only when the others are needed (holes.go).
//
// # Memory
//
// An array that uses a Store (UseStore) keeps its staged chunks under the store's memory
// budget (store.go), in buffers of the store's arena (arena.go): beyond it, its oldest
// staged chunks move to the store's spill file (spill.go) or, where the commit will put
// them, to a Sink (sink.go), and are read back when a read, a write or the commit needs
// them. The store's digest workers hash (and encode) each chunk a write completes while
// later writes go on (digest.go). One record per staged slab (stagedSlab) says where its
// bytes are and what is known about them.
//
// # Plans
//
// ReadAt builds a chunkplan.GetItemPlan and executes it as chunkmap does, staged chunks
// loaded here (read.go); WriteAt does the same with a chunkplan.SetItemPlan (write.go).
// GetItemPlan, SetItemPlan and Runs give the plans of the array as it is, without
// executing them.
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

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkplan"
)

// Array is a chunked n-D array of fixed-size elements whose chunks lie on
// slabs (see the package documentation). It is not safe for concurrent
// mutation; concurrent reads are fine (see Concurrency in the package
// documentation: the caller serialises writes against reads).
type Array struct {
	// Map is the geometry, the fill value and where each chunk lies; Resize reshapes it
	// and the writes point its chunks at staged slabs (Set).
	chunkmap.Map
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
	m, err := chunkmap.New(shape, chunks, itemSize, fill)
	if err != nil {
		return nil, fmt.Errorf("staged: new array: %w", err)
	}
	return newArray(*m), nil
}

// FromMap returns an array on a copy of m, a chunk map of the full and base slabs (a
// version's): every chunk where m points it, nothing staged yet. Writes to the array never
// change m.
func FromMap(m *chunkmap.Map) *Array { return newArray(m.Clone()) }

func newArray(m chunkmap.Map) *Array {
	return &Array{Map: m, cleanShape: m.Shape(), slabs: make([]stagedSlab, 2)}
}

// MapBase points chunk grid (one grid index per axis) at base slab row
// offset off: a staged chunk the commit stored (chunkmap.Map.MapBase).
func (a *Array) MapBase(grid []int64, off int64) error {
	s, _ := a.Slab(grid)
	if err := a.Map.MapBase(grid, off); err != nil {
		return fmt.Errorf("staged: %w", err)
	}
	if s >= 2 {
		a.nStaged--
	}
	return nil
}

// setChunk points a chunk at (slab, off). Staged slabs must already exist
// and hold the whole chunk at off (staged slabs never grow).
func (a *Array) setChunk(grid []int64, slab int32, off int64) error {
	k, err := a.Layout().FlatChunk(grid)
	if err != nil {
		return err
	}
	if slab < 0 || int(slab) >= len(a.slabs) {
		return fmt.Errorf("slab %d does not exist (%d slabs)", slab, len(a.slabs))
	}
	if off < 0 || (slab == chunkplan.FullSlab && off != 0) {
		return fmt.Errorf("invalid offset %d on slab %d", off, slab)
	}
	if slab >= 2 {
		data := a.slabs[slab].buf
		if a.gone(slab) {
			return fmt.Errorf("staged slab %d was dropped", slab)
		}
		if data != nil && off > (int64(len(data))-int64(a.ChunkBytes()))/a.Layout().RowBytes() {
			return fmt.Errorf("offset %d overruns staged slab %d of %d bytes", off, slab, len(data))
		}
	}
	if a.ChunkMap().Slabs[k] >= 2 {
		a.nStaged--
	}
	if slab >= 2 {
		a.nStaged++
	}
	a.Set(k, slab, off)
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

// SetItemPlan plans writing bytes [off, off+n) of the C-order stream. The range must lie
// within Size(): grow the array with Resize first.
func (a *Array) SetItemPlan(off, n int64) (*chunkplan.SetItemPlan, error) {
	p, err := a.Layout().SetItemPlan(a.ChunkMap(), off, n)
	if err != nil {
		return nil, fmt.Errorf("staged: set item plan: %w", err)
	}
	return p, nil
}
