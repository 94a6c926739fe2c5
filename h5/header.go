package h5

import (
	"errors"
	"os"
	"slices"

	"github.com/vh5fs/vh5fs/h5meta"
)

// Header is what a dataset's object header says of its dataspace and datatype.
type Header struct {
	Shape, MaxShape []int64 // MaxShape -1 for unlimited
	Type            []byte  // the datatype message as stored: equal bytes are equal types
}

// DatasetHeader reads the shape, maximum shape and datatype of the dataset at path from
// the file's bytes (h5meta), as VirtualMappings does: libhdf5 opening a virtual dataset
// decodes every mapping first. ok is false where h5meta does not read it; then open it.
func (f *File) DatasetHeader(path string) (h Header, ok bool, err error) {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return Header{}, false, err
	}
	meta, err := metadata(id)
	if meta == nil && err == nil {
		var file *os.File
		if meta, file, err = diskMetadata(id, f.path); file != nil {
			defer file.Close()
		}
	}
	if meta == nil || err != nil {
		return Header{}, false, nil
	}
	addr, err := objectAddr(id, meta, path, nil)
	if err != nil {
		return Header{}, false, err
	}
	mh, err := meta.Header(addr)
	if errors.Is(err, h5meta.ErrUnsupported) {
		return Header{}, false, nil
	}
	if err != nil {
		return Header{}, false, &Error{Op: "read header", Path: path, Err: err}
	}
	return Header{Shape: mh.Dims, MaxShape: mh.MaxDims, Type: slices.Clone(mh.Type)}, true, nil
}
