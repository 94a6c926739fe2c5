// Package chunkmap is a chunked dataset's chunk map: where each chunk of its grid lies (a
// slab and an offset in it, chunkplan's slab_indices and slab_offsets) with the geometry
// and the fill value, and the reads of its bytes through a ChunkSource. A committed
// version's dataset is a Map over raw_data (package versions builds one from its
// mappings); chunkstore plans and copies reads with it; package staged's arrays start from
// one and stage chunks on slabs of their own.
//
// A Map's chunks lie on the full slab (chunkplan.FullSlab: read as the fill value) or the
// base slab (chunkplan.BaseSlab: raw_data, read through a ChunkSource). New makes a map
// of fill chunks and MapBase points chunks at raw_data; after that a Map is only read, and
// concurrent reads are safe. The one exception is the map a staged.Array embeds, which
// the array changes under its own rules (Set, Reshape) and points at its staged slabs.
//
// Errors carry no package prefix: the caller names the operation, as for chunkplan.
package chunkmap

import (
	"fmt"
	"slices"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// ChunkSource loads chunks of the base slab. off is the row offset along
// axis 0 in the base slab (raw_data) as stored in slab_offsets. Chunk returns
// the whole chunk in C order with the full chunk shape C, ChunkBytes() long
// (padding beyond the trimmed edge may hold anything). The caller only reads
// the slice, so a source may hand out its cached, shared buffers.
type ChunkSource interface {
	Chunk(off int64) ([]byte, error)
}

// Prefetcher is a ChunkSource that can load many chunks at once (e.g. decoding them in
// parallel); a read hands it every base slab offset it needs before reading.
type Prefetcher interface {
	Prefetch(offs []int64)
}

// Map is a chunked n-D array's chunk map: its Layout, its fill element and, per chunk in
// C order over the grid, its slab and offset (see the package documentation).
type Map struct {
	lay  chunkplan.Layout
	fill []byte // one element
	cm   chunkplan.ChunkMap
}

// New returns the map of an array whose chunks all lie on the full slab (read as fill).
// fill is one element (len == itemSize).
func New(shape, chunks []int64, itemSize int, fill []byte) (*Map, error) {
	lay, err := chunkplan.NewLayout(shape, chunks, itemSize)
	if err != nil {
		return nil, err
	}
	if len(fill) != itemSize {
		return nil, fmt.Errorf("fill value has %d bytes, item size is %d", len(fill), itemSize)
	}
	// Zero-valued slabs and offsets mean "every chunk on the full slab at offset 0".
	return &Map{
		lay:  lay,
		fill: slices.Clone(fill),
		cm:   chunkplan.ChunkMap{Slabs: make([]int32, lay.NumChunks()), Offsets: make([]int64, lay.NumChunks())},
	}, nil
}

// Clone returns a copy of m that shares nothing it can change: where a staged array
// starts from.
func (m *Map) Clone() Map {
	return Map{lay: m.lay, fill: m.fill, cm: chunkplan.ChunkMap{Slabs: slices.Clone(m.cm.Slabs), Offsets: slices.Clone(m.cm.Offsets)}}
}

// MapBase points chunk grid (one grid index per axis) at base slab row offset off. It
// checks no more than the base slab needs: loading a version calls it once per chunk,
// 100k times for a large one.
func (m *Map) MapBase(grid []int64, off int64) error {
	k, ok := m.lay.Flat(grid)
	if !ok || off < 0 {
		return m.mapBaseError(grid, off)
	}
	m.cm.Slabs[k], m.cm.Offsets[k] = chunkplan.BaseSlab, off
	return nil
}

// mapBaseError is MapBase's error, apart so that MapBase stays short.
func (m *Map) mapBaseError(grid []int64, off int64) error {
	_, err := m.lay.FlatChunk(grid)
	if err == nil {
		err = fmt.Errorf("invalid offset %d on slab %d", off, chunkplan.BaseSlab)
	}
	return fmt.Errorf("map base: %w", err)
}

// Set points the chunk of flat index k at (slab, off), for the staged array that owns m;
// the caller checks both.
func (m *Map) Set(k int64, slab int32, off int64) {
	m.cm.Slabs[k], m.cm.Offsets[k] = slab, off
}

// Reshape makes lay m's geometry and cm (lay.NumChunks() long, kept) its chunks, for the
// staged array that owns m and resizes it.
func (m *Map) Reshape(lay chunkplan.Layout, cm chunkplan.ChunkMap) {
	m.lay, m.cm = lay, cm
}

// Layout is the map's geometry (shared: read it, never modify it).
func (m *Map) Layout() *chunkplan.Layout { return &m.lay }

// ChunkMap is where every chunk lies, the map's own slices: read them, never modify them.
func (m *Map) ChunkMap() chunkplan.ChunkMap { return m.cm }

// Shape returns a copy of the array shape in elements.
func (m *Map) Shape() []int64 { return slices.Clone(m.lay.Shape()) }

// Chunks returns a copy of the chunk shape in elements.
func (m *Map) Chunks() []int64 { return slices.Clone(m.lay.Chunks()) }

// Fill returns a copy of the fill value (one element).
func (m *Map) Fill() []byte { return slices.Clone(m.fill) }

// ItemSize returns the size of one element in bytes.
func (m *Map) ItemSize() int { return m.lay.ItemSize() }

// Size returns the length in bytes of the C-order stream: prod(shape)*itemSize.
func (m *Map) Size() int64 { return m.lay.Size() }

// ChunkBytes returns the size of one full chunk: prod(chunks)*itemSize.
func (m *Map) ChunkBytes() int { return m.lay.ChunkBytes() }

// NumChunks returns the number of chunks in the chunk grid.
func (m *Map) NumChunks() int64 { return int64(len(m.cm.Slabs)) }

// Slab returns (slab index, slab offset) of chunk grid index g, or (-1, -1)
// if g is not a valid grid index.
func (m *Map) Slab(grid []int64) (int32, int64) {
	k, ok := m.lay.Flat(grid)
	if !ok {
		return -1, -1
	}
	return m.cm.Slabs[k], m.cm.Offsets[k]
}

// GetItemPlan plans reading bytes [off, off+n) of the C-order stream, clipped to Size();
// off at or beyond the end gives an empty plan.
func (m *Map) GetItemPlan(off, n int64) (*chunkplan.GetItemPlan, error) {
	p, err := m.lay.GetItemPlan(m.cm, off, n)
	if err != nil {
		return nil, fmt.Errorf("get item plan: %w", err)
	}
	return p, nil
}

// Runs plans bytes [off, off+n) of the C-order stream, clipped to Size(), as one run per
// chunk touched where every chunk is one contiguous run of the stream (chunkplan's Runs);
// ok is false for other arrays.
func (m *Map) Runs(off, n int64) (runs []chunkplan.Run, ok bool) {
	return m.lay.Runs(m.cm, off, n)
}

// Each calls fn for every chunk in C order of the chunk grid with its grid
// index (a buffer reused between calls: copy it to keep it), slab index and
// slab offset, and stops at and returns the first error fn returns.
func (m *Map) Each(fn func(grid []int64, slab int32, off int64) error) error {
	return m.lay.Each(m.cm, fn)
}
