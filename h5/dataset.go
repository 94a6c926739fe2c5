package h5

// #include "vh5.h"
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"gonum.org/v1/hdf5"
)

// Layout is a dataset's storage layout.
type Layout int

// Storage layouts.
const (
	Compact Layout = iota
	Contiguous
	Chunked
	Virtual
)

func (l Layout) String() string {
	return [...]string{"compact", "contiguous", "chunked", "virtual"}[l]
}

// Filter is one entry of a dataset's filter pipeline.
type Filter struct {
	ID     int      // 1 deflate, 2 shuffle, 3 fletcher32, 6 scaleoffset, 32000 LZF, ...
	Name   string   // as recorded in the file
	Flags  uint     // H5Z_FLAG_OPTIONAL etc.
	Params []uint32 // client data
}

// Info is what a reader needs to know about a dataset; it is read once at open.
type Info struct {
	Type     Type
	Shape    []int64
	MaxShape []int64 // -1 = unlimited
	Layout   Layout
	Chunks   []int64 // chunk dims for chunked layouts
	Filters  []Filter
	// Fill is one element holding the fill value in the file's type (nil for vlen strings;
	// all zeros when the file defines none, which is what HDF5 reads back then).
	Fill        []byte
	FillDefined bool // the creator set a fill value explicitly
	NumMappings int  // virtual layouts
	// Null is a null dataspace (h5py.Empty): no elements and no shape, not even (). Shape
	// is empty both for it and for a scalar dataset, which has one element.
	Null bool
	// External is the number of external files holding the raw data (HDF5 external
	// storage, H5Pset_external); 0 when the data is in the file.
	External int
}

// Dataset is an open HDF5 dataset.
type Dataset struct {
	file *File
	path string
	d    *hdf5.Dataset // nil once closed; GUARDED_BY(mu)

	infoMu sync.RWMutex // guards info against SetExtent; never held across an HDF5 call
	info   Info         // GUARDED_BY(infoMu)
}

// OpenDataset opens the dataset at path and reads its Info.
func (f *File) OpenDataset(path string) (*Dataset, error) {
	lock()
	defer unlock()
	if _, err := f.id(); err != nil {
		return nil, err
	}
	d, err := f.f.OpenDataset(path)
	if err != nil {
		return nil, fail("open dataset", path, nil)
	}
	ds := &Dataset{file: f, path: path, d: d}
	if err := ds.readInfo(); err != nil {
		d.Close()
		return nil, err
	}
	return ds, nil
}

// Path is the dataset's HDF5 path.
func (d *Dataset) Path() string { return d.path }

// Info returns what was read at open (with the shape SetExtent last set).
func (d *Dataset) Info() Info {
	d.infoMu.RLock()
	defer d.infoMu.RUnlock()
	return d.info
}

// rank is the dataset's rank, which never changes; SetExtent and refreshes replace the
// shape meanwhile (under infoMu), so it is read under infoMu too.
func (d *Dataset) rank() int {
	d.infoMu.RLock()
	defer d.infoMu.RUnlock()
	return len(d.info.Shape)
}

// Close closes the dataset; it is safe to call more than once.
func (d *Dataset) Close() error {
	lock()
	defer unlock()
	if d.d == nil {
		return nil
	}
	err := d.d.Close()
	d.d = nil
	if err != nil {
		return fail("close dataset", d.path, nil)
	}
	return nil
}

func (d *Dataset) id() (C.hid_t, error) {
	if d.d == nil || d.file.f == nil {
		return -1, &Error{Op: "use closed dataset", Path: d.path}
	}
	return C.hid_t(d.d.ID()), nil
}

