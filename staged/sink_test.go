package staged

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// memSink is a Sink in memory that records what it was offered and can fail.
type memSink struct {
	chunks map[int64][]byte
	order  [][32]byte // digests in the order taken
	fail   bool       // Put errs
	refuse bool       // Put declines
	forgot int
}

func (m *memSink) Put(data, _ []byte, sum [32]byte) (int64, bool, error) {
	switch {
	case m.fail:
		return 0, false, errors.New("disk full")
	case m.refuse:
		return 0, false, nil
	}
	ref := int64(len(m.order))
	m.chunks[ref] = bytes.Clone(data)
	m.order = append(m.order, sum)
	return ref, true, nil
}

func (m *memSink) Load(ref int64, buf []byte) error {
	copy(buf, m.chunks[ref])
	return nil
}

func (m *memSink) Forget(ref int64) { delete(m.chunks, ref); m.forgot++ }

// TestSink: the array gives the sink only a prefix of its staging order — whole chunks
// with their digests, oldest first — and spills the rest once anything breaks the order
// (a sink that fails or declines, a sunk chunk written again); every byte reads back.
func TestSink(t *testing.T) {
	const chunk = 4 << 10
	digest := func(c []byte, _, _ []int64, _ int) [32]byte { return sha256.Sum256(c) }
	tests := []struct {
		name   string
		sink   memSink
		writes []int64 // chunk indices written whole, in order
		again  int64   // then this chunk partly (-1: none)
		sunk   int     // chunks the sink holds at the end
	}{
		{name: "in order", writes: []int64{0, 1, 2, 3, 4, 5, 6, 7}, again: -1, sunk: 6},
		{name: "written again", writes: []int64{0, 1, 2, 3, 4, 5, 6, 7}, again: 1, sunk: 5},
		{name: "fails", sink: memSink{fail: true}, writes: []int64{0, 1, 2, 3, 4, 5}, again: -1, sunk: 0},
		{name: "declines", sink: memSink{refuse: true}, writes: []int64{0, 1, 2, 3, 4, 5}, again: -1, sunk: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New([]int64{8 * chunk / 8}, []int64{chunk / 8}, 8, make([]byte, 8))
			require.NoError(t, err)
			st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), 2*chunk)
			t.Cleanup(func() { st.Close() })
			st.SetDigester(digest)
			a.UseStore(st)
			sink := tt.sink
			sink.chunks = map[int64][]byte{}
			a.UseSink(&sink)
			want := make([]byte, a.Size())
			for _, k := range tt.writes {
				p := bytes.Repeat([]byte{byte(k + 1)}, chunk)
				_, err := a.WriteAt(p, k*chunk, nil)
				require.NoError(t, err)
				copy(want[k*chunk:], p)
			}
			if tt.again >= 0 {
				p := bytes.Repeat([]byte{0xEE}, 100)
				_, err := a.WriteAt(p, tt.again*chunk+10, nil)
				require.NoError(t, err)
				copy(want[tt.again*chunk+10:], p)
				// Written after the order broke: spilled, not sunk.
				p = bytes.Repeat([]byte{0xDD}, 2*chunk)
				_, err = a.WriteAt(p, 0, nil)
				require.NoError(t, err)
				copy(want, p)
			}
			got := make([]byte, a.Size())
			_, err = a.ReadAt(got, 0, nil)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Len(t, sink.chunks, tt.sunk)
			for i, sum := range sink.order[:min(len(sink.order), 6)] {
				require.Equal(t, sha256.Sum256(bytes.Repeat([]byte{byte(i + 1)}, chunk)), sum, "the sink took chunk %d out of order", i)
			}
			a.Discard()
			require.Empty(t, sink.chunks, "a discarded array forgets what the sink holds")
		})
	}
}

// TestSinkOld: under a budget it does not reach, the array still gives the sink its chunks
// once sinkAge bytes of later ones have followed them, oldest first, and keeps the newest
// in memory; a chunk written in part over the base holds the ones after it back until it
// is whole.
func TestSinkOld(t *testing.T) {
	const chunk = 4 << 10
	n := int64(sinkAge/chunk + 200)
	digest := func(c []byte, _, _ []int64, _ int) [32]byte { return sha256.Sum256(c) }
	content := func(k int64) []byte {
		p := make([]byte, chunk)
		binary.LittleEndian.PutUint64(p, uint64(k)+1)
		return p
	}
	tests := []struct {
		name    string
		partial bool // chunk 0 starts on the base slab, written in two halves at the end
	}{{name: "streaming"}, {name: "held back by a partial chunk", partial: true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New([]int64{n * chunk}, []int64{chunk}, 1, []byte{0})
			require.NoError(t, err)
			base := bytes.Repeat([]byte{0xba}, chunk)
			src := &fakeSource{raw: base, chunkBytes: chunk, rows: chunk, calls: map[int64]int{}}
			if tt.partial {
				require.NoError(t, a.MapBase([]int64{0}, 0))
			}
			st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), 1<<30)
			t.Cleanup(func() { st.Close() })
			st.SetDigester(digest)
			a.UseStore(st)
			sink := memSink{chunks: map[int64][]byte{}}
			a.UseSink(&sink)
			want := make([]byte, a.Size())
			first := int64(0)
			if tt.partial {
				_, err := a.WriteAt(content(0)[:chunk/2], 0, src)
				require.NoError(t, err)
				first = 1
			}
			for k := first; k < n; k++ {
				_, err := a.WriteAt(content(k), k*chunk, src)
				require.NoError(t, err)
			}
			for k := range n {
				copy(want[k*chunk:], content(k))
			}
			if tt.partial {
				require.Empty(t, sink.chunks, "the partial chunk holds the later ones back")
				_, err := a.WriteAt(content(0)[chunk/2:], chunk/2, src)
				require.NoError(t, err)
				s, _ := a.Slab([]int64{0})
				a.waitDigest(s)                                    // whole now: digested on a worker
				_, err = a.WriteAt(content(n-1), (n-1)*chunk, src) // a write runs the eviction
				require.NoError(t, err)
				require.Empty(t, src.calls, "completed by its writes: its base was never read")
			}
			require.NotEmpty(t, sink.chunks, "old chunks went to the sink")
			require.LessOrEqual(t, int64(len(sink.order)), n-sinkAge/chunk, "the newest sinkAge bytes stay in memory")
			for i, sum := range sink.order {
				require.Equal(t, sha256.Sum256(content(int64(i))), sum, "the sink took chunk %d out of order", i)
			}
			got := make([]byte, a.Size())
			_, err = a.ReadAt(got, 0, src)
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}
