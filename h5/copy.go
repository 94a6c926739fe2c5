package h5

// #include "vh5.h"
// #include "vh5_copy.h"
//
// // vh5_evict opens and closes the object at path: a file opened with evict-on-close then
// // drops its header from libhdf5's cache.
// static int vh5_evict(hid_t loc, const char *path) {
// 	hid_t o = H5Oopen(loc, path, H5P_DEFAULT);
// 	return o < 0 || H5Oclose(o) < 0 ? -1 : 0;
// }
//
// // vh5_nlinks is the number of links in the group at path, its members' headers unread.
// static long long vh5_nlinks(hid_t loc, const char *path) {
// 	H5G_info_t info;
// 	return H5Gget_info_by_name(loc, path, &info, H5P_DEFAULT) < 0 ? -1 : (long long)info.nlinks;
// }
//
// static int vh5_put_chunk(hid_t dset, const hsize_t *offset, uint32_t mask, size_t size, const void *buf) {
// 	return H5Dwrite_chunk(dset, H5P_DEFAULT, mask, offset, size, buf) < 0 ? -1 : 0;
// }
import "C"

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"unsafe"

	"github.com/vh5fs/vh5fs/h5meta"
)

// ErrLinkKind marks a link CopyTo cannot copy (external and user-defined links).
var ErrLinkKind = errors.New("an external or user-defined link")

// Copy is a new file being filled with copies of another's objects (File.CopyTo).
type Copy struct {
	src   *File
	path  string
	id    C.hid_t
	lists []writtenList // written by Virtual, checked by Close
}

// CopyTo creates the file at path (truncating it) with f's creation properties and
// format bounds, for copies of f's objects. Close it when done.
func (f *File) CopyTo(path string) (*Copy, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return nil, err
	}
	c := C.vh5_create_like(id, cpath)
	if c < 0 {
		return nil, fail("create file", path, nil)
	}
	return &Copy{src: f, path: path, id: c}, nil
}

// Close flushes and closes the new file (not fsynced: the caller does that), after
// checking that every mapping list Virtual wrote is still referred to (CheckMappingLists).
func (c *Copy) Close() error {
	lock()
	defer unlock()
	if c.id < 0 {
		return nil
	}
	var err error
	if len(c.lists) > 0 {
		err = checkLists(c.id, c.path, c.lists)
	}
	rc := C.H5Fclose(c.id)
	c.id = -1
	if rc < 0 && err == nil {
		err = fail("close file", c.path, nil)
	}
	return err
}

// Virtual copies the virtual dataset at path as Object does, its mapping list as stored,
// where the source is open through the journal driver (OpenSource) and the list large
// enough to have a heap collection of its own: H5Ocopy decodes every mapping, about 13 KiB
// of memory a mapping. H5Ocopy copies the dataset while the source's list is dropped for
// libhdf5's eyes (a held write, taken back at once, as Unlink's), then the list's bytes
// go to the copy as CreateVirtual writes them (mappings.go). It copies nothing and
// returns false otherwise: then Object is the way.
func (c *Copy) Virtual(path string) (bool, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	src, err := c.src.id()
	if err != nil {
		return false, err
	}
	smeta, dmeta := listTarget(src), listTarget(c.id)
	if smeta == nil || dmeta == nil {
		return false, nil
	}
	saddr, err := objectAddr(src, smeta, path, nil)
	if err != nil {
		return false, err
	}
	ref, err := smeta.MappingListRef(saddr)
	if err != nil || ref.Undefined(smeta) {
		return false, nil // not such a virtual dataset: Object copies it, or reports what is wrong
	}
	list, err := smeta.StoredMappings(saddr)
	if err == nil {
		err = list.Verify() // a corrupt list is H5Ocopy's to report
	}
	if err != nil || !dmeta.OwnHeapCollection(list.Size()) {
		return false, nil
	}
	undef := noList()
	var at C.size_t
	if rc, errno := C.vh5j_hold(src, C.haddr_t(ref.At), C.size_t(len(undef)), ptr(undef), &at); rc < 0 {
		return false, &Error{Op: "drop the mapping list of", Path: path, Err: errno}
	}
	var daddr C.haddr_t
	rc := C.vh5_copy_object_to(src, c.id, cpath)
	if rc == 0 {
		// Out of the caches: the source's header as libhdf5 read it without the list, the
		// copy's before its list is written under it.
		rc = C.vh5_evict(src, cpath)
	}
	if rc == 0 {
		rc = C.vh5_object_addr_by_name(c.id, cpath, &daddr)
	}
	if rc == 0 {
		rc = C.vh5_evict(c.id, cpath)
	}
	if rc < 0 {
		err = fail("copy", path, nil)
	}
	if rc, errno := C.vh5j_retract(src, at, C.haddr_t(ref.At), heldDropSize); rc < 0 && err == nil {
		err = &Error{Op: "take back the dropped mapping list of", Path: path, Err: errno}
	}
	if err != nil {
		return false, err
	}
	heap, err := writeMappingList(c.id, uint64(daddr), list.Size(), list.Copy)
	if err != nil {
		return false, &Error{Op: "write the mapping list of", Path: path, Err: err}
	}
	c.lists = append(c.lists, writtenList{path: path, ohdr: uint64(daddr), heap: heap})
	return true, nil
}

