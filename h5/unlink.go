package h5

/*
#include "vh5.h"

static int vh5_delete_link(hid_t file, const char *path) {
	return H5Ldelete(file, path, H5P_DEFAULT) < 0 ? -1 : 0;
}
*/
import "C"

// DeleteLink removes the link at path (H5Ldelete). An object no other link names is
// gone with it; its bytes stay in the file as free space HDF5 never gives back (vh5fs
// compact does).
func (f *File) DeleteLink(path string) error {
	return f.pathOp("delete link", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_delete_link(id, cpath)
	})
}

// SourceAs returns a view of d that virtual datasets created from it (CreateVirtual,
// CreateVirtualFlat) name as their source under path instead of d's own: for a dataset
// built under a temporary name and moved to path before anyone reads through those
// mappings. The view shares d's handle: close d, never the view.
func (d *Dataset) SourceAs(path string) *Dataset {
	return &Dataset{file: d.file, path: path, d: d.d, info: d.Info()}
}

// Cancel drops everything written to a read-write file since its last sync, and stops
// it as a failed sync does (ErrStopped): for a change that failed half made, which must
// not reach the file when it is closed (a close syncs what libhdf5 wrote last).
func (f *File) Cancel() error {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	if rc, errno := C.vh5j_cancel(id); rc < 0 {
		return &Error{Op: "cancel the writes to", Path: f.path, Err: errno}
	}
	return nil
}
