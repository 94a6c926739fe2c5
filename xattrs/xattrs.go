// Package xattrs renders what vh5fs shows as extended attributes: the file, a version's
// group, a dataset (dtype, shape, chunks, fill value, filters, its HDF5 attributes and its
// chunk map as an HDF5/JSON byteBlocks document) and a live file's status, all as JSON
// without HTML escaping. It reads the layout through package versions and knows nothing
// of FUSE: fsnode serves a Set per node. The JSON forms of values are package h5json's.
package xattrs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/versions"
)

// Extended attribute names. vh5fs's own metadata lives under user.vh5fs.; the HDF5
// attributes of the object behind a file or directory under user.hdf5.<attribute name>,
// each value JSON-encoded.
const (
	Prefix       = "user.vh5fs."
	HDF5Prefix   = "user.hdf5."
	DType        = Prefix + "dtype"     // numpy dtype string, e.g. <f8
	Shape        = Prefix + "shape"     // JSON list
	Chunks       = Prefix + "chunks"    // JSON list (chunked datasets)
	FillValue    = Prefix + "fillvalue" // JSON value
	Filters      = Prefix + "filters"   // JSON list of HDF5/JSON filter objects
	Format       = Prefix + "format"    // "raw" or "json-lines"
	ChunkMap     = Prefix + "chunkmap"  // HDF5/JSON byteBlocks document (see chunkMap)
	Version      = Prefix + "version"
	Timestamp    = Prefix + "timestamp"
	PrevVersion  = Prefix + "prev_version"
	Current      = Prefix + "current_version"
	DataVersion  = Prefix + "data_version"
	File         = Prefix + "file"
	pageMaxBytes = 60000 // Linux caps one value at 64 KiB
)

// ErrMissing is returned for an extended attribute an object does not have.
var ErrMissing = errors.New("no such extended attribute")

// Set is the ordered set of extended attributes of one file or directory.
type Set struct {
	names  []string
	values map[string][]byte
}

// Add sets an attribute (for layers that know more than the file, e.g. pending commits).
func (x *Set) Add(name string, value []byte) {
	if x.values == nil {
		x.values = map[string][]byte{}
	}
	if _, dup := x.values[name]; !dup {
		x.names = append(x.names, name)
	}
	x.values[name] = value
}

// AddJSON adds name with v as JSON (without HTML escaping: "<f8" stays readable).
func (x *Set) AddJSON(name string, v any) error {
	b, err := h5json.Marshal(v)
	if err != nil {
		return fmt.Errorf("xattr %s: %w", name, err)
	}
	x.Add(name, b)
	return nil
}

// Names lists the attributes in a stable order.
func (x *Set) Names() []string { return x.names }

// Get returns one attribute's value, or ErrMissing.
func (x *Set) Get(name string) ([]byte, error) {
	if v, ok := x.values[name]; ok {
		return v, nil
	}
	return nil, ErrMissing
}

// Root describes the mount's root: the file, and for versioned files the current version
// and data_version. Not cached: the current version moves with commits.
func Root(f *versions.File) (*Set, error) {
	var x Set
	abs, err := filepath.Abs(f.Path())
	if err != nil {
		abs = f.Path()
	}
	x.Add(File, []byte(abs))
	if f.Versioned() {
		cur, err := f.CurrentVersion()
		if err != nil {
			return nil, err
		}
		x.Add(Current, []byte(cur))
		x.Add(DataVersion, []byte(strconv.FormatInt(f.DataVersion(), 10)))
	}
	if err := addHDF5Attrs(&x, f, "/"); err != nil {
		return nil, err
	}
	return &x, nil
}

// Group describes the HDF5 group at path; for a version's root group (version != "")
// also the version's name, timestamp and prev_version.
func Group(f *versions.File, path, version string) (*Set, error) {
	var x Set
	if version != "" {
		v, ok, err := f.Version(version)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("version %s: %w", version, versions.ErrNotFound)
		}
		x.Add(Version, []byte(v.Name))
		x.Add(Timestamp, []byte(v.Timestamp))
		prev := v.PrevVersion
		if prev == "" {
			prev = versions.FirstVersion
		}
		x.Add(PrevVersion, []byte(prev))
	}
	if err := addHDF5Attrs(&x, f, path); err != nil {
		return nil, err
	}
	return &x, nil
}

// addHDF5Attrs reads path's attributes through libhdf5 (not the File's byte reader), as
// the xattrs always have.
func addHDF5Attrs(x *Set, f *versions.File, path string) error {
	if err := f.CheckAttrs(path); err != nil {
		return err
	}
	attrs, err := f.HDF5().Attrs(path)
	if err != nil {
		return err
	}
	return addAttrs(x, attrs)
}

func addAttrs(x *Set, attrs []h5.Attr) error {
	for _, a := range attrs {
		if err := x.AddJSON(HDF5Prefix+a.Name, h5json.Attr(a)); err != nil {
			return err
		}
	}
	return nil
}

// memoKey keys a dataset's rendered Set in versions.Dataset.Derived.
type memoKey struct{}

