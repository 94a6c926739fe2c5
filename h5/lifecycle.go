package h5

// #include "vh5.h"
//
// // vh5_read_chunk reads one stored chunk as it is (H5Dread_chunk, libhdf5 >= 1.10.2):
// // its filtered bytes and filter mask, without running the pipeline.
// static int vh5_read_chunk(hid_t dset, const hsize_t *offset, uint32_t *mask, void *buf) {
// 	return H5Dread_chunk(dset, H5P_DEFAULT, offset, mask, buf) < 0 ? -1 : 0;
// }
//
// static int vh5_unlink(hid_t file, const char *path) {
// 	return H5Ldelete(file, path, H5P_DEFAULT) < 0 ? -1 : 0;
// }
//
// static int vh5_move(hid_t file, const char *src, const char *dst) {
// 	return H5Lmove(file, src, file, dst, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
// }
import "C"

import (
	"fmt"
	"unsafe"
)

// Unlink removes the link at path (H5Ldelete); libhdf5 frees the object once nothing
// else links to it.
func (f *File) Unlink(path string) error {
	return f.pathOp("unlink", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_unlink(id, cpath)
	})
}

// Move renames the link at src to dst (H5Lmove within the file).
func (f *File) Move(src, dst string) error {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	return f.pathOp("move "+src+" to", dst, func(id C.hid_t, cdst *C.char) C.int {
		return C.vh5_move(id, csrc, cdst)
	})
}

// ReadChunk reads the stored chunk whose first element is at start into buf, which must
// hold its stored size (ChunkInfo's Size), as it is in the file: filtered bytes, never
// decoded. It returns the chunk's filter mask. WriteChunk stores such bytes elsewhere.
func (d *Dataset) ReadChunk(start []int64, buf []byte) (mask uint32, err error) {
	rank := d.rank()
	switch {
	case d.info.Layout != Chunked:
		return 0, &Error{Op: "read chunk", Path: d.path, Err: fmt.Errorf("layout is %s, not chunked", d.info.Layout)}
	case len(start) != rank:
		return 0, &Error{Op: "read chunk", Path: d.path, Err: fmt.Errorf("rank mismatch")}
	case len(buf) == 0:
		return 0, &Error{Op: "read chunk", Path: d.path, Err: fmt.Errorf("empty buffer")}
	}
	off := hsizes(start)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return 0, err
	}
	var m C.uint32_t
	if C.vh5_read_chunk(id, hptr(off), &m, ptr(buf)) < 0 {
		return 0, fail("read chunk", d.path, nil)
	}
	return uint32(m), nil
}
