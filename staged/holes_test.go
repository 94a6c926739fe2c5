package staged

import (
	"bytes"
	"crypto/sha256"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHolesAdd(t *testing.T) {
	tests := []struct {
		name    string
		adds    []span
		want    []span
		written int64
	}{
		{name: "sequential", adds: []span{{0, 4}, {4, 8}, {8, 9}}, want: []span{{0, 9}}, written: 9},
		{name: "gaps", adds: []span{{0, 2}, {4, 6}, {8, 10}}, want: []span{{0, 2}, {4, 6}, {8, 10}}, written: 6},
		{name: "backwards", adds: []span{{8, 10}, {4, 6}, {0, 2}, {2, 4}}, want: []span{{0, 6}, {8, 10}}, written: 8},
		{name: "overlapping", adds: []span{{2, 6}, {0, 3}, {5, 9}}, want: []span{{0, 9}}, written: 9},
		{name: "bridging", adds: []span{{0, 2}, {4, 6}, {8, 10}, {1, 9}}, want: []span{{0, 10}}, written: 10},
		{name: "inside", adds: []span{{0, 10}, {3, 4}, {12, 14}, {12, 13}}, want: []span{{0, 10}, {12, 14}}, written: 12},
		{name: "empty", adds: []span{{3, 3}}, want: nil, written: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h holes
			for _, s := range tt.adds {
				h.add(s.lo, s.hi)
			}
			require.Equal(t, tt.want, h.spans)
			require.Equal(t, tt.written, h.written)
		})
	}
}

// TestHolesBaseReads: a base chunk written in pieces reads its base only when its other
// bytes are needed — never if the writes complete it, once at the listing otherwise, and
// at once when its pieces pass maxSpans — and every read sees the written bytes over the
// base's; a chunk of the fill value written in pieces reads the fill value there.
func TestHolesBaseReads(t *testing.T) {
	const n = 1024 // one chunk of n bytes
	tests := []struct {
		name   string
		fill   bool       // the chunk starts on the full slab, not the base
		pieces [][2]int64 // (off, len) written in order
		reads  int        // base reads by the writes
		listed int        // base reads by StagedChunks after them
	}{
		{name: "completed backwards", pieces: backwards(n, 100), reads: 0, listed: 0},
		{name: "half", pieces: [][2]int64{{0, 300}, {700, 100}}, reads: 0, listed: 1},
		{name: "every other byte", pieces: everyOther(n), reads: 1, listed: 0},
		{name: "fill, half", fill: true, pieces: [][2]int64{{0, 301}, {700, 101}}},
		{name: "fill, every other byte", fill: true, pieces: everyOther(n)},
		{name: "fill, completed backwards", fill: true, pieces: backwards(n, 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fill := []byte{0x7f, 0x11} // two-byte elements: pieces end inside them
			a, err := New([]int64{n / 2}, []int64{n / 2}, 2, fill)
			require.NoError(t, err)
			base := bytes.Repeat([]byte{0xba}, n)
			src := &fakeSource{raw: base, chunkBytes: n, rows: n / 2, calls: map[int64]int{}}
			want := bytes.Repeat(fill, n/2)
			if !tt.fill {
				require.NoError(t, a.MapBase([]int64{0}, 0))
				want = bytes.Clone(base)
			}
			for i, p := range tt.pieces {
				b := bytes.Repeat([]byte{byte(i + 1)}, int(p[1]))
				_, err := a.WriteAt(b, p[0], src)
				require.NoError(t, err)
				copy(want[p[0]:], b)
			}
			require.Equal(t, tt.reads, src.calls[0], "base reads by the writes")
			got := make([]byte, n)
			_, err = a.ReadAt(got, 0, src)
			require.NoError(t, err)
			require.Equal(t, want, got)
			clear(src.calls)
			sc := stagedChunks(t, a)
			require.Equal(t, tt.listed, src.calls[0], "base reads by the listing")
			require.Len(t, sc, 1)
			require.Equal(t, want, sc[0].Data)
		})
	}
}