// op runs fn on the source's and the copy's ids with path, under the HDF5 lock.
func (c *Copy) op(what, path string, fn func(src, dst C.hid_t, cpath *C.char) C.int) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	src, err := c.src.id()
	if err != nil {
		return err
	}
	switch fn(src, c.id, cpath) {
	case 0:
		return nil
	case -2:
		return &Error{Op: what, Path: path, Err: ErrLinkKind}
	}
	return fail(what, path, nil)
}

// Group makes the group at path with the source's creation properties and attributes
// (for "/", its attributes).
func (c *Copy) Group(path string) error {
	return c.op("copy group", path, func(src, dst C.hid_t, cpath *C.char) C.int {
		return C.vh5_copy_group(src, dst, cpath)
	})
}

// Object copies the object at path with everything below it (H5Ocopy).
func (c *Copy) Object(path string) error {
	return c.op("copy", path, func(src, dst C.hid_t, cpath *C.char) C.int {
		return C.vh5_copy_object_to(src, dst, cpath)
	})
}

// Link copies the link at path that is neither a group nor a dataset: a named datatype,
// or a soft link as a soft link; ErrLinkKind for external and user-defined links.
func (c *Copy) Link(path string) error {
	return c.op("copy link", path, func(src, dst C.hid_t, cpath *C.char) C.int {
		return C.vh5_copy_link(src, dst, cpath)
	})
}

