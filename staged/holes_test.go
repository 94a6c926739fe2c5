package staged

import (
	"bytes"
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
// base's.
func TestHolesBaseReads(t *testing.T) {
	const n = 1024 // one chunk of n bytes
	tests := []struct {
		name   string
		pieces [][2]int64 // (off, len) written in order
		reads  int        // base reads by the writes
		listed int        // base reads by StagedChunks after them
	}{
		{name: "completed backwards", pieces: backwards(n, 100), reads: 0, listed: 0},
		{name: "half", pieces: [][2]int64{{0, 300}, {700, 100}}, reads: 0, listed: 1},
		{name: "every other byte", pieces: everyOther(n), reads: 1, listed: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New([]int64{n}, []int64{n}, 1, []byte{0})
			require.NoError(t, err)
			base := bytes.Repeat([]byte{0xba}, n)
			src := &fakeSource{raw: base, chunkBytes: n, rows: n, calls: map[int64]int{}}
			require.NoError(t, a.MapBase([]int64{0}, 0))
			want := bytes.Clone(base)
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
