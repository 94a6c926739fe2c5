package h5

// #include "vh5.h"
import "C"

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
