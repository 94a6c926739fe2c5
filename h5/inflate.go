package h5

// #cgo LDFLAGS: -ldeflate
// #include <libdeflate.h>
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// decompressors keeps libdeflate decompressors for reuse (each is a ~32 KiB C allocation).
// A channel, not a sync.Pool: a pool drops items without a finalizer, leaking C memory.
var decompressors = make(chan *C.struct_libdeflate_decompressor, 2*runtime.GOMAXPROCS(0))

// Inflate decodes a zlib stream (HDF5's deflate filter) into dst and returns the decoded
// length. It uses libdeflate, which decodes a whole buffer about three times as fast as
// zlib's streaming inflate (measured on 1 MiB shuffled float64 chunks), and takes no HDF5
// lock: it runs in parallel.
func Inflate(dst, src []byte) (int, error) {
	if len(dst) == 0 || len(src) == 0 {
		return 0, fmt.Errorf("h5: inflate: empty buffer")
	}
	var d *C.struct_libdeflate_decompressor
	select {
	case d = <-decompressors:
	default:
		if d = C.libdeflate_alloc_decompressor(); d == nil {
			return 0, fmt.Errorf("h5: inflate: out of memory")
		}
	}
	var n C.size_t
	rc := C.libdeflate_zlib_decompress(d, unsafe.Pointer(&src[0]), C.size_t(len(src)), unsafe.Pointer(&dst[0]), C.size_t(len(dst)), &n)
	select {
	case decompressors <- d:
	default:
		C.libdeflate_free_decompressor(d)
	}
	switch rc {
	case C.LIBDEFLATE_SUCCESS:
		return int(n), nil
	case C.LIBDEFLATE_INSUFFICIENT_SPACE:
		return 0, fmt.Errorf("h5: inflate: the stream decodes to more than %d bytes", len(dst))
	default:
		return 0, fmt.Errorf("h5: inflate: corrupt deflate stream (libdeflate status %d)", int(rc))
	}
}
