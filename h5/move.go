package h5

/*
#include "vh5.h"

static int vh5_move_link(hid_t file, const char *src, const char *dst) {
	return H5Lmove(file, src, file, dst, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
}
*/
import "C"

import "unsafe"

// MoveLink renames the link at src to dst (H5Lmove) in the same file: the object keeps its
// address and attributes; whatever names it by path is the caller's to update.
func (f *File) MoveLink(src, dst string) error {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	return f.pathOp("move "+src+" to", dst, func(id C.hid_t, cdst *C.char) C.int {
		return C.vh5_move_link(id, csrc, cdst)
	})
}
