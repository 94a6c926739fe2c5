package commit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/filters"
	"github.com/vh5fs/vh5fs/h5"
)

// TestEncoderRoundTrip: every pipeline the encoder runs decodes (with the reader's
// decoder) to the chunk it was given, for element sizes with and without shuffle work.
func TestEncoderRoundTrip(t *testing.T) {
	pipelines := []struct {
		name string
		p    []h5.Filter
	}{
		{"none", nil},
		{"shuffle", []h5.Filter{{ID: filterShuffle}}},
		{"deflate1", []h5.Filter{{ID: filterDeflate, Params: []uint32{1}}}},
		{"shuffle+deflate4", []h5.Filter{{ID: filterShuffle}, {ID: filterDeflate, Params: []uint32{4}}}},
		{"shuffle+deflate9", []h5.Filter{{ID: filterShuffle}, {ID: filterDeflate, Params: []uint32{9}}}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, pl := range pipelines {
		for _, is := range []int{1, 2, 8, 12} {
			t.Run(fmt.Sprintf("%s/is%d", pl.name, is), func(t *testing.T) {
				enc := newEncoder(pl.p, is)
				require.NotNil(t, enc)
				chunk := make([]byte, 4096*is)
				for i := range chunk {
					chunk[i] = byte(rng.IntN(4)) // compressible
				}
				orig := append([]byte(nil), chunk...)
				stored, owned, err := enc.encode(chunk)
				require.NoError(t, err)
				require.Equal(t, orig, chunk, "input untouched")
				require.Equal(t, len(pl.p) > 0 && (is > 1 || len(pl.p) > 1 || pl.p[0].ID != filterShuffle), owned)
				var fp []filters.Filter
				for _, f := range pl.p {
					fp = append(fp, filters.Filter{ID: f.ID, Params: f.Params})
				}
				got, err := filters.Decode(stored, fp, 0, is, len(chunk), make([]byte, len(chunk)))
				require.NoError(t, err)
				require.Equal(t, orig, got)
				if owned {
					enc.release(stored)
				}
			})
		}
	}
}

func TestEncoderRefusesUnknownFilters(t *testing.T) {
	for _, p := range [][]h5.Filter{
		{{ID: 3}},     // fletcher32
		{{ID: 32000}}, // lzf
		{{ID: filterDeflate}},
		{{ID: filterShuffle}, {ID: filterDeflate, Params: []uint32{10}}},
	} {
		require.Nil(t, newEncoder(p, 8), "%v", p)
	}
}

// TestShuffle against the filter's definition: byte j of element i goes to j*n+i.
func TestShuffle(t *testing.T) {
	src := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	dst := make([]byte, len(src))
	shuffle(dst, src, 3)
	require.Equal(t, []byte{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12, 13}, dst)
	for _, n := range []int{5, 8, 21, 8192} { // element counts below, at and past 8x8 blocks
		for _, size := range []int{2, 4, 8} {
			src := make([]byte, size*n+size-1) // and a partial element
			for i := range src {
				src[i] = byte(i*7 + i/251)
			}
			dst := make([]byte, len(src))
			shuffle(dst, src, size)
			for i := range n {
				for j := range size {
					require.Equal(t, src[i*size+j], dst[j*n+i], "n %d size %d element %d byte %d", n, size, i, j)
				}
			}
			require.Equal(t, src[n*size:], dst[n*size:])
		}
	}
}

func BenchmarkShuffle8(b *testing.B) {
	src, dst := make([]byte, 64<<10), make([]byte, 64<<10)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		shuffle(dst, src, 8)
	}
}

// TestOrdered: results are consumed in order whatever order they are produced in, at most
// window ahead of the one being consumed; the first error stops it and every produced
// result not consumed is discarded.
func TestOrdered(t *testing.T) {
	for _, n := range []int{0, 1, 7, 200} {
		var got []int
		var mu sync.Mutex
		ahead, maxAhead := 0, 0 // produce calls begun less consume calls begun
		err := Ordered(n, 5, func(i int) (int, error) {
			mu.Lock()
			ahead++
			maxAhead = max(maxAhead, ahead)
			mu.Unlock()
			return i * i, nil
		}, func(i, v int) error {
			mu.Lock()
			ahead--
			mu.Unlock()
			require.Equal(t, i*i, v)
			got = append(got, i)
			return nil
		}, nil)
		require.NoError(t, err)
		require.Len(t, got, n)
		for i, g := range got {
			require.Equal(t, i, g)
		}
		require.LessOrEqual(t, maxAhead, 5+1, "the window and the result consume holds")
	}
	boom := errors.New("boom")
	for _, failAt := range []string{"produce", "consume"} {
		var produced, consumed, discarded atomic.Int64
		err := Ordered(100, 4, func(i int) (int, error) {
			if failAt == "produce" && i == 10 {
				return 0, boom
			}
			produced.Add(1)
			return i, nil
		}, func(i, v int) error {
			consumed.Add(1)
			if failAt == "consume" && i == 10 {
				return boom
			}
			return nil
		}, func(int) { discarded.Add(1) })
		require.ErrorIs(t, err, boom, failAt)
		require.Equal(t, produced.Load(), consumed.Load()+discarded.Load(), "%s: every result consumed or discarded", failAt)
	}
	require.ErrorIs(t, Parallel(50, func(i int) error {
		if i == 7 {
			return boom
		}
		return nil
	}), boom)
}
