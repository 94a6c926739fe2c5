package versions

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
)

// contentKeyKey is the Derived key of a dataset's content key.
type contentKeyKey struct{}

// ContentKey is a SHA-256 of what a committed version's dataset holds: its dtype, element
// size, shape, chunk shape, fill value and, in grid order, each stored chunk's grid index
// and the digest its raw_data slot has in the data group's hash_table. Two datasets with
// the same key have the same bytes, whatever their version's name, their file or where
// their slots are (a rename, a revert, another version's deletion and compact keep it; a
// rechunk changes it). ok is false for datasets without a clean chunk map (strings, the
// libhdf5 route, plain and live datasets) and when a stored slot has no hash_table row:
// their bytes cannot be named by content. Computed once per Dataset.
func (d *Dataset) ContentKey() (key [32]byte, ok bool, err error) {
	if d.arr == nil || d.live || d.Strings || d.RawData == "" {
		return key, false, nil
	}
	v, err := d.Derived(contentKeyKey{}, func() (any, error) {
		k, ok, err := d.contentKey()
		if err != nil || !ok {
			return nil, err
		}
		return k, nil
	})
	if err != nil || v == nil {
		return key, false, err
	}
	return v.([32]byte), true, nil
}

func (d *Dataset) contentKey() ([32]byte, bool, error) {
	var key [32]byte
	digests, err := d.slotDigests()
	if err != nil || digests == nil {
		return key, false, err
	}
	h := sha256.New()
	var buf []byte
	put := func(vs ...int64) {
		buf = buf[:0]
		for _, v := range vs {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		}
		h.Write(buf)
	}
	h.Write([]byte("vh5fs decoded v1\x00" + d.Type.DType + "\x00"))
	put(int64(d.Type.Size), int64(len(d.Shape)))
	put(d.Shape...)
	put(d.Chunks...)
	put(int64(len(d.Fill)))
	h.Write(d.Fill)
	missing := false
	if _, err := d.EachBlock(func(grid []int64, row int64) error {
		sum, ok := digests[row]
		if !ok {
			missing = true
			return errStopKey
		}
		put(grid...)
		h.Write(sum[:])
		return nil
	}); err != nil && err != errStopKey {
		return key, false, err
	}
	if missing {
		return key, false, nil
	}
	h.Sum(key[:0])
	return key, true, nil
}

var errStopKey = fmt.Errorf("stop")

// slotDigests reads the hash_table beside the dataset's raw_data: each slot's digest by
// its first row. nil without an error when the data group has no usable table.
func (d *Dataset) slotDigests() (map[int64][32]byte, error) {
	tp := HashTableIn(d.DataGroup())
	if k, err := d.f.h.Kind(tp); err != nil || k != h5.KindDataset {
		return nil, nil
	}
	ht, err := d.f.h.OpenDataset(tp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tp, err)
	}
	defer ht.Close()
	if hashtable.CheckTable(ht) != nil {
		return nil, nil
	}
	n := ht.Info().Shape[0]
	if l, ok, err := hashtable.Largest(d.f.h, tp); err == nil && ok && l <= n {
		n = l
	}
	out := make(map[int64][32]byte, n)
	if err := hashtable.Scan(ht, n, func(_ int64, r hashtable.Row) error {
		out[r.Start] = r.Digest
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: %w", tp, err)
	}
	return out, nil
}
