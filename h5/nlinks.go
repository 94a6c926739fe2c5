package h5

// #include "vh5.h"
//
// static long long vh5_group_nlinks(hid_t loc, const char *path) {
// 	H5G_info_t info;
// 	return H5Gget_info_by_name(loc, path, &info, H5P_DEFAULT) < 0 ? -1 : (long long)info.nlinks;
// }
import "C"

import "unsafe"

// NumLinks is the number of links in the group at path, read from the group alone: its
// members' headers are not read (Members reads every one).
func (f *File) NumLinks(path string) (int64, error) {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return 0, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	n := C.vh5_group_nlinks(id, cpath)
	if n < 0 {
		return 0, fail("count the links of", path, nil)
	}
	return int64(n), nil
}