// Chunks copies the chunked dataset at path stored chunk by stored chunk, as stored
// (filtered bytes, never decoded), holding a few MiB of them at a time (one chunk where
// libhdf5 finds them); progress is called with the chunk positions done and the bytes
// copied so far. Its elements must be raw bytes (no variable-length data, which lives in
// heaps of the file).
func (c *Copy) Chunks(path string, progress func(done, total int64, bytes int64)) error {
	src, err := c.src.OpenDataset(path)
	if err != nil {
		return err
	}
	defer src.Close()
	info := src.Info()
	if info.Layout != Chunked || info.Type.VlenString || !info.Type.Raw {
		return &Error{Op: "copy chunks of", Path: path, Err: fmt.Errorf("a %s dataset of %s elements: not raw chunks", info.Layout, info.Type.DType)}
	}
	rank := len(info.Shape)
	dims, chunks := hsizes(info.Shape), hsizes(info.Chunks)
	total := int64(1)
	for i := range rank {
		total *= (info.Shape[i] + info.Chunks[i] - 1) / info.Chunks[i]
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	sid, err := src.id()
	if err != nil {
		unlock()
		return err
	}
	dd := C.vh5_create_dataset_like(C.hid_t(c.src.f.ID()), c.id, cpath)
	if dd < 0 {
		err := fail("create dataset", path, nil)
		unlock()
		return err
	}
	unlock()
	defer func() {
		lock()
		C.H5Dclose(dd)
		unlock()
	}()
	if done, err := c.indexedChunks(path, dd, info.Shape, total, progress); done || err != nil {
		return err
	}
	// Batches short enough that the HDF5 lock is let go of often.
	const batch = 256
	var copied int64
	for from := int64(0); from < total; from += batch {
		n := min(batch, total-from)
		var b C.hsize_t
		lock()
		rc := C.vh5_copy_chunks(sid, dd, C.int(rank), &dims[0], &chunks[0], C.hsize_t(from), C.hsize_t(n), &b)
		if rc < 0 {
			err := fail("copy chunks of", path, nil)
			unlock()
			return err
		}
		unlock()
		copied += int64(b)
		if progress != nil {
			progress(from+n, total, copied)
		}
	}
	return nil
}

// chunkBatch is about how many bytes of chunks indexedChunks reads before writing them.
const chunkBatch = 8 << 20

// indexedChunks copies the chunks of the dataset at path into dd as Chunks does, from the
// list of its chunk index that h5meta reads from the file (one walk), in the order they lie
// in the file: libhdf5 1.10 finds a chunk by its coordinates by iterating the whole index,
// which makes a copy by coordinates quadratic. done is false, with nothing copied, where
// h5meta does not read the index.
func (c *Copy) indexedChunks(path string, dd C.hid_t, shape []int64, total int64, progress func(done, total, bytes int64)) (done bool, err error) {
	lock()
	id, err := c.src.id()
	var (
		meta   *h5meta.File
		file   *os.File
		chunks []h5meta.Chunk
	)
	if err == nil {
		meta, file, err = diskMetadata(id, c.src.path)
	}
	if err == nil {
		var addr uint64
		if addr, err = objectAddr(id, meta, path, nil); err == nil {
			chunks, err = meta.Chunks(addr)
		}
	}
	unlock()
	if file != nil {
		defer file.Close()
	}
	if err != nil {
		return false, nil // libhdf5 copies them, or reports what is wrong
	}
	chunks = slices.DeleteFunc(chunks, func(ch h5meta.Chunk) bool { // empty, or past the extent: not in the dataset
		if ch.Size <= 0 {
			return true
		}
		for i, o := range ch.Offset {
			if o >= shape[i] {
				return true
			}
		}
		return false
	})
	slices.SortFunc(chunks, func(a, b h5meta.Chunk) int { return cmp.Compare(a.Addr, b.Addr) })
	var buf []byte
	var copied int64
	for i := 0; i < len(chunks); {
		// Read a batch without the lock, then write it under it.
		j, n := i, int64(0)
		for ; j < len(chunks) && (j == i || n+chunks[j].Size <= chunkBatch); j++ {
			n += chunks[j].Size
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		at := int64(0)
		for _, ch := range chunks[i:j] {
			if _, err := file.ReadAt(buf[at:at+ch.Size], meta.Base()+ch.Addr); err != nil {
				return true, &Error{Op: "read a chunk of", Path: path, Err: err}
			}
			at += ch.Size
		}
		lock()
		at = 0
		for _, ch := range chunks[i:j] {
			off := hsizes(ch.Offset)
			if C.vh5_put_chunk(dd, hptr(off), C.uint32_t(ch.FilterMask), C.size_t(ch.Size), ptr(buf[at:at+ch.Size])) < 0 {
				err := fail("copy chunks of", path, nil)
				unlock()
				return true, err
			}
			at += ch.Size
		}
		unlock()
		copied += at
		i = j
		if progress != nil {
			progress(int64(i)*total/int64(len(chunks)), total, copied)
		}
	}
	if len(chunks) == 0 && progress != nil {
		progress(total, total, 0)
	}
	return true, nil
}

// MembersUnread lists the group at path as Members does, from the file's bytes (h5meta)
// where it can, so that libhdf5 neither reads nor keeps in its cache its members' headers:
// Copy.Virtual changes what libhdf5 reads of one, which a cached header would not show. It
// is Members where h5meta does not read the group, or the group has other than hard links.
func (f *File) MembersUnread(path string) ([]Member, error) {
	ms, ok, err := func() ([]Member, bool, error) {
		lock()
		defer unlock()
		id, err := f.id()
		if err != nil {
			return nil, false, err
		}
		meta := listTarget(id)
		if meta == nil {
			return nil, false, nil
		}
		addr, err := objectAddr(id, meta, path, nil)
		if err != nil {
			return nil, false, nil
		}
		links, err := meta.Links(addr)
		cpath := C.CString(path)
		n := C.vh5_nlinks(id, cpath)
		C.free(unsafe.Pointer(cpath))
		if err != nil || n != C.longlong(len(links)) {
			return nil, false, nil
		}
		ms := make([]Member, len(links))
		for i, l := range links {
			o, err := meta.Inspect(l.Addr)
			if err != nil {
				return nil, false, nil
			}
			ms[i] = Member{Name: l.Name, Kind: KindOther}
			switch {
			case o.IsGroup:
				ms[i].Kind = KindGroup
			case o.IsDataset:
				ms[i].Kind = KindDataset
			}
		}
		return ms, true, nil
	}()
	if ok || err != nil {
		return ms, err
	}
	stackMessage()
	return f.Members(path)
}