func (d *Dataset) readInfo() error {
	id := C.hid_t(d.d.ID())
	var ci C.vh5_dataset_info
	if C.vh5_dataset_info_get(id, &ci) < 0 {
		return fail("read dataset layout", d.path, nil)
	}
	tid := C.H5Dget_type(id)
	if tid < 0 {
		return fail("read dataset type", d.path, nil)
	}
	var ti C.vh5_type_info
	rc := C.vh5_describe_type(tid, &ti)
	C.H5Tclose(tid)
	if rc < 0 {
		return fail("read dataset type", d.path, nil)
	}
	info := Info{Type: describe(&ti), NumMappings: int(ci.virtual_count),
		Null: ci.space_class == C.H5S_NULL, External: int(ci.external_count)}
	rank := int(ci.rank)
	info.Shape = int64s(ci.dims[:rank])
	info.MaxShape = int64s(ci.maxdims[:rank])
	for i, m := range ci.maxdims[:rank] {
		if m == C.H5S_UNLIMITED {
			info.MaxShape[i] = -1
		}
	}
	switch ci.layout {
	case C.H5D_COMPACT:
		info.Layout = Compact
	case C.H5D_CONTIGUOUS:
		info.Layout = Contiguous
	case C.H5D_CHUNKED:
		info.Layout = Chunked
		info.Chunks = int64s(ci.chunk[:rank])
	case C.H5D_VIRTUAL:
		info.Layout = Virtual
	default:
		return &Error{Op: "read dataset layout", Path: d.path, Err: fmt.Errorf("unknown layout %d", ci.layout)}
	}
	for i := 0; i < int(ci.nfilters); i++ {
		var (
			fid   C.int
			flags C.uint
			cd    [32]C.uint
			ncd   = C.size_t(len(cd))
			name  [256]C.char
		)
		if C.vh5_filter_get(id, C.int(i), &fid, &flags, &cd[0], &ncd, &name[0], C.size_t(len(name))) < 0 {
			return fail("read filters", d.path, nil)
		}
		f := Filter{ID: int(fid), Name: C.GoString(&name[0]), Flags: uint(flags)}
		for _, v := range cd[:min(int(ncd), len(cd))] {
			f.Params = append(f.Params, uint32(v))
		}
		info.Filters = append(info.Filters, f)
	}
	info.FillDefined = ci.fill_defined == C.H5D_FILL_VALUE_USER_DEFINED
	if info.Type.Raw {
		info.Fill = make([]byte, info.Type.Size)
		if ci.fill_defined != C.H5D_FILL_VALUE_UNDEFINED {
			if C.vh5_fill_value(id, ptr(info.Fill)) < 0 {
				return fail("read fill value", d.path, nil)
			}
		}
	}
	d.info = info
	return nil
}

// Mapping is one virtual-dataset mapping: a box of the virtual dataset taken from a box of
// a source dataset.
type Mapping struct {
	VStart, VCount []int64
	SrcFile        string
	SrcDataset     string
	SrcStart       []int64
	SrcCount       []int64
}

// Mappings returns the virtual dataset's mappings (nil for other layouts). Every selection
// must be a single regular block; anything else is an error.
func (d *Dataset) Mappings() ([]Mapping, error) {
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return nil, err
	}
	n := d.info.NumMappings
	if d.info.Layout != Virtual || n == 0 {
		return nil, nil
	}
	rank := d.rank()
	arr := make([]C.hsize_t, 4*n*rank)
	vstart, vcount := arr[:n*rank], arr[n*rank:2*n*rank]
	sstart, scount := arr[2*n*rank:3*n*rank], arr[3*n*rank:]
	// Names are absolute paths and "." in practice; size the buffers generously.
	names := make([]C.char, n*256+4096)
	files := make([]C.char, n*8+4096)
	rc := C.vh5_mappings(id, C.int(rank), C.size_t(n), hptr(vstart), hptr(vcount), hptr(sstart), hptr(scount),
		&names[0], C.size_t(len(names)), &files[0], C.size_t(len(files)))
	switch rc {
	case 0:
	case -2:
		return nil, &Error{Op: "read mappings", Path: d.path, Stack: stackMessage(), Err: fmt.Errorf("%w: mapping selection is not a single block", ErrUnsupported)}
	default:
		return nil, fail("read mappings", d.path, nil)
	}
	out := make([]Mapping, n)
	np, fp := 0, 0
	for i := range out {
		m := &out[i]
		m.VStart = int64s(vstart[i*rank : (i+1)*rank])
		m.VCount = int64s(vcount[i*rank : (i+1)*rank])
		m.SrcStart = int64s(sstart[i*rank : (i+1)*rank])
		m.SrcCount = int64s(scount[i*rank : (i+1)*rank])
		m.SrcDataset = C.GoString(&names[np])
		np += len(m.SrcDataset) + 1
		m.SrcFile = C.GoString(&files[fp])
		fp += len(m.SrcFile) + 1
	}
	return out, nil
}

