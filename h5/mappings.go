package h5

// #include "vh5.h"
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/vh5fs/vh5fs/h5meta"
)

// Writing a virtual dataset's mapping list without libhdf5's per-mapping cost.
//
// libhdf5 creates the dataset with no mappings; its layout message then refers to no
// mapping list (an undefined global heap address). Closing the dataset evicts its object
// header from libhdf5's cache (files open read-write are opened with evict-on-close), and
// libhdf5 keeps no other copy of the bytes it wrote (the journal driver does not offer it the
// metadata accumulator). Then, through the driver, so that the journal covers it:
//  1. the list, encoded as libhdf5 1.10 encodes it, goes in a new global heap collection
//     of its own (as libhdf5 would put it: the list is larger than a shared collection)
//     in space reserved at the end of the file;
//  2. the layout message's global heap ID is set to that collection's object 1;
//  3. the superblock's end-of-file address is set to cover the collection (libhdf5 writes
//     the same value whenever it writes the superblock, as it asks the driver).
//
// libhdf5 reads the header from the file the next time it needs it (to add the dataset's
// attributes, for one). CheckMappingLists verifies, after a flush, that the header in the
// file still refers to the list: the proof that libhdf5 kept no copy of its own.

// writtenList is a mapping list CreateVirtual wrote, for CheckMappingLists.
type writtenList struct {
	path       string
	ohdr, heap uint64 // the dataset's object header, the list's collection
}

// vfdReader reads the file as libhdf5 does, through the journal driver (held writes
// included). Its user holds the HDF5 lock.
type vfdReader struct{ id C.hid_t }

func (r vfdReader) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if rc, err := C.vh5j_read(r.id, C.haddr_t(off), C.size_t(len(p)), ptr(p)); rc < 0 {
		return 0, fmt.Errorf("read %d bytes at %d: %w", len(p), off, err)
	}
	return len(p), nil
}

// FileOf returns the file open anew if the n bytes at off are its bytes as it reads them
// (nothing held over them), for h5meta to map a long mapping list. Anew, not a duplicate
// of the driver's descriptor: a mapping keeps its open file alive until it is unmapped,
// and with it any lock taken through that open file (libhdf5 locks the file it opens with
// flock), which would then outlive the HDF5 file's close. Where the file cannot be opened
// anew (no /proc), nil: the list is read.
func (r vfdReader) FileOf(off, n int64) *os.File {
	if off < 0 || n <= 0 || C.vh5j_unheld(r.id, C.haddr_t(off), C.size_t(n)) != 1 {
		return nil
	}
	return openAnew(r.id)
}

