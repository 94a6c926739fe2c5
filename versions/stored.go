package versions

import (
	"fmt"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/h5"
)

// Block is one stored chunk of a version: its grid index and raw_data slot.
type Block struct {
	Grid []int64
	Row  int64 // raw_data row offset on axis 0 (versioned), or unused (plain)
}

// Blocks lists the stored chunks of a versioned dataset whose mappings form a clean chunk
// map (one raw_data slot per chunk), in grid order; ok is false for the others (strings,
// the libhdf5 route, plain datasets), whose mappings must be read again.
func (d *Dataset) Blocks() (blocks []Block, ok bool) {
	if d.arr == nil {
		return nil, false
	}
	return d.blocks(), true
}

// EachBlock calls fn with every stored chunk of the datasets Blocks lists, in grid order,
// without keeping a list: Blocks keeps 40 bytes a chunk for the life of the dataset, which
// a comparison of two versions of ten million chunks cannot afford. grid is reused between
// calls. ok is false, and fn not called, for the datasets Blocks reports false for.
func (d *Dataset) EachBlock(fn func(grid []int64, row int64) error) (ok bool, err error) {
	if d.arr == nil {
		return false, nil
	}
	return true, d.arr.Each(func(grid []int64, slab int32, off int64) error {
		if slab != chunkplan.BaseSlab {
			return nil
		}
		return fn(grid, off)
	})
}

// blocks lists the stored chunks of a versioned dataset (those its chunk map points at
// raw_data) in grid order. They are made on first use: reading needs only the chunk map.
func (d *Dataset) blocks() []Block {
	d.blockOnce.Do(func() {
		if d.arr == nil {
			return
		}
		var grids []int64
		_ = d.arr.Each(func(grid []int64, slab int32, off int64) error {
			if slab == chunkplan.BaseSlab {
				grids = append(grids, grid...)
				d.blockList = append(d.blockList, Block{Row: off})
			}
			return nil
		})
		for i := range d.blockList {
			d.blockList[i].Grid = grids[i*len(d.Shape) : (i+1)*len(d.Shape) : (i+1)*len(d.Shape)]
		}
	})
	return d.blockList
}

// hasChunkMap: live snapshots have none, since a SWMR writer moves filtered edge chunks
// when it rewrites them, and mapping every chunk on every request would hold the HDF5 lock
// for long.
func (d *Dataset) hasChunkMap() bool {
	return !d.live && d.Chunks != nil && !d.Strings && (d.arr != nil || (d.vds != nil && d.Layout == h5.Chunked))
}

// StoredChunk is one stored chunk of a dataset's chunk map: its grid index and where its
// bytes (a whole chunk, filtered as stored) lie in the HDF5 file.
type StoredChunk struct {
	Grid []int64
	h5.ChunkInfo
}

// HasChunkMap reports whether the dataset has a chunk map (StoredChunks): chunked data,
// not variable-length strings, not a live snapshot, and for versioned datasets mappings of
// one chunk per block.
func (d *Dataset) HasChunkMap() bool { return d.hasChunkMap() }

// StoredChunks lists the dataset's stored chunks in grid order, the byteBlocks of the
// chunk map xattr (package xattrs); chunks without an entry read as the fill value. Only for HasChunkMap datasets.
func (d *Dataset) StoredChunks() ([]StoredChunk, error) {
	var blocks []Block
	var infos []h5.ChunkInfo
	var err error
	if d.arr != nil {
		blocks = d.blocks()
		infos, err = d.slotInfo(blocks)
	} else {
		blocks, infos, err = d.plainBlocks()
	}
	if err != nil {
		return nil, err
	}
	out := make([]StoredChunk, 0, len(blocks))
	for i, b := range blocks {
		if infos[i].Offset < 0 {
			continue // not allocated: reads as fill
		}
		out = append(out, StoredChunk{Grid: b.Grid, ChunkInfo: infos[i]})
	}
	return out, nil
}

// plainBlocks lists every chunk of a plain chunked dataset with its storage.
func (d *Dataset) plainBlocks() ([]Block, []h5.ChunkInfo, error) {
	grid := make([]int64, len(d.Shape))
	n := int64(1)
	for i, s := range d.Shape {
		grid[i] = (s + d.Chunks[i] - 1) / d.Chunks[i]
		n *= grid[i]
	}
	blocks := make([]Block, 0, n)
	coords := make([][]int64, 0, n)
	for flat := int64(0); flat < n; flat++ {
		g := make([]int64, len(grid))
		c := make([]int64, len(grid))
		rem := flat
		for i := len(grid) - 1; i >= 0; i-- {
			g[i] = rem % grid[i]
			rem /= grid[i]
			c[i] = g[i] * d.Chunks[i]
		}
		blocks = append(blocks, Block{Grid: g})
		coords = append(coords, c)
	}
	infos, err := d.vds.ChunkInfo(coords)
	return blocks, infos, err
}

// slotInfo returns where the raw_data slots of blocks are stored.
func (d *Dataset) slotInfo(blocks []Block) ([]h5.ChunkInfo, error) {
	offs := make([]int64, len(blocks))
	for i, b := range blocks {
		if b.Row%d.Chunks[0] != 0 {
			return nil, fmt.Errorf("%s: slot at row %d is not chunk-aligned", d.Path, b.Row)
		}
		offs[i] = b.Row
	}
	return d.Chunked().Slots(offs)
}