// Dataset describes d: dtype, shape, chunks, fill value, filters, its HDF5 attributes and,
// for chunked data, the chunk map. Computed once per Dataset (datasets are immutable; the
// chunk map of a large dataset is costly to render).
func Dataset(d *versions.Dataset) (*Set, error) {
	v, err := d.Derived(memoKey{}, func() (any, error) { return buildDataset(d) })
	if err != nil {
		return nil, err
	}
	return v.(*Set), nil
}

func buildDataset(d *versions.Dataset) (*Set, error) {
	var x Set
	x.Add(DType, []byte(d.Type.DType))
	format := "raw"
	if d.Strings {
		format = "json-lines"
	}
	x.Add(Format, []byte(format))
	if err := x.AddJSON(Shape, d.Shape); err != nil {
		return nil, err
	}
	if d.Chunks != nil {
		if err := x.AddJSON(Chunks, d.Chunks); err != nil {
			return nil, err
		}
	}
	if err := x.AddJSON(FillValue, fillJSON(d)); err != nil {
		return nil, err
	}
	if err := x.AddJSON(Filters, filtersJSON(d.Filters)); err != nil {
		return nil, err
	}
	attrs, err := d.Attrs()
	if err != nil {
		return nil, err
	}
	if err := addAttrs(&x, attrs); err != nil {
		return nil, err
	}
	if d.HasChunkMap() {
		main, pages, err := chunkMap(d)
		if err != nil {
			return nil, err
		}
		x.Add(ChunkMap, main)
		for i, p := range pages {
			x.Add(fmt.Sprintf("%s.%d", ChunkMap, i), p)
		}
	}
	return &x, nil
}

// fillJSON decodes the fill element by dtype: a number, bool, [re, im] for complex, the
// JSON string "" for variable-length strings, {"bytes_b64": ...} for everything else.
func fillJSON(d *versions.Dataset) any {
	if d.Strings {
		return ""
	}
	return h5json.Fill(d.Type.DType, d.Fill)
}

var filterClasses = map[int]string{
	1: "H5Z_FILTER_DEFLATE", 2: "H5Z_FILTER_SHUFFLE", 3: "H5Z_FILTER_FLETCHER32",
	4: "H5Z_FILTER_SZIP", 5: "H5Z_FILTER_NBIT", 6: "H5Z_FILTER_SCALEOFFSET", 32000: "H5Z_FILTER_LZF",
}

// filtersJSON lists the pipeline as HDF5/JSON filter objects, in pipeline order.
func filtersJSON(fs []h5.Filter) []map[string]any {
	out := []map[string]any{}
	for _, f := range fs {
		class, ok := filterClasses[f.ID]
		if !ok {
			class = "H5Z_FILTER_USER"
		}
		m := map[string]any{"class": class, "id": f.ID, "name": f.Name, "parameters": f.Params}
		if f.ID == 1 && len(f.Params) > 0 {
			m["level"] = f.Params[0]
		}
		if f.Flags&1 != 0 { // H5Z_FLAG_OPTIONAL
			m["optional"] = true
		}
		out = append(out, m)
	}
	return out
}

// typeJSON is the HDF5/JSON description of the element type, derived from the dtype.
func typeJSON(t h5.Type) map[string]any {
	dt := t.DType
	if t.VlenString {
		cset := "H5T_CSET_ASCII"
		if t.UTF8 {
			cset = "H5T_CSET_UTF8"
		}
		return map[string]any{"class": "H5T_STRING", "charSet": cset, "strPad": "H5T_STR_NULLTERM", "length": "H5T_VARIABLE"}
	}
	order := "LE"
	if strings.HasPrefix(dt, ">") {
		order = "BE"
	}
	bits := strconv.Itoa(8 * t.Size)
	switch {
	case strings.HasPrefix(dt[1:], "i"):
		return map[string]any{"class": "H5T_INTEGER", "base": "H5T_STD_I" + bits + order}
	case strings.HasPrefix(dt[1:], "u"):
		return map[string]any{"class": "H5T_INTEGER", "base": "H5T_STD_U" + bits + order}
	case strings.HasPrefix(dt[1:], "f"):
		return map[string]any{"class": "H5T_FLOAT", "base": "H5T_IEEE_F" + bits + order}
	case dt == "|b1":
		return map[string]any{"class": "H5T_ENUM", "base": map[string]any{"class": "H5T_INTEGER", "base": "H5T_STD_I8LE"},
			"mapping": map[string]int{"FALSE": 0, "TRUE": 1}}
	case strings.HasPrefix(dt[1:], "c"):
		half := map[string]any{"class": "H5T_FLOAT", "base": "H5T_IEEE_F" + strconv.Itoa(4*t.Size) + order}
		return map[string]any{"class": "H5T_COMPOUND", "fields": []any{
			map[string]any{"name": "r", "type": half}, map[string]any{"name": "i", "type": half}}}
	case strings.HasPrefix(dt, "|S"):
		return map[string]any{"class": "H5T_STRING", "charSet": "H5T_CSET_ASCII", "strPad": "H5T_STR_NULLPAD", "length": t.Size}
	}
	return map[string]any{"class": "H5T_OPAQUE", "size": t.Size}
}
