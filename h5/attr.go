package h5

// #include "vh5.h"
import "C"

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Attr is one decoded HDF5 attribute.
type Attr struct {
	Name  string
	Type  Type
	Shape []int64 // nil for a scalar
	// Value is string, int64, uint64, float64 or bool for scalars; []string, []int64,
	// []uint64, []float64 or []bool for arrays (C order); []byte (the file's own bytes)
	// for any other type.
	Value any
}

// Attrs reads every attribute of the object at path, in name order.
func (f *File) Attrs(path string) ([]Attr, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	loc, err := f.id()
	if err != nil {
		return nil, err
	}
	n := C.vh5_attr_count(loc, cpath)
	if n < 0 {
		return nil, fail("list attributes", path, nil)
	}
	out := make([]Attr, 0, int(n))
	for i := 0; i < int(n); i++ {
		var name [1024]C.char
		if C.vh5_attr_name(loc, cpath, C.int(i), &name[0], C.size_t(len(name))) < 0 {
			return nil, fail("list attributes", path, nil)
		}
		a, err := readAttr(loc, cpath, path, C.GoString(&name[0]))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Attr reads one attribute; ok is false if the object has no attribute of that name.
func (f *File) Attr(path, name string) (a Attr, ok bool, err error) {
	cpath, cname := C.CString(path), C.CString(name)
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(cname))
	lock()
	defer unlock()
	loc, err := f.id()
	if err != nil {
		return Attr{}, false, err
	}
	switch C.vh5_attr_exists(loc, cpath, cname) {
	case 0:
		return Attr{}, false, nil
	case 1:
	default:
		return Attr{}, false, fail("look up attribute "+name+" of", path, nil)
	}
	a, err = readAttr(loc, cpath, path, name)
	return a, err == nil, err
}

func readAttr(loc C.hid_t, cpath *C.char, path, name string) (Attr, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var (
		ti     C.vh5_type_info
		rank   C.int
		dims   [32]C.hsize_t
		data   unsafe.Pointer
		nbytes C.size_t
		strs   **C.char
		nstrs  C.size_t
	)
	rc := C.vh5_attr_read(loc, cpath, cname, &ti, &rank, &dims[0], &data, &nbytes, &strs, &nstrs)
	defer C.free(data)
	if strs != nil {
		defer func() {
			for _, s := range unsafe.Slice(strs, nstrs) {
				C.free(unsafe.Pointer(s))
			}
			C.free(unsafe.Pointer(strs))
		}()
	}
	switch rc {
	case 0:
	case -4:
		return Attr{}, &Error{Op: "read attribute " + name + " of", Path: path, Stack: stackMessage(), Err: ErrUnsupported}
	default:
		return Attr{}, fail("read attribute "+name+" of", path, nil)
	}
	a := Attr{Name: name, Type: describe(&ti)}
	if rank > 0 {
		a.Shape = int64s(dims[:rank])
	}
	scalar := rank == 0
	if strs != nil {
		ss := make([]string, nstrs)
		for i, s := range unsafe.Slice(strs, nstrs) {
			ss[i] = C.GoString(s)
		}
		a.Value = pick(scalar, ss)
		return a, nil
	}
	raw := C.GoBytes(data, C.int(nbytes))
	le := binary.NativeEndian
	switch {
	case ti.cls == C.H5T_INTEGER && ti.sign == C.H5T_SGN_NONE:
		v := make([]uint64, len(raw)/8)
		for i := range v {
			v[i] = le.Uint64(raw[8*i:])
		}
		a.Value = pick(scalar, v)
	case ti.cls == C.H5T_INTEGER:
		v := make([]int64, len(raw)/8)
		for i := range v {
			v[i] = int64(le.Uint64(raw[8*i:]))
		}
		a.Value = pick(scalar, v)
	case ti.cls == C.H5T_FLOAT:
		v := make([]float64, len(raw)/8)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		a.Value = pick(scalar, v)
	case ti.is_bool != 0:
		v := make([]bool, len(raw))
		for i, b := range raw {
			v[i] = b != 0
		}
		a.Value = pick(scalar, v)
	default:
		a.Value = raw
	}
	return a, nil
}

func pick[T any](scalar bool, v []T) any {
	if scalar && len(v) == 1 {
		return v[0]
	}
	return v
}
