package hashtable_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

func TestRowCodec(t *testing.T) {
	for _, r := range []hashtable.Row{
		{},
		{Digest: sha256.Sum256([]byte("a")), Start: 4096, Stop: 4100},
		{Digest: sha256.Sum256([]byte("b")), Start: 1 << 40, Stop: 1<<40 + 1},
	} {
		b := r.Append([]byte("prefix"))
		require.Len(t, b, len("prefix")+hashtable.RowBytes)
		enc := b[len("prefix"):]
		require.Equal(t, r.Digest[:], enc[:32], "the digest first")
		require.Equal(t, uint64(r.Start), binary.LittleEndian.Uint64(enc[32:]), "then start, little-endian")
		require.Equal(t, uint64(r.Stop), binary.LittleEndian.Uint64(enc[40:]), "then stop")
		require.Equal(t, r, hashtable.Decode(enc))
	}
}

// TestWriteScan: rows written past the ones a table holds are read back in order, across
// Scan's windows, and largest_index counts them; a table that is not one is refused.
func TestWriteScan(t *testing.T) {
	f, err := h5.OpenRW(fixture.Copy(t, fixture.Dir()+"/basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	const path = "/_version_data/x/hash_table"
	tab, err := f.OpenDataset(path)
	require.NoError(t, err)
	defer tab.Close()
	require.NoError(t, hashtable.CheckTable(tab))
	before, ok, err := hashtable.Largest(f, path)
	require.NoError(t, err)
	require.True(t, ok)
	require.Positive(t, before)

	const added = 40000 // more than one window
	var rows []byte
	for i := range int64(added) {
		rows = hashtable.Row{Digest: sha256.Sum256(binary.LittleEndian.AppendUint64(nil, uint64(i))),
			Start: (before + i) * 8, Stop: (before+i)*8 + 3}.Append(rows)
	}
	n := before + added
	require.NoError(t, hashtable.Write(f, tab, path, before, rows, n, n))
	largest, ok, err := hashtable.Largest(f, path)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, n, largest)
	var got []byte
	next := int64(0)
	require.NoError(t, hashtable.Scan(tab, n, func(i int64, r hashtable.Row) error {
		require.Equal(t, next, i)
		next++
		if i >= before {
			got = r.Append(got)
		}
		return nil
	}))
	require.Equal(t, n, next)
	require.True(t, bytes.Equal(rows, got), "the rows written, in order")

	raw, err := f.OpenDataset("/_version_data/x/raw_data")
	require.NoError(t, err)
	defer raw.Close()
	require.ErrorContains(t, hashtable.CheckTable(raw), "not a versioned-hdf5 hash table")
	require.NoError(t, f.SetAttrString(path, hashtable.LargestIndex, "many"))
	_, ok, err = hashtable.Largest(f, path)
	require.True(t, ok)
	require.ErrorContains(t, err, "not a row count")
}
