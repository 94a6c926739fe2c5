package h5

// #include "vh5.h"
import "C"

import "fmt"

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
	if C.vh5_read_chunk_raw(id, hptr(off), &m, ptr(buf), C.size_t(len(buf))) < 0 {
		return 0, fail("read chunk", d.path, nil)
	}
	return uint32(m), nil
}
