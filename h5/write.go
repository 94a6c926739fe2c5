package h5

// #include "vh5.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// SetAttrString writes a scalar variable-length UTF-8 string attribute.
func (f *File) SetAttrString(path, name, value string) error {
	cname, cval := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(cval))
	return f.pathOp("write attribute "+name+" of", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_attr_write_vstr(id, cpath, cname, cval)
	})
}

// SetAttrInt64 writes a scalar little-endian int64 attribute.
func (f *File) SetAttrInt64(path, name string, v int64) error {
	return f.setInt64s(path, name, []int64{v}, -1)
}

// SetAttrInt64s writes a 1-D little-endian int64 attribute.
func (f *File) SetAttrInt64s(path, name string, v []int64) error {
	return f.setInt64s(path, name, v, len(v))
}

func (f *File) setInt64s(path, name string, v []int64, n int) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	cv := make([]C.int64_t, max(1, len(v)))
	for i, x := range v {
		cv[i] = C.int64_t(x)
	}
	return f.pathOp("write attribute "+name+" of", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_attr_write_i64(id, cpath, cname, &cv[0], C.int(n))
	})
}

// SetAttrBool writes h5py's bool encoding (enum of int8 FALSE/TRUE).
func (f *File) SetAttrBool(path, name string, v bool) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	b := C.int(0)
	if v {
		b = 1
	}
	return f.pathOp("write attribute "+name+" of", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_attr_write_bool(id, cpath, cname, b)
	})
}

// CopyAttrs copies every attribute of the object at src onto the object at dst.
func (f *File) CopyAttrs(src, dst string) error {
	csrc, cdst := C.CString(src), C.CString(dst)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cdst))
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	if C.vh5_attrs_copy(id, csrc, id, cdst) < 0 {
		return fail("copy attributes of "+src+" to", dst, nil)
	}
	return nil
}

// CreateGroup creates the group at path (its parent must exist).
func (f *File) CreateGroup(path string) error {
	return f.pathOp("create group", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_create_group(id, cpath)
	})
}

// CopyObject copies the object at src to dst (H5Ocopy), attributes included.
func (f *File) CopyObject(src, dst string) error {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	return f.pathOp("copy "+src+" to", dst, func(id C.hid_t, cdst *C.char) C.int {
		return C.vh5_copy_object(id, csrc, cdst)
	})
}

func (f *File) pathOp(op, path string, fn func(id C.hid_t, cpath *C.char) C.int) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	if fn(id, cpath) < 0 {
		return fail(op, path, nil)
	}
	return nil
}

// SetExtent resizes a chunked dataset.
func (d *Dataset) SetExtent(dims []int64) error {
	if len(dims) != d.rank() {
		return &Error{Op: "resize", Path: d.path, Err: fmt.Errorf("rank mismatch")}
	}
	cd := hsizes(dims)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return err
	}
	if C.vh5_set_extent(id, C.int(len(dims)), hptr(cd)) < 0 {
		return fail("resize", d.path, nil)
	}
	d.infoMu.Lock()
	d.info.Shape = append([]int64(nil), dims...)
	d.infoMu.Unlock()
	return nil
}

// WriteBox writes the box start/count of the dataset, in its own file type, from mem, a
// C-order buffer of shape memShape, at memStart.
func (d *Dataset) WriteBox(start, count, memShape, memStart []int64, mem []byte) error {
	rank := d.rank()
	if len(start) != rank || len(count) != rank || len(memShape) != rank || len(memStart) != rank {
		return &Error{Op: "write", Path: d.path, Err: fmt.Errorf("rank mismatch")}
	}
	need := int64(d.info.Type.Size)
	for i := range memShape {
		if memStart[i]+count[i] > memShape[i] {
			return &Error{Op: "write", Path: d.path, Err: fmt.Errorf("selection exceeds the buffer on axis %d", i)}
		}
		need *= memShape[i]
	}
	if int64(len(mem)) < need || !d.info.Type.Raw {
		return &Error{Op: "write", Path: d.path, Err: fmt.Errorf("buffer of %d bytes, need %d raw bytes", len(mem), need)}
	}
	s, c, ms, mst := hsizes(start), hsizes(count), hsizes(memShape), hsizes(memStart)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return err
	}
	if C.vh5_write_box(id, C.int(rank), hptr(s), hptr(c), hptr(ms), hptr(mst), ptr(mem)) < 0 {
		return fail("write", d.path, nil)
	}
	return nil
}

