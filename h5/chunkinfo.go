package h5

// #include "vh5.h"
import "C"

import "fmt"

// ChunkInfo is where one stored chunk lives in the file.
type ChunkInfo struct {
	Offset     int64  // byte address in the file; -1 if the chunk is not allocated
	Size       int64  // stored (filtered) size in bytes
	FilterMask uint32 // bit i set: filter i of the pipeline was skipped for this chunk
}

// ChunkInfo looks up the stored chunks whose first elements are at coords (each a multiple
// of the chunk dims). One call into libhdf5 serves them all.
func (d *Dataset) ChunkInfo(coords [][]int64) ([]ChunkInfo, error) {
	rank := d.rank()
	if d.info.Layout != Chunked {
		return nil, &Error{Op: "chunk info", Path: d.path, Err: fmt.Errorf("layout is %s, not chunked", d.info.Layout)}
	}
	n := len(coords)
	if n == 0 {
		return nil, nil
	}
	flat := make([]C.hsize_t, 0, n*rank)
	for _, c := range coords {
		if len(c) != rank {
			return nil, &Error{Op: "chunk info", Path: d.path, Err: fmt.Errorf("coordinate %v for rank %d", c, rank)}
		}
		for _, x := range c {
			flat = append(flat, C.hsize_t(x))
		}
	}
	addr := make([]C.haddr_t, n)
	size := make([]C.hsize_t, n)
	mask := make([]C.uint, n)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return nil, err
	}
	if C.vh5_chunk_info(id, C.int(rank), C.size_t(n), &flat[0], &addr[0], &size[0], &mask[0]) < 0 {
		return nil, fail("chunk info", d.path, nil)
	}
	out := make([]ChunkInfo, n)
	for i := range out {
		out[i] = ChunkInfo{Offset: -1, Size: int64(size[i]), FilterMask: uint32(mask[i])}
		if addr[i] != C.HADDR_UNDEF {
			out[i].Offset = int64(addr[i])
		}
	}
	return out, nil
}