// openAnew opens the file libhdf5 has open as id anew, through /proc (see FileOf): nil
// where it cannot. Under the HDF5 lock.
func openAnew(id C.hid_t) *os.File {
	fd := C.vh5j_fd(id)
	if fd < 0 {
		return nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", int(fd)))
	if err != nil {
		return nil
	}
	return f
}

// metadata opens the file's metadata as the journal driver has it, or returns nil if the file
// is not open through it. Under the HDF5 lock.
func metadata(id C.hid_t) (*h5meta.File, error) {
	eoa := C.vh5j_eoa(id)
	if eoa == 0 {
		return nil, nil
	}
	return h5meta.Open(vfdReader{id}, int64(eoa))
}

// listWriter returns the file's metadata if vh5fs writes mapping lists in it itself: it is
// open read-write (through the journal driver) and has a superblock of version 0 or 1 (no
// checksum), 8-byte offsets and lengths and no user block. Else nil. Under the HDF5 lock.
func (f *File) listWriter(id C.hid_t) *h5meta.File {
	if !f.rw {
		return nil
	}
	return listTarget(id)
}

// listTarget is listWriter for any file open through the journal driver.
func listTarget(id C.hid_t) *h5meta.File {
	meta, err := metadata(id)
	if err != nil || meta == nil || meta.Base() != 0 || meta.SizeOfOffsets() != 8 || meta.SizeOfLengths() != 8 {
		return nil
	}
	if _, err := meta.EOAField(); err != nil {
		return nil
	}
	return meta
}

// mappingList returns the encoded mapping list when CreateVirtual writes it itself: the
// file takes lists (listWriter) and this one is large enough that libhdf5 would give it a
// collection of its own. Else nil: libhdf5 creates the mappings. Under the HDF5 lock.
func (f *File) mappingList(id C.hid_t, srcName string, rank int, vs, cs, ss []int64) []byte {
	meta := f.listWriter(id)
	if meta == nil || len(cs) == 0 {
		return nil
	}
	list, err := meta.EncodeMappingList(".", srcName, rank, vs, cs, ss)
	if err != nil || !meta.OwnHeapCollection(len(list)) {
		return nil
	}
	return list
}

// CopiesMappingList reports whether CopyVirtual would copy the mapping list of the
// virtual dataset at path (without reading it).
func (f *File) CopiesMappingList(path string) (bool, error) {
	lock()
	defer unlock()
	meta, _, addr, err := f.listSource(path)
	if meta == nil || err != nil {
		return false, err
	}
	n, err := meta.MappingListLen(addr)
	if err != nil {
		return false, nil // CopyVirtual would leave it to H5Ocopy, or report the error
	}
	return n > 0 && meta.OwnHeapCollection(n), nil
}

// listSource returns the file's metadata (nil if the file takes no lists, see listWriter),
// its identifier and the object header address of the dataset at path. Under the HDF5
// lock.
func (f *File) listSource(path string) (meta *h5meta.File, id C.hid_t, addr uint64, err error) {
	if id, err = f.id(); err != nil {
		return nil, 0, 0, err
	}
	if meta = f.listWriter(id); meta == nil {
		return nil, 0, 0, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var caddr C.haddr_t
	if C.vh5_object_addr_by_name(id, cpath, &caddr) < 0 {
		return nil, 0, 0, fail("object address", path, nil)
	}
	return meta, id, uint64(caddr), nil
}

// CopyVirtual creates at dst a copy of the virtual dataset at src, as CreateVirtual would
// create it (element type of typeSrc, shape, fill; attributes are not copied), with src's
// mapping list as stored: mappings identical, as with H5Ocopy, which instead decodes and
// encodes every mapping again (it costs about as much as creating them). It creates
// nothing and returns false where CreateVirtual would leave the list to libhdf5 (see
// mappingList) or src has no list; then CopyObject is the way. CheckMappingLists applies
// as after CreateVirtual.
func (f *File) CopyVirtual(dst, src string, typeSrc *Dataset, shape []int64, fill []byte) (bool, error) {
	lock()
	defer unlock()
	meta, id, srcAddr, err := f.listSource(src)
	if meta == nil || err != nil {
		return false, err
	}
	list, err := meta.StoredMappings(srcAddr)
	if err == nil {
		err = list.Verify()
	}
	switch {
	case errors.Is(err, h5meta.ErrUnsupported):
		return false, nil
	case err != nil:
		return false, &Error{Op: "copy the mapping list of", Path: src, Err: err}
	case list.Size() == 0 || !meta.OwnHeapCollection(list.Size()):
		return false, nil
	}
	return true, f.createListed(id, dst, typeSrc, shape, fill, list.Size(), list.Copy)
}

// createListed creates the virtual dataset at path without mappings and writes the n
// bytes list hands over as its mapping list (writeMappingList). Under the HDF5 lock.
func (f *File) createListed(id C.hid_t, path string, typeSrc *Dataset, shape []int64, fill []byte, n int, list func(func([]byte) error) error) error {
	addr, err := f.createVirtual(id, path, typeSrc, shape, fill, nil, true)
	if err != nil {
		return err
	}
	heap, err := writeMappingList(id, addr, n, list)
	if err != nil {
		return &Error{Op: "write the mapping list of", Path: path, Err: err}
	}
	f.lists = append(f.lists, writtenList{path: path, ohdr: addr, heap: heap})
	return nil
}

// writeMappingList gives the mapping-less virtual dataset at ohdr an encoded list of n
// bytes, which list hands to write in order (see the top of this file), and returns the
// address of the collection that holds it. Under the HDF5 lock.
func writeMappingList(id C.hid_t, ohdr uint64, n int, list func(write func([]byte) error) error) (uint64, error) {
	meta, err := metadata(id) // anew: libhdf5 has allocated the header since
	if err != nil {
		return 0, err
	}
	ref, err := meta.MappingListRef(ohdr)
	if err != nil {
		return 0, err
	}
	if !ref.Undefined(meta) {
		return 0, fmt.Errorf("the new dataset refers to a mapping list already (collection %d)", ref.Addr)
	}
	eoaAt, err := meta.EOAField()
	if err != nil {
		return 0, err
	}
	head, tail := meta.HeapFrame(n)
	size := len(head) + n + len(tail)
	var addr C.haddr_t
	if rc, err := C.vh5j_reserve(id, C.hsize_t(size), &addr); rc < 0 {
		return 0, fmt.Errorf("reserving %d bytes: %w", size, err)
	}
	at := int64(addr)
	write := func(data []byte) error {
		if len(data) == 0 {
			return nil
		}
		if rc, err := C.vh5j_write(id, C.haddr_t(at), C.size_t(len(data)), ptr(data)); rc < 0 {
			return fmt.Errorf("writing %d bytes at %d: %w", len(data), at, err)
		}
		at += int64(len(data))
		return nil
	}
	// The collection first, then what refers to it.
	if err := write(head); err != nil {
		return 0, err
	}
	if err := list(write); err != nil {
		return 0, err
	}
	if got := at - int64(addr) - int64(len(head)); got != int64(n) {
		return 0, fmt.Errorf("the mapping list gave %d bytes, not %d", got, n)
	}
	if err := write(tail); err != nil {
		return 0, err
	}
	heapID := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64(nil, uint64(addr)), 1)
	eoa := binary.LittleEndian.AppendUint64(nil, uint64(addr)+uint64(size))
	for _, w := range []struct {
		at   int64
		data []byte
	}{{ref.At, heapID}, {eoaAt, eoa}} {
		at = w.at
		if err := write(w.data); err != nil {
			return 0, err
		}
	}
	return uint64(addr), nil
}

// CheckMappingLists flushes libhdf5's metadata, then checks that every virtual dataset
// whose mapping list CreateVirtual wrote since the last check still refers to it in the
// file. Call it after the last change to those datasets and before anything marks them
// complete: an error means the datasets must not be used.
func (f *File) CheckMappingLists() error {
	lock()
	defer unlock()
	if len(f.lists) == 0 {
		return nil
	}
	lists := f.lists
	f.lists = nil
	id, err := f.id()
	if err != nil {
		return err
	}
	return checkLists(id, f.path, lists)
}

// checkLists is CheckMappingLists for the file id (at path) and the lists written in it.
// Under the HDF5 lock.
func checkLists(id C.hid_t, path string, lists []writtenList) error {
	if C.H5Fflush(id, C.H5F_SCOPE_LOCAL) < 0 {
		return fail("flush", path, nil)
	}
	meta, err := metadata(id)
	if err == nil && meta == nil {
		err = fmt.Errorf("not open through the journal driver")
	}
	if err != nil {
		return &Error{Op: "check the mapping lists written in", Path: path, Err: err}
	}
	for _, l := range lists {
		ref, err := meta.MappingListRef(l.ohdr)
		if err == nil && (ref.Addr != l.heap || ref.Index != 1) {
			err = fmt.Errorf("its layout refers to global heap object %d of collection %d, not to object 1 of %d", ref.Index, ref.Addr, l.heap)
		}
		if err != nil {
			return &Error{Op: "check the mapping list of", Path: l.path, Err: err}
		}
	}
	return nil
}

// diskMetadata opens the metadata of a file libhdf5 has open without the journal driver,
// from its bytes on disk, through the file opened anew (openAnew: a list h5meta maps then
// keeps no lock of libhdf5's alive) or else a duplicate of its descriptor (close file once
// done). Under the HDF5 lock.
func diskMetadata(id C.hid_t, path string) (meta *h5meta.File, file *os.File, err error) {
	if file = openAnew(id); file == nil {
		fd, err := C.vh5j_dup_fd(id)
		if fd < 0 {
			return nil, nil, fmt.Errorf("%s: duplicating its descriptor: %w", path, err)
		}
		file = os.NewFile(uintptr(fd), path)
	}
	st, err := file.Stat()
	if err == nil {
		meta, err = h5meta.Open(file, st.Size())
	}
	return meta, file, err
}

// VirtualMappings calls fn with each mapping of the virtual dataset at path, in order,
// decoded from the file's bytes (h5meta: as the journal driver has them, held writes
// included, or as they are on disk for a file open without it), and returns the dataset's
// shape: libhdf5, which opens a virtual dataset by building a selection for each mapping,
// would take longer than the caller's whole work with them. The mapping handed to fn
// shares memory with the next: fn must not keep its slices. The list's checksum is
// verified last: on an error, whatever fn did with the mappings must be discarded. ok is
// false where h5meta does not read the dataset (a layout or selection it does not decode,
// a file it cannot open): then open it and use Dataset.Mappings, after discarding what fn
// did; ok is false with an error where nothing is at path or it is no dataset. With fn
// nil it reads the shape alone (of any dataset).
func (f *File) VirtualMappings(path string, fn func(Mapping) error) (shape []int64, ok bool, err error) {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return nil, false, err
	}
	meta, err := metadata(id)
	if meta == nil && err == nil { // not open through the journal driver: nothing is held
		var file *os.File
		if meta, file, err = diskMetadata(id, f.path); file != nil {
			defer file.Close()
		}
	}
	if meta == nil || err != nil {
		return nil, false, nil
	}
	addr, err := objectAddr(id, meta, path, nil)
	if err != nil {
		return nil, false, err
	}
	shape, err = meta.Shape(addr)
	if err == nil && fn == nil {
		return shape, true, nil
	}
	var list *h5meta.MappingList
	if err == nil {
		list, err = meta.Mappings(addr)
	}
	if errors.Is(err, h5meta.ErrUnsupported) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, &Error{Op: "read mappings", Path: path, Err: err}
	}
	var fnErr error
	err = list.Scan(func(b *h5meta.Batch) bool {
		for i := range b.Len() {
			m := b.Mapping(i)
			fnErr = fn(Mapping{VStart: m.VStart, VCount: m.VCount, SrcFile: m.SrcFile, SrcDataset: m.SrcDataset,
				SrcStart: m.SrcStart, SrcCount: m.SrcCount})
			if fnErr != nil {
				return false
			}
		}
		return true
	})
	switch {
	case fnErr != nil:
		return nil, true, fnErr
	case errors.Is(err, h5meta.ErrUnsupported):
		return nil, false, nil
	case err == nil:
		err = list.Verify()
	}
	if err != nil {
		return nil, true, &Error{Op: "read mappings", Path: path, Err: err}
	}
	return shape, true, nil
}