// ReadBox reads the box start/count of the dataset, in its own file type (no conversion),
// into mem, a C-order buffer of shape memShape, at memStart.
func (d *Dataset) ReadBox(start, count, memShape, memStart []int64, mem []byte) error {
	rank := d.rank()
	if len(start) != rank || len(count) != rank || len(memShape) != rank || len(memStart) != rank {
		return &Error{Op: "read", Path: d.path, Err: fmt.Errorf("rank mismatch")}
	}
	if !d.info.Type.Raw {
		return &Error{Op: "read", Path: d.path, Err: fmt.Errorf("%w: %s has no raw byte form", ErrUnsupported, d.info.Type.DType)}
	}
	need := int64(d.info.Type.Size)
	for i := range memShape {
		if memStart[i]+count[i] > memShape[i] {
			return &Error{Op: "read", Path: d.path, Err: fmt.Errorf("selection exceeds the buffer on axis %d", i)}
		}
		need *= memShape[i]
	}
	if int64(len(mem)) < need {
		return &Error{Op: "read", Path: d.path, Err: fmt.Errorf("buffer of %d bytes, need %d", len(mem), need)}
	}
	for _, c := range count {
		if c == 0 {
			return nil
		}
	}
	s, c, ms, mst := hsizes(start), hsizes(count), hsizes(memShape), hsizes(memStart)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return err
	}
	if rank == 0 {
		if C.vh5_read_box(id, 0, nil, nil, nil, nil, ptr(mem)) < 0 {
			return fail("read", d.path, nil)
		}
		return nil
	}
	if C.vh5_read_box(id, C.int(rank), hptr(s), hptr(c), hptr(ms), hptr(mst), ptr(mem)) < 0 {
		return fail("read", d.path, nil)
	}
	return nil
}

// ReadStrings reads the box start/count of a variable-length string dataset, in C order.
// A NULL string reads as "".
func (d *Dataset) ReadStrings(start, count []int64) ([]string, error) {
	if !d.info.Type.VlenString {
		return nil, &Error{Op: "read strings", Path: d.path, Err: fmt.Errorf("dtype %s is not a variable-length string", d.info.Type.DType)}
	}
	n := int64(1)
	for _, c := range count {
		n *= c
	}
	if n == 0 {
		return nil, nil
	}
	ptrs := make([]*C.char, n)
	s, c := hsizes(start), hsizes(count)
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return nil, err
	}
	cptrs := (**C.char)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(cptrs))
	if C.vh5_read_strings(id, C.int(len(start)), hptr(s), hptr(c), cptrs, C.size_t(n)) < 0 {
		return nil, fail("read strings", d.path, nil)
	}
	copy(ptrs, unsafe.Slice(cptrs, n))
	out := make([]string, n)
	for i, p := range ptrs {
		if p != nil {
			out[i] = C.GoString(p)
		}
	}
	C.vh5_free_strings(cptrs, C.size_t(n))
	return out, nil
}

// Addr is the file address of the dataset's object header (what tools that read the file's
// bytes directly start from).
func (d *Dataset) Addr() (uint64, error) {
	lock()
	defer unlock()
	id, err := d.id()
	if err != nil {
		return 0, err
	}
	var addr C.haddr_t
	if C.vh5_object_addr(id, &addr) < 0 {
		return 0, fail("object address", d.path, nil)
	}
	return uint64(addr), nil
}
