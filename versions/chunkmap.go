package versions

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/staged"
)

// block is one stored chunk of a version: its grid index and raw_data slot offset.
type block struct {
	grid []int64
	off  int64 // raw_data row offset on axis 0 (versioned), or unused (plain)
}

// blocks lists the stored chunks of a versioned dataset (those its chunk map points at
// raw_data) in grid order. They are made on first use: reading needs only the chunk map.
func (d *Dataset) blocks() []block {
	d.blockOnce.Do(func() {
		if d.arr == nil {
			return
		}
		var grids []int64
		_ = d.arr.Each(func(grid []int64, slab int32, off int64) error {
			if slab == staged.BaseSlab {
				grids = append(grids, grid...)
				d.blockList = append(d.blockList, block{off: off})
			}
			return nil
		})
		for i := range d.blockList {
			d.blockList[i].grid = grids[i*len(d.Shape) : (i+1)*len(d.Shape) : (i+1)*len(d.Shape)]
		}
	})
	return d.blockList
}

// IndexSchema is the byteBlocks index schema: keys are grid indices joined by "_".
var IndexSchema = map[string]string{"uri": "https://schema.hdfgroup.org/hdf5-json/block/index/regular", "separator": "_"}

// Live snapshots have none: a SWMR writer moves filtered edge chunks when it rewrites them,
// and mapping every chunk on every request would hold the HDF5 lock for long.
func (d *Dataset) hasChunkMap() bool {
	return !d.live && d.Chunks != nil && !d.Strings && (d.arr != nil || (d.vds != nil && d.Layout == h5.Chunked))
}

// ChunkMap returns the dataset's chunk map as an HDF5/JSON dataset description with
// layout class H5D_CHUNKED_REF and a byteBlocks object (the byteBlocks proposal):
//
//	{"file": ..., "path": ..., "dtype": "<f8", "type": {...}, "shape": {...},
//	 "dcpl": {"fillValue": ..., "layout": {"class": "H5D_CHUNKED_REF", "dims": C},
//	          "filters": [...]},
//	 "byteBlocks": {"index_schema": {"uri": ..., "separator": "_"},
//	                "pages": N, "page_xattr": "user.vh5fs.chunkmap.{page}",
//	                "0_0": {"offset": 4016, "size": 1432}, ...}}
//
// Each key is a chunk's grid index; offset and size locate the stored chunk in the HDF5
// file: a whole chunk of shape dims, filtered as stored ("filter_mask", when present and
// non-zero, has bit i set if filter i of the pipeline was skipped for that chunk). Edge
// chunks are trimmed by the reader to the dataset's shape. Chunks without a key read as the
// fill value. The blocks are also split into pages (JSON objects of keys, each under 64 KiB,
// in grid order); the main document inlines them only when it fits in one xattr value.
func (d *Dataset) ChunkMap() (main []byte, pages [][]byte, err error) {
	entries, err := d.blockEntries()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: chunk map: %w", d.Path, err)
	}
	// Pack entries into pages.
	var cur []byte
	for _, e := range entries {
		if len(cur) > 0 && len(cur)+len(e)+2 > xattrPageMaxBytes {
			pages = append(pages, append(cur, '}'))
			cur = nil
		}
		if len(cur) == 0 {
			cur = append(cur, '{')
		} else {
			cur = append(cur, ',')
		}
		cur = append(cur, e...)
	}
	if len(cur) == 0 {
		cur = append(cur, '{')
	}
	pages = append(pages, append(cur, '}'))

	abs, err := filepath.Abs(d.f.Path())
	if err != nil {
		abs = d.f.Path()
	}
	head := map[string]any{
		"file":  abs,
		"path":  d.Path,
		"dtype": d.Type.DType,
		"type":  typeJSON(d.Type),
		"shape": map[string]any{"class": "H5S_SIMPLE", "dims": d.Shape, "maxdims": d.Shape},
		"dcpl": map[string]any{
			"fillValue": d.fillJSON(),
			"layout":    map[string]any{"class": "H5D_CHUNKED_REF", "dims": d.Chunks},
			"filters":   filtersJSON(d.Filters),
		},
	}
	hb, err := marshalJSON(head)
	if err != nil {
		return nil, nil, err
	}
	sb, _ := marshalJSON(IndexSchema)
	bb := fmt.Appendf(nil, `"byteBlocks":{"index_schema":%s,"pages":%d,"page_xattr":%q`, sb, len(pages), XattrChunkMap+".{page}")
	inline := len(hb) + len(bb) + len(pages[0]) + 4
	if len(pages) == 1 && inline <= xattrPageMaxBytes && len(pages[0]) > 2 {
		bb = append(bb, ',')
		bb = append(bb, pages[0][1:len(pages[0])-1]...)
	}
	bb = append(bb, '}')
	main = append(hb[:len(hb)-1], ',')
	main = append(main, bb...)
	main = append(main, '}')
	return main, pages, nil
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

// StoredChunks lists the dataset's stored chunks in grid order, the byteBlocks of
// ChunkMap; chunks without an entry read as the fill value. Only for HasChunkMap datasets.
func (d *Dataset) StoredChunks() ([]StoredChunk, error) {
	var blocks []block
	var infos []h5.ChunkInfo
	var err error
	if d.arr != nil {
		blocks = d.blocks()
		infos, err = d.f.slotInfo(d)
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
		out = append(out, StoredChunk{Grid: b.grid, ChunkInfo: infos[i]})
	}
	return out, nil
}

// blockEntries renders `"g0_g1":{"offset":..,"size":..}` for every stored chunk, in grid
// order.
func (d *Dataset) blockEntries() ([][]byte, error) {
	chunks, err := d.StoredChunks()
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(chunks))
	for _, c := range chunks {
		e := make([]byte, 0, 64)
		e = append(e, '"')
		for k, g := range c.Grid {
			if k > 0 {
				e = append(e, '_')
			}
			e = strconv.AppendInt(e, g, 10)
		}
		e = append(e, `":{"offset":`...)
		e = strconv.AppendInt(e, c.Offset, 10)
		e = append(e, `,"size":`...)
		e = strconv.AppendInt(e, c.Size, 10)
		if c.FilterMask != 0 {
			e = append(e, `,"filter_mask":`...)
			e = strconv.AppendUint(e, uint64(c.FilterMask), 10)
		}
		e = append(e, '}')
		out = append(out, e)
	}
	return out, nil
}

// plainBlocks lists every chunk of a plain chunked dataset with its storage.
func (d *Dataset) plainBlocks() ([]block, []h5.ChunkInfo, error) {
	grid := make([]int64, len(d.Shape))
	n := int64(1)
	for i, s := range d.Shape {
		grid[i] = (s + d.Chunks[i] - 1) / d.Chunks[i]
		n *= grid[i]
	}
	blocks := make([]block, 0, n)
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
		blocks = append(blocks, block{grid: g})
		coords = append(coords, c)
	}
	infos, err := d.vds.ChunkInfo(coords)
	return blocks, infos, err
}
