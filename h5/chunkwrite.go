package h5

// #cgo LDFLAGS: -ldeflate
// #include <libdeflate.h>
// #include "vh5.h"
//
// // vh5_write_chunk stores one already-filtered chunk as it is (H5Dwrite_chunk, libhdf5
// // >= 1.10.3): libhdf5 neither runs the filter pipeline nor touches the bytes.
// static int vh5_write_chunk(hid_t dset, const hsize_t *offset, uint32_t mask, size_t size, const void *buf) {
// 	return H5Dwrite_chunk(dset, H5P_DEFAULT, mask, offset, size, buf) < 0 ? -1 : 0;
// }
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// WriteChunk stores one whole chunk whose first element is at start (a multiple of the
// chunk dims), already encoded by the dataset's filter pipeline (mask: bit i set where
// filter i was skipped), in one call that takes the HDF5 lock only for the write itself.
// The caller encodes in parallel; libhdf5 would filter chunk after chunk under its lock.
func (d *Dataset) WriteChunk(start []int64, mask uint32, stored []byte) error {
	rank := d.rank()
	switch {
	case d.info.Layout != Chunked:
		return &Error{Op: "write chunk", Path: d.path, Err: fmt.Errorf("layout is %s, not chunked", d.info.Layout)}
	case len(start) != rank:
		return &Error{Op: "write chunk", Path: d.path, Err: fmt.Errorf("rank mismatch")}
	case len(stored) == 0:
		return &Error{Op: "write chunk", Path: d.path, Err: fmt.Errorf("empty chunk")}
	}
	for i, s := range start {
		if s < 0 || s%d.info.Chunks[i] != 0 {
			return &Error{Op: "write chunk", Path: d.path, Err: fmt.Errorf("offset %v is not a chunk's first element", start)}
		}
	}
	off := hsizes(start)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return err
	}
	if C.vh5_write_chunk(id, hptr(off), C.uint32_t(mask), C.size_t(len(stored)), ptr(stored)) < 0 {
		return fail("write chunk", d.path, nil)
	}
	return nil
}

// compressors keeps libdeflate compressors per level for reuse (each is a C allocation of
// several hundred KiB). Channels, not sync.Pools: a pool drops items without a finalizer,
// leaking C memory.
var compressors [13]chan *C.struct_libdeflate_compressor

func init() {
	for i := range compressors {
		compressors[i] = make(chan *C.struct_libdeflate_compressor, 2*runtime.GOMAXPROCS(0))
	}
}

// DeflateBound is the largest zlib stream Deflate can make of n bytes.
func DeflateBound(n int) int {
	return int(C.libdeflate_zlib_compress_bound(nil, C.size_t(n)))
}

// Deflate encodes src as a zlib stream (HDF5's deflate filter, level 0-12; libhdf5 reads
// any valid stream) into dst, which must hold DeflateBound(len(src)) bytes, and returns
// its length. libdeflate takes no HDF5 lock and compresses a whole buffer faster than
// zlib: chunks are compressed on every core.
func Deflate(dst, src []byte, level int) (int, error) {
	if level < 0 || level >= len(compressors) {
		return 0, fmt.Errorf("h5: deflate: level %d out of range", level)
	}
	if len(src) == 0 || len(dst) < DeflateBound(len(src)) {
		return 0, fmt.Errorf("h5: deflate: buffer of %d bytes for %d bytes of input", len(dst), len(src))
	}
	var c *C.struct_libdeflate_compressor
	select {
	case c = <-compressors[level]:
	default:
		if c = C.libdeflate_alloc_compressor(C.int(level)); c == nil {
			return 0, fmt.Errorf("h5: deflate: out of memory")
		}
	}
	n := C.libdeflate_zlib_compress(c, unsafe.Pointer(&src[0]), C.size_t(len(src)), unsafe.Pointer(&dst[0]), C.size_t(len(dst)))
	select {
	case compressors[level] <- c:
	default:
		C.libdeflate_free_compressor(c)
	}
	if n == 0 {
		return 0, fmt.Errorf("h5: deflate: %d bytes do not fit %d", len(src), len(dst))
	}
	return int(n), nil
}
