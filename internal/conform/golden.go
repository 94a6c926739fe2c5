// Package conform compares what vh5fs committed with what versioned-hdf5 committed for
// the same edit (the golden fixtures): the version's data, the hash-table rows and slots
// it appended, and its chunk mappings.
package conform

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// Commit is what one commit left in a file.
type Commit struct {
	Data     []byte
	Rows     [][]byte // hash_table rows appended (48 bytes each)
	Slots    [][]byte // the slot of each appended row, whole
	Mappings []string // "vstart/count <- srcstart", sorted
}

// Read collects what version in file holds for dataset, and the hash rows from row
// `from` on.
func Read(file, version, dataset string, from int64) (*Commit, error) {
	f, err := versions.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vpath := versions.InVersion(version, dataset)
	d, err := f.Dataset(vpath)
	if err != nil {
		return nil, err
	}
	c := &Commit{Data: make([]byte, d.Size())}
	if _, err := d.ReadAt(c.Data, 0); err != nil {
		return nil, err
	}
	h := f.HDF5()
	group := d.DataGroup()
	ht, err := h.OpenDataset(versions.HashTableIn(group))
	if err != nil {
		return nil, err
	}
	defer ht.Close()
	largest, _, err := hashtable.Largest(h, versions.HashTableIn(group))
	if err != nil {
		return nil, err
	}
	raw := d.RawDataset()
	chunks := d.Chunks
	err = hashtable.Scan(ht, largest, func(i int64, r hashtable.Row) error {
		if i < from {
			return nil
		}
		c.Rows = append(c.Rows, r.Append(nil))
		start := make([]int64, len(chunks))
		start[0] = r.Start
		slot, err := readSlot(raw, start, chunks)
		if err != nil {
			return err
		}
		c.Slots = append(c.Slots, slot)
		return nil
	})
	if err != nil {
		return nil, err
	}
	vds, err := h.OpenDataset(vpath)
	if err != nil {
		return nil, err
	}
	defer vds.Close()
	maps, err := vds.Mappings()
	if err != nil {
		return nil, err
	}
	for _, m := range maps {
		c.Mappings = append(c.Mappings, fmt.Sprintf("%v/%v <- %v %s", m.VStart, m.VCount, m.SrcStart, m.SrcDataset))
	}
	slices.Sort(c.Mappings)
	return c, nil
}

// Largest is the dataset's hash table largest_index in file (through version's dataset).
func Largest(file, version, dataset string) (int64, error) {
	f, err := versions.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	d, err := f.Dataset(versions.InVersion(version, dataset))
	if err != nil {
		return 0, err
	}
	n, ok, err := hashtable.Largest(f.HDF5(), versions.HashTableIn(d.DataGroup()))
	if err != nil || !ok {
		return 0, fmt.Errorf("%s: %s: %v", d.Path, hashtable.LargestIndex, err)
	}
	return n, nil
}

// Diff describes how got differs from want ("" if they agree).
func Diff(got, want *Commit) string {
	switch {
	case !bytes.Equal(got.Data, want.Data):
		return "the version's data differs"
	case len(got.Rows) != len(want.Rows):
		return fmt.Sprintf("%d hash rows appended, want %d", len(got.Rows), len(want.Rows))
	case !slices.Equal(got.Mappings, want.Mappings):
		return fmt.Sprintf("mappings differ:\n got %v\nwant %v", got.Mappings, want.Mappings)
	}
	for i := range got.Rows {
		if !bytes.Equal(got.Rows[i], want.Rows[i]) {
			return fmt.Sprintf("hash row %d differs:\n got %x\nwant %x", i, got.Rows[i], want.Rows[i])
		}
		if !bytes.Equal(got.Slots[i], want.Slots[i]) {
			return fmt.Sprintf("slot of hash row %d differs", i)
		}
	}
	return ""
}

// Tree describes a version of file as one line per group and dataset, sorted: for
// datasets the element type, shape, chunk shape, fill value, filters (ids and client
// data) and a digest of the data; for both their HDF5 attributes (the version's own
// timestamp left out). Two versions with the same Tree hold the same things.
func Tree(file, version string) (string, error) {
	f, err := versions.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	root := versions.VersionGroup(version)
	var lines []string
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		attrs, err := f.Attrs(dir)
		if err != nil {
			return err
		}
		var as []string
		for _, a := range attrs {
			if dir == root && a.Name == "timestamp" {
				continue
			}
			as = append(as, fmt.Sprintf("%s=%v", a.Name, h5json.Attr(a)))
		}
		slices.Sort(as)
		lines = append(lines, fmt.Sprintf("group %q attrs %v", rel, as))
		ents, err := f.List(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := dir + "/" + e.Name
			if e.IsGroup {
				if err := walk(p, rel+e.Name+"/"); err != nil {
					return err
				}
				continue
			}
			d, err := f.Dataset(p)
			if err != nil {
				return err
			}
			data := make([]byte, d.Size())
			if _, err := d.ReadAt(data, 0); err != nil {
				return err
			}
			attrs, err := d.Attrs()
			if err != nil {
				return err
			}
			var as []string
			for _, a := range attrs {
				as = append(as, fmt.Sprintf("%s=%v", a.Name, h5json.Attr(a)))
			}
			slices.Sort(as)
			var filters []string
			for _, fl := range d.Filters {
				filters = append(filters, fmt.Sprintf("%d%v", fl.ID, fl.Params))
			}
			lines = append(lines, fmt.Sprintf("dataset %q %s shape %v chunks %v fill %x filters %v data %x attrs %v",
				rel+e.Name, d.Type.DType, d.Shape, d.Chunks, d.Fill, filters, sha256.Sum256(data), as))
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return "", err
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// StageGolden compares version "golden" of file with what versioned-hdf5 committed for
// the golden multi-change edit e: the whole tree (Tree), then each dataset's data,
// appended hash rows, slots and mappings (Read, Diff). nil if they agree.
func StageGolden(file string, e fixture.StageEdit) error {
	got, err := Tree(file, "golden")
	if err != nil {
		return err
	}
	want, err := Tree(e.After, e.NewVersion)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the version's tree differs:\n got %s\nwant %s", got, want)
	}
	for _, ds := range []string{"prices", "volume", "temp"} {
		var from int64 // temp is new: all its rows are the commit's
		if ds != "temp" {
			if from, err = Largest(e.Before, e.BaseVersion, ds); err != nil {
				return err
			}
		}
		g, err := Read(file, "golden", ds, from)
		if err != nil {
			return err
		}
		w, err := Read(e.After, e.NewVersion, ds, from)
		if err != nil {
			return err
		}
		if d := Diff(g, w); d != "" {
			return fmt.Errorf("%s: %s", ds, d)
		}
	}
	return nil
}
