package h5

// #include "vh5.h"
import "C"

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unsafe"
)

// DataSpec is the storage of a new versioned dataset (its raw_data): fixed forever.
type DataSpec struct {
	DType   string  // numpy dtype string: "<f8", ">f4", "<i8", "|i1", "<u2", "|u1", "|b1" (bool), "<c16"/"<c8" (complex), "|S8" (fixed bytes)
	Chunks  []int64 // chunk shape, rank >= 1, all > 0
	Fill    []byte  // one element in the dtype's bytes; nil: zero bytes
	Gzip    int     // deflate level 0-9, or -1 for no deflate
	Shuffle bool
	LZF     bool // filter 32000 (exclusive with Gzip >= 0)
}

// maxRank is HDF5's H5S_MAX_RANK.
const maxRank = 32

// maxChunkBytes is the largest chunk libhdf5 stores: chunk sizes are 32-bit in the file.
const maxChunkBytes = 1<<32 - 1

// numpyType is a parsed numpy dtype string.
type numpyType struct {
	kind byte // 'i', 'u', 'f', 'c', 'b' or 'S'
	be   bool // big-endian ('>')
	size int
}

// ItemSize returns the element size of a numpy dtype string DataSpec accepts, or an error naming what is not supported.
func ItemSize(dtype string) (int, error) {
	t, err := parseDType(dtype)
	return t.size, err
}

// parseDType accepts the numpy dtype strings h5py maps to plain HDF5 types, in numpy's own
// spelling (dtype.str): '|' for 1-byte types and fixed bytes, '<' or '>' for the rest.
func parseDType(dtype string) (numpyType, error) {
	bad := func(why string, args ...any) (numpyType, error) {
		return numpyType{}, fmt.Errorf("dtype %q: %s", dtype, fmt.Sprintf(why, args...))
	}
	if len(dtype) < 3 {
		return bad("not a numpy dtype string such as <f8")
	}
	order, kind, digits := dtype[0], dtype[1], dtype[2:]
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || strconv.Itoa(n) != digits {
		return bad("not a numpy dtype string such as <f8")
	}
	if order != '<' && order != '>' && order != '|' {
		return bad("byte order %q is not one of <, > or |", order)
	}
	switch kind {
	case 'i', 'u':
		if n != 1 && n != 2 && n != 4 && n != 8 {
			return bad("%d-byte integers are not supported", n)
		}
	case 'f':
		if n != 4 && n != 8 {
			return bad("%d-byte floats are not supported (only float32 and float64)", n)
		}
	case 'c':
		if n != 8 && n != 16 {
			return bad("%d-byte complex numbers are not supported (only complex64 and complex128)", n)
		}
	case 'b':
		if n != 1 {
			return bad("bool is |b1")
		}
	case 'S':
	case 'U':
		return bad("unicode strings (U) are not supported")
	case 'O':
		return bad("object arrays (variable-length strings) are not supported")
	default:
		return bad("kind %q is not supported (only i, u, f, c, b and S)", kind)
	}
	if oneByte := n == 1 || kind == 'S'; oneByte != (order == '|') {
		if oneByte {
			return bad("numpy writes this type with byte order |")
		}
		return bad("byte order | is for 1-byte types; numpy writes < or >")
	}
	return numpyType{kind: kind, be: order == '>', size: n}, nil
}

// check validates the spec and returns its parsed dtype.
func (s DataSpec) check() (numpyType, error) {
	t, err := parseDType(s.DType)
	if err != nil {
		return t, err
	}
	switch {
	case len(s.Chunks) == 0:
		return t, errors.New("no chunk shape: scalar datasets are not supported")
	case len(s.Chunks) > maxRank:
		return t, fmt.Errorf("rank %d exceeds HDF5's %d", len(s.Chunks), maxRank)
	case s.Fill != nil && len(s.Fill) != t.size:
		return t, fmt.Errorf("fill value of %d bytes for %s, whose elements have %d", len(s.Fill), s.DType, t.size)
	case s.Gzip < -1 || s.Gzip > 9:
		return t, fmt.Errorf("gzip level %d is outside -1 (none) to 9", s.Gzip)
	case s.Gzip >= 0 && s.LZF:
		return t, errors.New("gzip and LZF together: a dataset has one compressor")
	}
	total := int64(t.size)
	for i, c := range s.Chunks {
		if c <= 0 {
			return t, fmt.Errorf("chunk dimension %d is %d: it must be positive", i, c)
		}
		if total > maxChunkBytes/c {
			return t, fmt.Errorf("chunk shape %v: chunks of 4 GiB or more are beyond HDF5", s.Chunks)
		}
		total *= c
	}
	return t, nil
}

