package h5

// #include "vh5.h"
// #include "vh5_copy.h"
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
	src  *File
	path string
	id   C.hid_t
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

// Close flushes and closes the new file (not fsynced: the caller does that).
func (c *Copy) Close() error {
	lock()
	defer unlock()
	if c.id < 0 {
		return nil
	}
	rc := C.H5Fclose(c.id)
	c.id = -1
	if rc < 0 {
		return fail("close file", c.path, nil)
	}
	return nil
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