// WriteStrings writes vals, in C order, into the box start/count of a variable-length
// string dataset (new global heap objects, as h5py writes them).
func (d *Dataset) WriteStrings(start, count []int64, vals []string) error {
	if !d.info.Type.VlenString {
		return &Error{Op: "write strings", Path: d.path, Err: fmt.Errorf("dtype %s is not a variable-length string", d.info.Type.DType)}
	}
	n := int64(1)
	for _, c := range count {
		n *= c
	}
	if len(start) != d.rank() || len(count) != d.rank() || n != int64(len(vals)) {
		return &Error{Op: "write strings", Path: d.path, Err: fmt.Errorf("%d strings for box %v/%v", len(vals), start, count)}
	}
	if n == 0 {
		return nil
	}
	cs := make([]*C.char, n)
	for i, v := range vals {
		cs[i] = C.CString(v)
	}
	defer func() {
		for _, p := range cs {
			C.free(unsafe.Pointer(p))
		}
	}()
	// The pointer array lives in C memory: cgo forbids passing Go memory holding pointers.
	arr := (**C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(arr))
	copy(unsafe.Slice(arr, n), cs)
	s, c := hsizes(start), hsizes(count)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return err
	}
	if C.vh5_write_strings(id, C.int(len(start)), hptr(s), hptr(c), arr, C.size_t(n)) < 0 {
		return fail("write strings", d.path, nil)
	}
	return nil
}

// VirtualBlock is one mapping of a virtual dataset to create: virtual [VStart, +Count)
// from source [SrcStart, +Count).
type VirtualBlock struct {
	VStart, Count, SrcStart []int64
}

// CreateVirtual creates at path a virtual dataset of the given shape whose element type is
// src's, with one mapping per block into src (same file, "."), and fill value fill (nil: not
// set). With no blocks it creates a contiguous dataset whose storage is never allocated.
//
// libhdf5 takes 20-25 us a mapping to create a virtual dataset. When the file is open
// read-write and the mapping list is large enough for a global heap collection of its own,
// libhdf5 creates the dataset without mappings and CreateVirtual writes the list itself
// (see writeMappingList); CheckMappingLists must then be called before anything marks the
// dataset as complete.
func (f *File) CreateVirtual(path string, src *Dataset, shape []int64, fill []byte, blocks []VirtualBlock) error {
	rank := len(shape)
	n := len(blocks)
	flat := make([]int64, 3*n*rank)
	vs, cs, ss := flat[:n*rank], flat[n*rank:2*n*rank], flat[2*n*rank:]
	for i, b := range blocks {
		if len(b.VStart) != rank || len(b.Count) != rank || len(b.SrcStart) != rank {
			return &Error{Op: "create virtual dataset", Path: path, Err: fmt.Errorf("block %d: rank mismatch", i)}
		}
		copy(vs[i*rank:], b.VStart)
		copy(cs[i*rank:], b.Count)
		copy(ss[i*rank:], b.SrcStart)
	}
	return f.CreateVirtualFlat(path, src, shape, fill, vs, cs, ss)
}

// CreateVirtualFlat is CreateVirtual with the blocks flat: block i's virtual start,
// count and source start are vs, cs and ss[i*rank : (i+1)*rank].
func (f *File) CreateVirtualFlat(path string, src *Dataset, shape []int64, fill []byte, vs, cs, ss []int64) error {
	rank := len(shape)
	if len(src.info.Shape) != rank || rank == 0 || len(vs)%rank != 0 || len(cs) != len(vs) || len(ss) != len(vs) {
		return &Error{Op: "create virtual dataset", Path: path, Err: fmt.Errorf("rank mismatch")}
	}
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	list := f.mappingList(id, src.path, rank, vs, cs, ss)
	if list == nil {
		flat := append(append(append(make([]int64, 0, 3*len(vs)), vs...), cs...), ss...)
		_, err := f.createVirtual(id, path, src, shape, fill, hsizes(flat), false)
		return err
	}
	return f.createListed(id, path, src, shape, fill, len(list), func(write func([]byte) error) error { return write(list) })
}

// createVirtual is vh5_create_virtual, the blocks in flat (virtual starts, counts, source
// starts, rank each); it returns the object header's address.
func (f *File) createVirtual(id C.hid_t, path string, src *Dataset, shape []int64, fill []byte, flat []C.hsize_t, virt bool) (uint64, error) {
	if fill != nil && len(fill) != src.info.Type.Size {
		return 0, &Error{Op: "create virtual dataset", Path: path, Err: fmt.Errorf("fill of %d bytes for %d-byte elements", len(fill), src.info.Type.Size)}
	}
	sid, err := src.id()
	if err != nil {
		return 0, err
	}
	rank := len(shape)
	dims, srcDims := hsizes(shape), hsizes(src.info.Shape)
	cpath, csrc := C.CString(path), C.CString(src.path)
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(csrc))
	var cvirt C.int
	if virt {
		cvirt = 1
	}
	var addr C.haddr_t
	m := len(flat) / 3
	n := m / rank
	if C.vh5_create_virtual(id, cpath, sid, C.int(rank), hptr(dims), ptr(fill), csrc, hptr(srcDims),
		C.size_t(n), hptr(flat[:m]), hptr(flat[m:2*m]), hptr(flat[2*m:]), cvirt, &addr) < 0 {
		return 0, fail("create virtual dataset", path, nil)
	}
	if n > 0 {
		f.releaseLater()
	}
	return uint64(addr), nil
}
