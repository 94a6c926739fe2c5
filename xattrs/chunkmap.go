package xattrs

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/versions"
)

// IndexSchema is the byteBlocks index schema: keys are grid indices joined by "_".
var IndexSchema = map[string]string{"uri": "https://schema.hdfgroup.org/hdf5-json/block/index/regular", "separator": "_"}

// chunkMap renders the dataset's chunk map as an HDF5/JSON dataset description with
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
func chunkMap(d *versions.Dataset) (main []byte, pages [][]byte, err error) {
	entries, err := blockEntries(d)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: chunk map: %w", d.Path, err)
	}
	// Pack entries into pages.
	var cur []byte
	for _, e := range entries {
		if len(cur) > 0 && len(cur)+len(e)+2 > pageMaxBytes {
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

	abs, err := filepath.Abs(d.File().Path())
	if err != nil {
		abs = d.File().Path()
	}
	head := map[string]any{
		"file":  abs,
		"path":  d.Path,
		"dtype": d.Type.DType,
		"type":  typeJSON(d.Type),
		"shape": map[string]any{"class": "H5S_SIMPLE", "dims": d.Shape, "maxdims": d.Shape},
		"dcpl": map[string]any{
			"fillValue": fillJSON(d),
			"layout":    map[string]any{"class": "H5D_CHUNKED_REF", "dims": d.Chunks},
			"filters":   filtersJSON(d.Filters),
		},
	}
	hb, err := h5json.Marshal(head)
	if err != nil {
		return nil, nil, err
	}
	sb, _ := h5json.Marshal(IndexSchema)
	bb := fmt.Appendf(nil, `"byteBlocks":{"index_schema":%s,"pages":%d,"page_xattr":%q`, sb, len(pages), ChunkMap+".{page}")
	inline := len(hb) + len(bb) + len(pages[0]) + 4
	if len(pages) == 1 && inline <= pageMaxBytes && len(pages[0]) > 2 {
		bb = append(bb, ',')
		bb = append(bb, pages[0][1:len(pages[0])-1]...)
	}
	bb = append(bb, '}')
	main = append(hb[:len(hb)-1], ',')
	main = append(main, bb...)
	main = append(main, '}')
	return main, pages, nil
}

// blockEntries renders `"g0_g1":{"offset":..,"size":..}` for every stored chunk, in grid
// order.
func blockEntries(d *versions.Dataset) ([][]byte, error) {
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
