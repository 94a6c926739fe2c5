package h5

// #include "vh5.h"
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
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unsafe"

	"github.com/vh5fs/vh5fs/h5meta"
)

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
	return f.cancelLocked(id)
}

func (f *File) cancelLocked(id C.hid_t) error {
	if rc, errno := C.vh5j_cancel(id); rc < 0 {
		return &Error{Op: "cancel the writes to", Path: f.path, Err: errno}
	}
	return nil
}

// Unlink removes the links at paths (H5Ldelete); libhdf5 frees each object once nothing
// else links to it. The virtual datasets it frees lose their mapping lists first, as
// libhdf5 sees them (dropLists); if an unlink then fails, every write since the last sync
// is cancelled (Cancel), as libhdf5 may keep what it read.
func (f *File) Unlink(paths ...string) error {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	held, err := f.dropLists(id, paths)
	for _, p := range paths {
		if err != nil {
			break
		}
		cpath := C.CString(p)
		if C.vh5_unlink(id, cpath) < 0 {
			err = fail("unlink", p, nil)
		}
		C.free(unsafe.Pointer(cpath))
	}
	return f.retract(id, held, err)
}

// retract takes back the drops dropLists held, once the unlink they served is done. If
// err, which ends that unlink, is not nil, it returns it after cancelling the file's
// writes instead. Under the HDF5 lock.
func (f *File) retract(id C.hid_t, held []heldDrop, err error) error {
	for i := len(held) - 1; i >= 0 && err == nil; i-- {
		h := held[i]
		if rc, errno := C.vh5j_retract(id, h.at, C.haddr_t(h.addr), heldDropSize); rc < 0 {
			err = &Error{Op: "take back a dropped mapping list of", Path: f.path, Err: errno}
		}
	}
	if err == nil || len(held) == 0 {
		return err
	}
	return errors.Join(err, f.cancelLocked(id))
}

// Move renames the link at src to dst (H5Lmove within the file).
func (f *File) Move(src, dst string) error {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	return f.pathOp("move "+src+" to", dst, func(id C.hid_t, cdst *C.char) C.int {
		return C.vh5_move(id, csrc, cdst)
	})
}

// Replace puts the object at src in place of the one at dst: dst's attributes copied
// onto src, dst unlinked as Unlink does, src moved to dst. dst's mapping list is dropped
// before libhdf5 reads its header for the attributes, which would keep the header in its
// cache, out of dropLists' reach. A failure cancels as Unlink's does.
func (f *File) Replace(dst, src string) error {
	csrc, cdst := C.CString(src), C.CString(dst)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cdst))
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	held, err := f.dropLists(id, []string{dst})
	switch {
	case err != nil:
	case C.vh5_attrs_copy(id, cdst, id, csrc) < 0:
		err = fail("copy attributes of "+dst+" to", src, nil)
	case C.vh5_unlink(id, cdst) < 0:
		err = fail("unlink", dst, nil)
	case C.vh5_move(id, csrc, cdst) < 0:
		err = fail("move "+src+" to", dst, nil)
	}
	return f.retract(id, held, err)
}

// heldDrop is a mapping list reference dropLists held (h5's vh5j_hold): its place among
// the held writes, its address.
type heldDrop struct {
	at   C.size_t
	addr int64
}

// heldDropSize is the size of a held drop: a global heap ID of 8-byte offsets.
const heldDropSize = 8 + 4

// noList is the global heap ID of "no mapping list": an undefined address, index 0.
func noList() []byte { return append(bytes.Repeat([]byte{0xff}, heldDropSize-4), 0, 0, 0, 0) }

// dropLists gives every virtual dataset that unlinking paths frees "no mapping list", as
// libhdf5 creates one, for libhdf5's reads alone, where vh5fs writes lists itself
// (listWriter): libhdf5 frees a virtual dataset by decoding its whole list, every
// selection, only to free the heap object that holds it, for versions of 10k chunks most of
// a deletion's time and memory. The change is a held write the file never gets (vh5j_hold):
// retract takes it back once the unlink is done, when the dataset's header is free space.
// So no crash, at any point of the sync, leaves a dataset still linked without its list.
// The lists stay in the file unreferenced, as most space HDF5 frees does; compact drops
// them. A dataset is freed if it and every group above it up to the unlinked path have one
// hard link. libhdf5's metadata is flushed first, so that the bytes read here are the ones
// it knows; a header it holds in its cache it frees from its own copy, list and all.
// Under the HDF5 lock.
func (f *File) dropLists(id C.hid_t, paths []string) (held []heldDrop, err error) {
	meta := f.listWriter(id) // 8-byte offsets: heldDropSize
	if meta == nil {
		return nil, nil
	}
	if err := f.flushLocked(id); err != nil {
		return nil, err
	}
	if meta = f.listWriter(id); meta == nil { // anew: the flush wrote to the file
		return nil, nil
	}
	undef := noList()
	seen := map[uint64]bool{}
	var drop func(addr uint64) error
	drop = func(addr uint64) error {
		if seen[addr] {
			return nil
		}
		seen[addr] = true
		if n, err := meta.RefCount(addr); err != nil || n != 1 {
			return nil // not freed, or not known to be: libhdf5 decides
		}
		if ref, err := meta.MappingListRef(addr); err == nil {
			if ref.Undefined(meta) {
				return nil
			}
			var at C.size_t
			if rc, err := C.vh5j_hold(id, C.haddr_t(ref.At), C.size_t(len(undef)), ptr(undef), &at); rc < 0 {
				return fmt.Errorf("holding %d bytes at %d: %w", len(undef), ref.At, err)
			}
			held = append(held, heldDrop{at, ref.At})
			return nil
		}
		links, err := meta.Links(addr) // none for a dataset
		if err != nil {
			return nil
		}
		for _, l := range links {
			if err := drop(l.Addr); err != nil {
				return err
			}
		}
		return nil
	}
	groups := map[string][]h5meta.Link{}
	addrs := make([]uint64, len(paths))
	for i, p := range paths { // all found before anything is held
		if addrs[i], err = objectAddr(id, meta, p, groups); err != nil {
			return nil, err
		}
	}
	for i, p := range paths {
		if err := drop(addrs[i]); err != nil {
			return held, &Error{Op: "drop the mapping lists under", Path: p, Err: err}
		}
	}
	return held, nil
}

// objectAddr returns the address of the object at p, read from its group's links (h5meta)
// where it can: looking it up through libhdf5 puts its header in libhdf5's cache, where
// dropLists' change to the file does not reach it. groups, if not nil, keeps the links read
// for the next call. Under the HDF5 lock.
func objectAddr(id C.hid_t, meta *h5meta.File, p string, groups map[string][]h5meta.Link) (uint64, error) {
	byName := func(p string) (uint64, error) {
		cpath := C.CString(p)
		defer C.free(unsafe.Pointer(cpath))
		var addr C.haddr_t
		if C.vh5_object_addr_by_name(id, cpath, &addr) < 0 {
			return 0, fail("object address", p, nil)
		}
		return uint64(addr), nil
	}
	dir, name := path.Split(strings.TrimSuffix(p, "/"))
	links, ok := groups[dir]
	if !ok {
		g, err := byName(cmp.Or(dir, "."))
		if err != nil {
			return 0, err
		}
		links, _ = meta.Links(g) // none read: libhdf5 finds it
		if groups != nil {
			groups[dir] = links
		}
	}
	if i, ok := slices.BinarySearchFunc(links, name, func(l h5meta.Link, name string) int {
		return strings.Compare(l.Name, name)
	}); ok {
		return links[i].Addr, nil
	}
	return byName(p)
}
