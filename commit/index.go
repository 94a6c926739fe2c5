package commit

import (
	"encoding/binary"
	"fmt"

	"github.com/vh5fs/vh5fs/h5"
)

// hashRowBytes is the size of one hash_table row: a 32-byte digest, then (start, stop) as
// little-endian int64.
const hashRowBytes = 48

// index is the in-memory form of one data group's hash_table: digest -> slot start row.
// It is loaded once per mount and kept current by the commits that append to it, so a
// commit costs what it changes, not the table's size.
type index struct {
	table   *h5.Dataset
	path    string // hash_table path
	rows    int64  // C0: rows per slot
	largest int64  // slots in use (largest_index)
	slots   map[[32]byte]int64
}

func loadIndex(f *h5.File, group string, c0 int64) (*index, error) {
	path := group + "/hash_table"
	t, err := f.OpenDataset(path)
	if err != nil {
		return nil, err
	}
	ix := &index{table: t, path: path, rows: c0, slots: map[[32]byte]int64{}}
	if err := ix.load(f); err != nil {
		t.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ix, nil
}

func (ix *index) load(f *h5.File) error {
	info := ix.table.Info()
	if info.Type.Size != hashRowBytes || len(info.Shape) != 1 {
		return fmt.Errorf("not a versioned-hdf5 hash table (%d-byte rows, rank %d)", info.Type.Size, len(info.Shape))
	}
	a, ok, err := f.Attr(ix.path, "largest_index")
	if err != nil {
		return err
	}
	if ok {
		v, isInt := a.Value.(int64)
		if !isInt || v < 0 {
			return fmt.Errorf("largest_index is %v", a.Value)
		}
		ix.largest = v
	}
	if ix.largest > info.Shape[0] {
		return fmt.Errorf("largest_index %d beyond the table's %d rows", ix.largest, info.Shape[0])
	}
	if ix.largest == 0 {
		return nil
	}
	buf := make([]byte, ix.largest*hashRowBytes)
	if err := ix.table.ReadBox([]int64{0}, []int64{ix.largest}, []int64{ix.largest}, []int64{0}, buf); err != nil {
		return err
	}
	// A table rebuilt by versioned-hdf5 can list slots out of order or skip some; appending
	// at largest_index would then overwrite a live slot (spec section 12). Refuse such files.
	seen := make([]bool, ix.largest)
	var zero [32]byte
	for i := int64(0); i < ix.largest; i++ {
		row := buf[i*hashRowBytes : (i+1)*hashRowBytes]
		var d [32]byte
		copy(d[:], row)
		start := int64(binary.LittleEndian.Uint64(row[32:]))
		if start%ix.rows != 0 || start/ix.rows >= ix.largest || start < 0 {
			return fmt.Errorf("row %d: slot start %d is not a slot of this table", i, start)
		}
		seen[start/ix.rows] = true
		if d == zero {
			continue
		}
		if _, dup := ix.slots[d]; !dup {
			ix.slots[d] = start
		}
	}
	for k, ok := range seen {
		if !ok {
			return fmt.Errorf("slot %d has no row: the table has gaps (rebuild it with versioned-hdf5)", k)
		}
	}
	return nil
}

func (ix *index) close() { ix.table.Close() }
