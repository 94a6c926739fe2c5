package commit

import (
	"fmt"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

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
	path := versions.HashTableIn(group)
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
	if err := hashtable.CheckTable(ix.table); err != nil {
		return err
	}
	largest, _, err := hashtable.Largest(f, ix.path)
	if err != nil {
		return err
	}
	if rows := ix.table.Info().Shape[0]; largest > rows {
		return fmt.Errorf("largest_index %d beyond the table's %d rows", largest, rows)
	}
	ix.largest = largest
	// A table rebuilt by versioned-hdf5 can list slots out of order or skip some; appending
	// at largest_index would then overwrite a live slot (spec section 12). Refuse such files.
	seen := make([]bool, ix.largest)
	var zero [32]byte
	err = hashtable.Scan(ix.table, ix.largest, func(i int64, r hashtable.Row) error {
		if r.Start%ix.rows != 0 || r.Start/ix.rows >= ix.largest || r.Start < 0 {
			return fmt.Errorf("row %d: slot start %d is not a slot of this table", i, r.Start)
		}
		seen[r.Start/ix.rows] = true
		if _, dup := ix.slots[r.Digest]; !dup && r.Digest != zero {
			ix.slots[r.Digest] = r.Start
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k, ok := range seen {
		if !ok {
			return fmt.Errorf("slot %d has no row: the table has gaps (rebuild it with versioned-hdf5)", k)
		}
	}
	return nil
}

func (ix *index) close() { ix.table.Close() }
