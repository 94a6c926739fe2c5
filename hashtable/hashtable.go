// Package hashtable reads and writes a data group's hash_table: versioned-hdf5's index of
// the chunks stored in raw_data, one 48-byte row per slot (the chunk's SHA-256 digest,
// then the slot's first row and the row past its data along axis 0, little-endian int64),
// with the rows in use counted by the table's largest_index attribute (spec section 4);
// and the digest itself (Hash, digest.go). Every package that hashes a chunk, reads or
// writes the table goes through this package.
package hashtable

import (
	"encoding/binary"
	"fmt"

	"github.com/vh5fs/vh5fs/h5"
)

// RowBytes is the size of one row.
const RowBytes = 48

// LargestIndex is the attribute that counts the rows in use.
const LargestIndex = "largest_index"

// Row is one slot's row: the digest of its chunk's data and the rows [Start, Stop) of
// raw_data along axis 0 it holds (Stop-Start is less than the chunk's extent for an edge
// chunk).
type Row struct {
	Digest      [32]byte
	Start, Stop int64
}

// Append appends r's encoding to b.
func (r Row) Append(b []byte) []byte {
	b = append(b, r.Digest[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Start))
	return binary.LittleEndian.AppendUint64(b, uint64(r.Stop))
}

// Decode decodes the row at the start of b (RowBytes or more).
func Decode(b []byte) Row {
	var r Row
	copy(r.Digest[:], b[:32])
	r.Start = int64(binary.LittleEndian.Uint64(b[32:]))
	r.Stop = int64(binary.LittleEndian.Uint64(b[40:]))
	return r
}

// Largest reads the table's largest_index: ok is false when it has none, and an error
// says it is not a non-negative integer.
func Largest(f *h5.File, path string) (n int64, ok bool, err error) {
	a, ok, err := f.Attr(path, LargestIndex)
	if err != nil || !ok {
		return 0, ok, err
	}
	n, isInt := a.Value.(int64)
	if !isInt || n < 0 {
		return 0, true, fmt.Errorf("%s is %v, not a row count", LargestIndex, a.Value)
	}
	return n, true, nil
}

// CheckTable reports an error unless t has the shape of a hash_table: one axis of
// RowBytes elements.
func CheckTable(t *h5.Dataset) error {
	if info := t.Info(); info.Type.Size != RowBytes || len(info.Shape) != 1 {
		return fmt.Errorf("not a versioned-hdf5 hash table (%d-byte rows, rank %d)", info.Type.Size, len(info.Shape))
	}
	return nil
}

// scanRows is how many rows Scan reads at a time.
const scanRows = 1 << 14

// Scan calls fn with rows [0, n) of the table t in order, read scanRows at a time.
func Scan(t *h5.Dataset, n int64, fn func(i int64, r Row) error) error {
	buf := make([]byte, RowBytes*min(n, scanRows))
	for base := int64(0); base < n; base += scanRows {
		k := min(n-base, scanRows)
		if err := t.ReadBox([]int64{base}, []int64{k}, []int64{k}, []int64{0}, buf[:RowBytes*k]); err != nil {
			return err
		}
		for j := range k {
			if err := fn(base+j, Decode(buf[RowBytes*j:])); err != nil {
				return err
			}
		}
	}
	return nil
}

// Write gives the table at path size rows (its extent), writes the encoded rows from row
// at on, then sets largest_index to largest: in that order, so that a crash between leaves
// only rows the count does not reach (spec section 4).
func Write(f *h5.File, t *h5.Dataset, path string, at int64, rows []byte, size, largest int64) error {
	if size != t.Info().Shape[0] {
		if err := t.SetExtent([]int64{size}); err != nil {
			return err
		}
	}
	if k := int64(len(rows) / RowBytes); k > 0 {
		if err := t.WriteBox([]int64{at}, []int64{k}, []int64{k}, []int64{0}, rows); err != nil {
			return err
		}
	}
	return f.SetAttrInt64(path, LargestIndex, largest)
}
