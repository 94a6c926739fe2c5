package h5

// #cgo LDFLAGS: -lz
// #include <zlib.h>
import "C"

import (
	"fmt"
	"unsafe"
)

// Inflate decodes a zlib stream (HDF5's deflate filter) into dst and returns the decoded
// length. It is zlib itself, the library libhdf5 decodes with, and takes no HDF5 lock: it
// runs in parallel.
func Inflate(dst, src []byte) (int, error) {
	if len(dst) == 0 || len(src) == 0 {
		return 0, fmt.Errorf("h5: inflate: empty buffer")
	}
	n := C.uLongf(len(dst))
	rc := C.uncompress((*C.Bytef)(unsafe.Pointer(&dst[0])), &n, (*C.Bytef)(unsafe.Pointer(&src[0])), C.uLong(len(src)))
	if rc != C.Z_OK {
		return 0, fmt.Errorf("h5: inflate: zlib error %d", int(rc))
	}
	return int(n), nil
}