// CreateDataGroup creates the data group `group` (e.g. "/_version_data/temp"; missing parent groups created too) holding raw_data and hash_table exactly as versioned-hdf5 creates them for a new dataset.
//
// That is as h5py's create_group and create_dataset make them (format specification
// sections 3 and 4): raw_data of dims (0, C1, ...), maxdims (unlimited, C1, ...), chunk C,
// the fill value set, fill time ALLOC, no modification times, shuffle before the
// compressor, attribute chunks = C; hash_table of one row that reads as zeros (the
// default fill value, left unwritten like versioned-hdf5 leaves it), chunk 4096 rows,
// LZF, attribute largest_index = 0. A bad spec or an existing path creates nothing.
func (f *File) CreateDataGroup(group string, spec DataSpec) error {
	t, err := spec.check()
	if err != nil {
		return &Error{Op: "create data group", Path: group, Err: err}
	}
	fill := spec.Fill
	if fill == nil {
		fill = make([]byte, t.size)
	}
	return f.createDataGroup(group, spec, t, fill)
}

// CreateStringDataGroup is CreateDataGroup for variable-length strings, as h5py's
// string_dtype makes them (UTF-8 if utf8, else ASCII): spec.DType and spec.Fill are
// ignored and raw_data keeps libhdf5's default fill value, as versioned-hdf5 leaves it.
func (f *File) CreateStringDataGroup(group string, spec DataSpec, utf8 bool) error {
	t := numpyType{kind: 'a', size: 1} // size: only for check's chunk-size bound
	if utf8 {
		t.kind = 'O'
	}
	spec.DType, spec.Fill = "|u1", nil
	if _, err := spec.check(); err != nil {
		return &Error{Op: "create data group", Path: group, Err: err}
	}
	return f.createDataGroup(group, spec, t, nil)
}

func (f *File) createDataGroup(group string, spec DataSpec, t numpyType, fill []byte) error {
	const op = "create data group"
	if !strings.HasPrefix(group, "/") || group == "/" || path.Clean(group) != group {
		return &Error{Op: op, Path: group, Err: errors.New("not a clean absolute path below the root")}
	}
	rank := len(spec.Chunks)
	chunk := hsizes(spec.Chunks)
	chunk64 := make([]C.int64_t, rank)
	for i, c := range spec.Chunks {
		chunk64[i] = C.int64_t(c)
	}
	var be, shuffle, lzf, utf8 C.int
	if t.be {
		be = 1
	}
	if spec.Shuffle {
		shuffle = 1
	}
	if spec.LZF {
		lzf = 1
	}
	// h5py names links in UTF-8 when the name is not ASCII.
	for i := 0; i < len(group); i++ {
		if group[i] >= 0x80 {
			utf8 = 1
		}
	}
	cgroup := C.CString(group)
	defer C.free(unsafe.Pointer(cgroup))
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	switch C.vh5_create_data_group(id, cgroup, C.int(t.kind), be, C.size_t(t.size), C.int(rank), hptr(chunk),
		&chunk64[0], ptr(fill), C.int(spec.Gzip), shuffle, lzf, utf8) {
	case 0:
		return nil
	case -2:
		return &Error{Op: op, Path: group, Err: fmt.Errorf("something is there already: %w", fs.ErrExist)}
	default:
		return fail(op, group, nil)
	}
}

// SetAttrJSON sets (creating or replacing) attribute name of the object at path from a JSON value, typed as h5py types the equivalent Python value: a string -> scalar variable-length UTF-8 string; true/false -> h5py's bool enum (scalar); an integer -> int64 scalar; any other number -> float64 scalar; a non-empty array of numbers (nested arrays for N-D, rectangular) -> int64 array if all are integers else float64; an array of strings -> 1-D array of variable-length UTF-8 strings; an array of bools -> bool enum array. null, objects, empty arrays, mixed arrays are refused with an error that says why (nothing written).
//
// "Integer" is what Python's json module reads as int: a number written without a
// fraction or exponent. Nested arrays of strings or bools give N-D arrays, as in h5py.
func (f *File) SetAttrJSON(path, name string, value []byte) error {
	op := "set attribute " + name + " of"
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return &Error{Op: op, Path: path, Err: errors.New("an attribute name is non-empty and has no NUL byte")}
	}
	v, err := parseAttrJSON(value)
	if err != nil {
		return &Error{Op: op, Path: path, Err: err}
	}
	var buf unsafe.Pointer
	switch v.kind {
	case 'i':
		b := make([]C.int64_t, len(v.ints))
		for i, x := range v.ints {
			b[i] = C.int64_t(x)
		}
		buf = unsafe.Pointer(&b[0])
	case 'f':
		b := make([]C.double, len(v.floats))
		for i, x := range v.floats {
			b[i] = C.double(x)
		}
		buf = unsafe.Pointer(&b[0])
	case 'b':
		b := make([]C.schar, len(v.bools))
		for i, x := range v.bools {
			if x {
				b[i] = 1
			}
		}
		buf = unsafe.Pointer(&b[0])
	case 's':
		// C pointers in Go memory: allowed by cgo's rules (only Go pointers are not).
		b := make([]*C.char, len(v.strs))
		for i, s := range v.strs {
			b[i] = C.CString(s)
			defer C.free(unsafe.Pointer(b[i]))
		}
		buf = unsafe.Pointer(&b[0])
	}
	// h5py's temporary name: a random hex string no attribute has.
	var r [16]byte
	_, _ = rand.Read(r[:])
	cname, ctmp := C.CString(name), C.CString(hex.EncodeToString(r[:]))
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(ctmp))
	dims := hsizes(v.shape)
	return f.pathOp(op, path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_attr_write_value(id, cpath, cname, ctmp, C.int(v.kind), C.int(len(dims)), hptr(dims), buf)
	})
}

