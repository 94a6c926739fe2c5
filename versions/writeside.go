package versions

import (
	"fmt"
	"path"
	"slices"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/h5"
)

// Stageable reports whether the dataset can take writes: a versioned dataset of fixed-size
// elements read through a clean chunk map.
func (d *Dataset) Stageable() bool { return d.arr != nil && d.raw != nil && !d.Strings }

// WriteBase is the chunk map writes to this (immutable) dataset start from: every chunk
// where the version maps it. It is the dataset's own, shared: read it, never change it (a
// staged array copies it, staged.FromMap).
func (d *Dataset) WriteBase() (*chunkmap.Map, error) {
	if !d.Stageable() {
		return nil, fmt.Errorf("%s: %w: only versioned datasets of fixed-size elements take writes", d.Path, ErrUnsupported)
	}
	return d.arr, nil
}

// TextWritable reports whether a write of the dataset's text can replace its values: a
// version's variable-length string dataset whose mappings vh5fs decodes (its raw_data
// and chunk map known, as for Stageable datasets).
func (d *Dataset) TextWritable() bool { return d.textMap != nil && d.raw != nil && !d.live }

// ChunkSource reads the chunks of the dataset's raw_data (the base slab of its staged
// arrays) through the File's chunk cache.
func (d *Dataset) ChunkSource() chunkmap.ChunkSource { return d.Chunked() }

// RawDataset is the open raw_data dataset backing a versioned dataset, shared by every
// version of its path (the commit package appends to it).
func (d *Dataset) RawDataset() *h5.Dataset { return d.raw }

// DataGroup is the HDF5 group holding raw_data and hash_table.
func (d *Dataset) DataGroup() string {
	return path.Dir(d.RawData)
}

// FillDefined reports whether the dataset's creator set its fill value explicitly (as
// versioned-hdf5 does for every fixed-size dtype); a new version carries it over.
func (d *Dataset) FillDefined() bool { return d.fillDefined }

// HasVlenStringData reports whether any data group holds variable-length strings. Their
// hash tables in data_version 1 files hash pointers and must not be used for dedup.
func (f *File) HasVlenStringData() (bool, error) {
	var walk func(dir string) (bool, error)
	walk = func(dir string) (bool, error) {
		entries, err := f.List(dir)
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			p := dir + "/" + e.Name
			switch {
			case p == VersionsGroup:
			case !e.IsGroup && e.Name == RawData:
				d, err := f.h.OpenDataset(p)
				if err != nil {
					return false, err
				}
				vlen := d.Info().Type.VlenString
				d.Close()
				if vlen {
					return true, nil
				}
			case e.IsGroup:
				if found, err := walk(p); err != nil || found {
					return found, err
				}
			}
		}
		return false, nil
	}
	return walk(DataRoot)
}

// SameChunks reports whether a dataset of the given shape whose chunk at grid index
// grids[i] is stored at raw_data row rows[i] (and nothing else stored) is exactly
// this version's dataset.
func (d *Dataset) SameChunks(shape []int64, grids [][]int64, rows []int64) bool {
	if !slices.Equal(shape, d.Shape) || len(grids) != len(d.blocks()) {
		return false
	}
	for i, b := range d.blocks() { // both in grid order
		if !slices.Equal(b.Grid, grids[i]) || b.Row != rows[i] {
			return false
		}
	}
	return true
}

// SameStored reports whether o, the same path in another version, holds exactly what d
// holds: the same raw_data, element type, fill value, shape and chunk map (every stored
// chunk at the same raw_data row). Changes staged on d then apply to o unchanged.
func (d *Dataset) SameStored(o *Dataset) bool {
	if d.TextWritable() && o.TextWritable() {
		return d.RawData == o.RawData && slices.Equal(d.Chunks, o.Chunks) && sameMap(d.textMap, o.textMap)
	}
	if !d.Stageable() || !o.Stageable() || d.RawData != o.RawData || d.Type != o.Type ||
		!slices.Equal(d.Fill, o.Fill) || !slices.Equal(d.Chunks, o.Chunks) {
		return false
	}
	grids, rows := make([][]int64, 0, len(o.blocks())), make([]int64, 0, len(o.blocks()))
	for _, b := range o.blocks() {
		grids, rows = append(grids, b.Grid), append(rows, b.Row)
	}
	return d.SameChunks(o.Shape, grids, rows)
}

