package h5meta

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// collection is a global heap collection ("GCOL", version 1, 8-byte lengths) holding the
// given objects by index, then free space up to size bytes.
func collection(size int, objs map[uint16]string, order []uint16) []byte {
	b := append([]byte("GCOL\x01\x00\x00\x00"), make([]byte, 8)...)
	binary.LittleEndian.PutUint64(b[8:], uint64(size))
	for _, idx := range order {
		hdr := make([]byte, 16)
		binary.LittleEndian.PutUint16(hdr, idx)
		binary.LittleEndian.PutUint64(hdr[8:], uint64(len(objs[idx])))
		b = append(append(b, hdr...), objs[idx]...)
		b = append(b, make([]byte, (8-len(b)%8)%8)...)
	}
	free := make([]byte, 16) // index 0: the free space, as long as the rest
	binary.LittleEndian.PutUint64(free[8:], uint64(size-len(b)))
	return append(append(b, free...), make([]byte, size-len(b)-16)...)
}

// TestGlobalHeapIndex: objects are found by index wherever they are in their collection,
// and an index the collection does not hold is an error, from a collection read once.
func TestGlobalHeapIndex(t *testing.T) {
	objs := map[uint16]string{1: "one", 2: "", 5: "five, stored after seven", 7: "seven"}
	raw := collection(4096, objs, []uint16{1, 2, 7, 5})
	counted := &countingReader{r: bytes.NewReader(raw)}
	f := &File{r: counted, size: int64(len(raw)), so: 8, sl: 8}
	for _, tc := range []struct {
		idx  uint32
		want string
		err  string
	}{
		{idx: 1, want: "one"},
		{idx: 2, want: ""},
		{idx: 5, want: "five, stored after seven"},
		{idx: 7, want: "seven"},
		{idx: 0, err: "has no object 0"}, // the free space
		{idx: 3, err: "has no object 3"},
		{idx: 8, err: "has no object 8"},
		{idx: 70000, err: "has no object 70000"},
	} {
		got, err := f.globalHeapObject(0, tc.idx)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "object %d", tc.idx)
			continue
		}
		require.NoError(t, err, "object %d", tc.idx)
		require.Equal(t, tc.want, string(got), "object %d", tc.idx)
	}
	require.Equal(t, 2, counted.reads, "the collection's header, then the collection once")
}

type countingReader struct {
	r     *bytes.Reader
	reads int
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.r.ReadAt(p, off)
}