// DeleteAttr removes attribute name of the object at path; an attribute that does not exist is an error wrapping fs.ErrNotExist.
func (f *File) DeleteAttr(path, name string) error {
	op := "delete attribute " + name + " of"
	cpath, cname := C.CString(path), C.CString(name)
	defer C.free(unsafe.Pointer(cpath))
	defer C.free(unsafe.Pointer(cname))
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	switch C.vh5_attr_delete(id, cpath, cname) {
	case 0:
		return nil
	case 1:
		return &Error{Op: op, Path: path, Err: fs.ErrNotExist}
	default:
		return fail(op, path, nil)
	}
}

// attrValue is a JSON value typed as h5py types the Python value json.loads gives.
type attrValue struct {
	kind   byte    // 'i' int64, 'f' float64, 'b' bool, 's' variable-length UTF-8 string
	shape  []int64 // nil for a scalar
	ints   []int64
	floats []float64
	bools  []bool
	strs   []string
}

func parseAttrJSON(b []byte) (*attrValue, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep the literal: 1 and 1.0 are int and float to Python
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("not a JSON value: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	v := &attrValue{}
	var shape []int64
	for a, ok := x.([]any); ok; a, ok = a[0].([]any) {
		if len(a) == 0 {
			return nil, errors.New("an empty array has no element type")
		}
		shape = append(shape, int64(len(a)))
	}
	if len(shape) > maxRank {
		return nil, fmt.Errorf("arrays nested %d deep: HDF5 allows %d", len(shape), maxRank)
	}
	leaves, err := flattenJSON(x, shape, nil)
	if err != nil {
		return nil, err
	}
	v.shape = shape
	kinds := map[byte]bool{}
	for _, l := range leaves {
		switch l := l.(type) {
		case string:
			if strings.IndexByte(l, 0) >= 0 {
				return nil, errors.New("a string with a NUL byte cannot be a variable-length string")
			}
			kinds['s'] = true
			v.strs = append(v.strs, l)
		case bool:
			kinds['b'] = true
			v.bools = append(v.bools, l)
		case json.Number:
			kinds['n'] = true
		case nil:
			return nil, errors.New("null has no HDF5 attribute form")
		default: // map[string]any
			return nil, errors.New("JSON objects have no HDF5 attribute form")
		}
	}
	if len(kinds) > 1 {
		return nil, errors.New("the array mixes strings, numbers and booleans: an attribute has one type")
	}
	switch {
	case kinds['s']:
		v.kind = 's'
	case kinds['b']:
		v.kind = 'b'
	default:
		v.kind, err = v.numbers(leaves)
	}
	return v, err
}

// flattenJSON appends the leaves of x, nested arrays of the given shape, in C order.
func flattenJSON(x any, shape []int64, out []any) ([]any, error) {
	a, isArray := x.([]any)
	if len(shape) == 0 {
		if isArray {
			return nil, errors.New("nested arrays are not rectangular")
		}
		return append(out, x), nil
	}
	if !isArray || int64(len(a)) != shape[0] {
		return nil, errors.New("nested arrays are not rectangular")
	}
	for _, e := range a {
		var err error
		if out, err = flattenJSON(e, shape[1:], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// numbers types JSON numbers as numpy.array types Python's: int64 if every one is an
// integer, else float64.
func (v *attrValue) numbers(leaves []any) (byte, error) {
	ints := true
	for _, l := range leaves {
		if strings.ContainsAny(string(l.(json.Number)), ".eE") {
			ints = false
		}
	}
	for _, l := range leaves {
		s := string(l.(json.Number))
		if ints {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("integer %s does not fit in int64", s)
			}
			v.ints = append(v.ints, i)
			continue
		}
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("number %s does not fit in float64", s)
		}
		v.floats = append(v.floats, x)
	}
	if ints {
		return 'i', nil
	}
	return 'f', nil
}