// backwards covers [0, n) with pieces of size k, last first.
func backwards(n, k int64) [][2]int64 {
	var out [][2]int64
	for off := (n - 1) / k * k; off >= 0; off -= k {
		out = append(out, [2]int64{off, min(k, n-off)})
	}
	return out
}

// everyOther writes the even bytes of [0, n) one by one: n/2 pieces.
func everyOther(n int64) [][2]int64 {
	var out [][2]int64
	for off := int64(0); off < n; off += 2 {
		out = append(out, [2]int64{off, 1})
	}
	return out
}

// TestHolesAppend: a dataset grown by small writes at its end (a file written with
// O_APPEND, or dd past its end) gets each chunk digested once, when the writes have filled
// it, and never its edge chunk while it still grows; what it reads is what was written.
func TestHolesAppend(t *testing.T) {
	const chunk, piece, pieces = 1024, 100, 31 // three full chunks and 28 bytes of a fourth
	var digests atomic.Int64
	digest := func(c []byte, _, l []int64, _ int) [32]byte {
		digests.Add(1)
		return sha256.Sum256(c[:l[0]])
	}
	a, err := New([]int64{0}, []int64{chunk}, 1, []byte{0x7f})
	require.NoError(t, err)
	st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), 1<<20)
	t.Cleanup(func() { st.Close() })
	st.SetDigester(digest)
	a.UseStore(st)
	var want []byte
	for k := range int64(pieces) {
		p := bytes.Repeat([]byte{byte(k + 1)}, piece)
		require.NoError(t, a.Resize([]int64{(k + 1) * piece}, nil))
		_, err := a.WriteAt(p, k*piece, nil)
		require.NoError(t, err)
		want = append(want, p...)
	}
	got := make([]byte, a.Size())
	_, err = a.ReadAt(got, 0, nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
	sc := stagedChunks(t, a)
	require.Equal(t, 4, len(sc))
	for i, c := range sc[:3] {
		require.NotNil(t, c.Digest, "full chunk %d digested when the writes filled it", i)
		require.Equal(t, sha256.Sum256(want[i*chunk:(i+1)*chunk]), *c.Digest)
	}
	require.Nil(t, sc[3].Digest, "the edge chunk is digested by the commit")
	require.Equal(t, int64(3), digests.Load(), "one digest per full chunk, none of a growing edge")
	require.True(t, bytes.Equal(bytes.Repeat([]byte{0x7f}, chunk-len(want)%chunk), sc[3].Data[len(want)%chunk:]), "padding: the fill value")
}

// TestEdgeDigests: a chunk written whole is digested at the write unless growing axis 0
// could still extend it to its full shape (then the writes that fill it do).
func TestEdgeDigests(t *testing.T) {
	tests := []struct {
		name          string
		shape, chunks []int64
		digested      []bool // per chunk, C order
	}{
		{name: "1-D, short last chunk", shape: []int64{10}, chunks: []int64{4}, digested: []bool{true, true, false}},
		{name: "2-D, short on axis 1", shape: []int64{4, 5}, chunks: []int64{4, 4}, digested: []bool{true, true}},
		{name: "2-D, short on both axes", shape: []int64{3, 5}, chunks: []int64{4, 4}, digested: []bool{false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.shape, tt.chunks, 1, []byte{0})
			require.NoError(t, err)
			st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), 1<<20)
			t.Cleanup(func() { st.Close() })
			st.SetDigester(func(c []byte, _, _ []int64, _ int) [32]byte { return sha256.Sum256(c) })
			a.UseStore(st)
			_, err = a.WriteAt(bytes.Repeat([]byte{1}, int(a.Size())), 0, nil)
			require.NoError(t, err)
			sc := stagedChunks(t, a)
			require.Len(t, sc, len(tt.digested))
			for i, c := range sc {
				require.Equal(t, tt.digested[i], c.Digest != nil, "chunk %v", c.Grid)
			}
		})
	}
}