// Committed records the dataset a commit just wrote at path: base's dataset with a new
// shape and chunk map, given as the new virtual dataset's mappings are written
// (h5.File.CreateVirtualFlat): len(shape) values per chunk stored, its start in the
// dataset in vstart and in raw_data in sstart. It saves reading the mappings back through
// libhdf5, whose cost grows with their square, and builds no list per chunk.
func (f *File) Committed(path string, base *Dataset, shape, vstart, sstart []int64) error {
	m, err := chunkmap.New(shape, base.Chunks, base.Type.Size, base.Fill)
	if err != nil {
		return err
	}
	rank := len(shape)
	g := make([]int64, rank)
	for i := 0; i+rank <= len(vstart); i += rank {
		for k := range g {
			g[k] = vstart[i+k] / base.Chunks[k]
		}
		if err := m.MapBase(g, sstart[i]); err != nil {
			return err
		}
	}
	d := &Dataset{
		Path: path, Type: base.Type, Shape: slices.Clone(shape), Chunks: base.Chunks, Fill: base.Fill,
		Filters: base.Filters, RawData: base.RawData, Layout: h5.Virtual,
		fillDefined: base.fillDefined, f: f, raw: base.raw, arr: m,
	}
	if len(vstart) == 0 {
		d.Layout = h5.Contiguous
	}
	d.size = int64(d.Type.Size)
	for _, s := range shape {
		d.size *= s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.datasets[path]; !ok {
		f.keep(path, d)
	}
	return nil
}

// NewDataset is a dataset about to be created at path (a version's dataset being
// committed) in the raw_data at rawPath, of the given shape, mapping no chunk yet. rawPath
// is opened through libhdf5, so a commit can use a raw_data it has just created, which the
// file's durable bytes do not hold yet.
func (f *File) NewDataset(path, rawPath string, shape []int64) (*Dataset, error) {
	f.mu.Lock()
	raw, err := f.rawData(rawPath)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	info := raw.Info()
	if !info.Type.Raw && !info.Type.VlenString || len(info.Chunks) != len(shape) {
		return nil, fmt.Errorf("%s: %w: new datasets take fixed-size elements or strings of rank %d", rawPath, ErrUnsupported, len(shape))
	}
	d := &Dataset{
		Path: path, Type: info.Type, Shape: slices.Clone(shape), Chunks: info.Chunks, Fill: info.Fill,
		Filters: info.Filters, RawData: rawPath, Layout: h5.Contiguous,
		fillDefined: info.FillDefined, f: f, raw: raw, Strings: info.Type.VlenString,
	}
	if d.Strings {
		return d, nil // its values come whole (package commit's Strings)
	}
	m, err := chunkmap.New(shape, info.Chunks, info.Type.Size, info.Fill)
	if err != nil {
		return nil, err
	}
	d.arr = m
	d.size = int64(d.Type.Size)
	for _, s := range shape {
		d.size *= s
	}
	return d, nil
}

// sameMap reports whether two chunk maps have one shape and point every chunk at the
// same slab and offset.
func sameMap(a, b *chunkmap.Map) bool {
	if !slices.Equal(a.Shape(), b.Shape()) {
		return false
	}
	type at struct {
		slab int32
		off  int64
	}
	var seen []at
	_ = a.Each(func(_ []int64, slab int32, off int64) error {
		seen = append(seen, at{slab, off})
		return nil
	})
	i, same := 0, true
	_ = b.Each(func(_ []int64, slab int32, off int64) error {
		same = same && i < len(seen) && seen[i] == at{slab, off}
		i++
		return nil
	})
	return same && i == len(seen)
}
