package h5

// #include "vh5.h"
import "C"

import "fmt"

// HeaderVersion is the libhdf5 version whose headers vh5fs was compiled against (its API
// and driver class follow them), e.g. "1.14.6". A library's major and minor version are
// in its soname, so the one loaded at run time has the same: what it reads follows them.
// A constant: errors built under the HDF5 lock name it.
func HeaderVersion() string {
	return C.GoString(C.vh5_header_version())
}

// LibraryVersion is the version of the libhdf5 loaded at run time.
func LibraryVersion() string {
	var maj, min, rel C.uint
	lock()
	defer unlock()
	if C.H5get_libversion(&maj, &min, &rel) < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d.%d", maj, min, rel)
}
