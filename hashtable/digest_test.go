package hashtable

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func i64s(xs ...int64) []byte {
	b := make([]byte, 0, 8*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func f64s(xs ...float64) []byte {
	b := make([]byte, 0, 8*len(xs))
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func arangeI64(lo, hi int64) []byte {
	var xs []int64
	for i := lo; i < hi; i++ {
		xs = append(xs, i)
	}
	return i64s(xs...)
}

// linspace follows numpy: arange(num)*step + start, last element = stop.
// The explicit float64 conversion forbids fusing into an FMA.
func linspace(start, stop float64, num int) []float64 {
	step := (stop - start) / float64(num-1)
	xs := make([]float64, num)
	for i := range xs {
		xs[i] = float64(float64(i)*step) + start
	}
	xs[num-1] = stop
	return xs
}

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

func TestVectors(t *testing.T) {
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(0xA5 ^ i)
		}
		return b
	}

	// V3: float32 arange(12).reshape(3, 4).
	var v3 []byte
	for i := range 12 {
		v3 = binary.LittleEndian.AppendUint32(v3, math.Float32bits(float32(i)))
	}
	// V4: corner chunk (grid (2, 2)) of arange(35).reshape(5, 7), C=(2, 3):
	// only element [0, 0] = 34.0 is inside the array; the rest is garbage.
	v4 := garbage(2 * 3 * 8)
	copy(v4, f64s(34))
	// V9: S2 [b'ab', b'c', b''].
	v9 := []byte{0x61, 0x62, 0x63, 0x00, 0x00, 0x00}
	// V12/V13: linspace(1, 100, 1000), then element 3 = 8.0.
	ls := linspace(1, 100, 1000)
	v12 := f64s(ls...)
	ls[3] = 8
	v13 := f64s(ls...)
	// V15: int32 arange(6).reshape(2, 3).
	var v15 []byte
	for i := range 6 {
		v15 = binary.LittleEndian.AppendUint32(v15, uint32(i))
	}

	for _, tc := range []struct {
		name             string
		chunk            []byte
		chunkShape, trim []int64
		itemSize         int
		strings          []string // vlen strings instead of chunk
		vlen             bool
		want, wantSuffix string
	}{
		{name: "V1", chunk: arangeI64(0, 10), chunkShape: []int64{10}, trim: []int64{10}, itemSize: 8,
			want: "5f4955f5f937157e6e02bd962e2d15ec4e9d9b1faef20a55cfa0579d27118424", wantSuffix: "(10,)"},
		// V2: edge chunk of arange(25), C=(10,): full 10-element slot, 5 valid.
		{name: "V2", chunk: append(arangeI64(20, 25), garbage(40)...), chunkShape: []int64{10}, trim: []int64{5}, itemSize: 8,
			want: "aeedb16e9a0b0697e51da95c6d6740e2d0b6c160609b714d7c166a49c62e10db", wantSuffix: "(5,)"},
		{name: "V3", chunk: v3, chunkShape: []int64{3, 4}, trim: []int64{3, 4}, itemSize: 4,
			want: "f8b6efb1d5f4586b906476c96f56d7de48f68e4e269922f982daf18eb9ea1210", wantSuffix: "(3, 4)"},
		{name: "V4", chunk: v4, chunkShape: []int64{2, 3}, trim: []int64{1, 1}, itemSize: 8,
			want: "b9291700e323fc5e70b06eb6ce9b14e225ec68d5d80d5bbae4870045e43ff3c1", wantSuffix: "(1, 1)"},
		{name: "V5", vlen: true, strings: []string{"a", "bb", "ccc"}, trim: []int64{3},
			want: "9500c7255473e8edb7570dd8a87d379cd4dc770cccaf521b8495ef3ebb3d27de", wantSuffix: "(3,)"},
		{name: "V6", vlen: true, strings: []string{"\u00e9", "", "x"}, trim: []int64{3},
			want: "8bb2aeb5a4f2bfde0dbd91ad3922bca5cf9b20b6d8f175dbf8039884b5ee4aa0", wantSuffix: "(3,)"},
		{name: "V7", vlen: true, strings: []string{"ab", "", "c", "de"}, trim: []int64{2, 2},
			want: "e84ff5349cefb5b1cd0fb149b22cc0db59d37000a17cb26927dddff61a5148b3", wantSuffix: "(2, 2)"},
		{name: "V8", chunk: []byte{1, 0, 1}, chunkShape: []int64{3}, trim: []int64{3}, itemSize: 1,
			want: "a93ea13ef1225fd38b278e5d0d1f1091e2e1a07206e73031459efe8bf85c09cc", wantSuffix: "(3,)"},
		{name: "V9", chunk: v9, chunkShape: []int64{3}, trim: []int64{3}, itemSize: 2,
			want: "11c7e17062f37cdb9b068de72d07b33cae31b21744173bc7d58b9b6d552d443b", wantSuffix: "(3,)"},
		{name: "V10", chunk: make([]byte, 4096*8), chunkShape: []int64{4096}, trim: []int64{4096}, itemSize: 8,
			want: "63fcff971addd51f8f9aa014162f815c6fc8a0755fbb3816cd0238caad7b7129", wantSuffix: "(4096,)"},
		{name: "V11", chunk: garbage(4 * 3 * 8), chunkShape: []int64{4, 3}, trim: []int64{0, 3}, itemSize: 8,
			want: "1f1868f06925b61765ed3f845bb2c9d04e2dc1ae4356b7495dcae6bc18ed7150", wantSuffix: "(0, 3)"},
		{name: "V11 strings", vlen: true, trim: []int64{0, 3},
			want: "1f1868f06925b61765ed3f845bb2c9d04e2dc1ae4356b7495dcae6bc18ed7150", wantSuffix: "(0, 3)"},
		{name: "V12", chunk: v12, chunkShape: []int64{1000}, trim: []int64{1000}, itemSize: 8,
			want: "03b721a54d94dc09237d9c31acbdc28eab61dfe62eb3076b3feb39865f429288", wantSuffix: "(1000,)"},
		// V12 again as the trimmed head of a 4096-element slot.
		{name: "V12 in slot", chunk: append(append([]byte(nil), v12...), garbage(3096*8)...), chunkShape: []int64{4096}, trim: []int64{1000}, itemSize: 8,
			want: "03b721a54d94dc09237d9c31acbdc28eab61dfe62eb3076b3feb39865f429288", wantSuffix: "(1000,)"},
		{name: "V13", chunk: v13, chunkShape: []int64{1000}, trim: []int64{1000}, itemSize: 8,
			want: "a30faafef2f309486cb713060957222558e2e019af7bc9bfd136b4967558d6ea", wantSuffix: "(1000,)"},
		{name: "V14", chunk: f64s(1, 2, -3, -4), chunkShape: []int64{2}, trim: []int64{2}, itemSize: 16,
			want: "ddf20112143941c3acae7ce41e65b2bd78d7af14d8e828936afaab502fc1c43e", wantSuffix: "(2,)"},
		{name: "V15", chunk: v15, chunkShape: []int64{2, 3}, trim: []int64{2, 3}, itemSize: 4,
			want: "e30b3a9c180017602a1920cfb6bec9ca889796ff64fcd43f9908dc1e8a9d6abd", wantSuffix: "(2, 3)"},
		{name: "full message int64 [0,1,2]", chunk: i64s(0, 1, 2), chunkShape: []int64{3}, trim: []int64{3}, itemSize: 8,
			want: "6b1e0170df3836491ffcfa025ec4437fa3ea883392cf7fc5fd8797a4da01b1f2", wantSuffix: "(3,)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.wantSuffix, ShapeSuffix(tc.trim))
			var got [32]byte
			if tc.vlen {
				got = HashStrings(tc.strings, tc.trim)
			} else {
				got = Hash(tc.chunk, tc.chunkShape, tc.trim, tc.itemSize)
			}
			require.Equal(t, tc.want, hex.EncodeToString(got[:]))
		})
	}
}

func TestFullMessages(t *testing.T) {
	// int64 [0, 1, 2], (3,): the message is the body then "(3,)".
	msg := unhex(t, "000000000000000001000000000000000200000000000000"+"28332c29")
	require.Equal(t, append(i64s(0, 1, 2), "(3,)"...), msg)
	d := sha256.Sum256(msg)
	require.Equal(t, "6b1e0170df3836491ffcfa025ec4437fa3ea883392cf7fc5fd8797a4da01b1f2", hex.EncodeToString(d[:]))
	require.Equal(t, d, Hash(i64s(0, 1, 2), []int64{3}, []int64{3}, 8))

	// V5: length-prefixed strings then the suffix.
	msg = unhex(t, "0100000000000000"+"61"+"0200000000000000"+"6262"+"0300000000000000"+"636363"+"28332c29")
	d = sha256.Sum256(msg)
	require.Equal(t, "9500c7255473e8edb7570dd8a87d379cd4dc770cccaf521b8495ef3ebb3d27de", hex.EncodeToString(d[:]))
	require.Equal(t, d, HashStrings([]string{"a", "bb", "ccc"}, []int64{3}))
}

func TestShapeSuffix(t *testing.T) {
	for _, tc := range []struct {
		in   []int64
		want string
	}{
		{[]int64{10}, "(10,)"},
		{[]int64{5}, "(5,)"},
		{[]int64{3, 4}, "(3, 4)"},
		{[]int64{1, 1, 6}, "(1, 1, 6)"},
		{[]int64{0, 3}, "(0, 3)"},
		{[]int64{1234567890123}, "(1234567890123,)"},
		{nil, "()"},
	} {
		require.Equal(t, tc.want, ShapeSuffix(tc.in))
	}
}

// TestHashMatchesNaive compares the streaming, run-based hash with a naive
// element-by-element copy of the trimmed corner, over random shapes.
func TestHashMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		nd := 1 + rng.IntN(4)
		c := make([]int64, nd)
		l := make([]int64, nd)
		for i := range c {
			c[i] = 1 + rng.Int64N(5)
			switch rng.IntN(3) {
			case 0:
				l[i] = c[i]
			default:
				l[i] = rng.Int64N(c[i] + 1)
			}
		}
		is := 1 + rng.IntN(9)
		n := int(is)
		for _, x := range c {
			n *= int(x)
		}
		chunk := make([]byte, n+rng.IntN(3)) // longer buffers are fine
		for i := range chunk {
			chunk[i] = byte(rng.Uint32())
		}
		var body []byte
		idx := make([]int64, nd)
		empty := false
		for _, x := range l {
			empty = empty || x == 0
		}
		for !empty {
			var off int64
			for i := range nd {
				off = off*c[i] + idx[i]
			}
			body = append(body, chunk[off*int64(is):(off+1)*int64(is)]...)
			i := nd - 1
			for ; i >= 0; i-- {
				if idx[i]++; idx[i] < l[i] {
					break
				}
				idx[i] = 0
			}
			if i < 0 {
				break
			}
		}
		want := sha256.Sum256(append(body, ShapeSuffix(l)...))
		require.Equal(t, want, Hash(chunk, c, l, is), "C=%v L=%v itemsize %d", c, l, is)
	}
}

func TestCheckChunk(t *testing.T) {
	require.NoError(t, CheckChunk(48, []int64{2, 3}, []int64{1, 1}, 8))
	for _, tc := range []struct {
		n       int
		c, l    []int64
		is      int
		message string
	}{
		{48, []int64{2, 3}, []int64{1}, 8, "does not match"},
		{48, nil, nil, 8, "does not match"},
		{48, []int64{2, 3}, []int64{3, 1}, 8, "outside"},
		{48, []int64{2, 3}, []int64{-1, 1}, 8, "outside"},
		{48, []int64{0, 3}, []int64{0, 1}, 8, "outside"},
		{47, []int64{2, 3}, []int64{1, 1}, 8, "shorter"},
		{48, []int64{2, 3}, []int64{1, 1}, 0, "item size"},
		{48, []int64{1 << 62, 1 << 62}, []int64{1, 1}, 8, "shorter"},
	} {
		err := CheckChunk(tc.n, tc.c, tc.l, tc.is)
		require.ErrorContains(t, err, tc.message)
		require.ErrorContains(t, err, "commit:")
	}
	require.Panics(t, func() { Hash(make([]byte, 4), []int64{2}, []int64{2}, 8) })
}

func BenchmarkHashUntrimmed(b *testing.B) {
	chunk := make([]byte, 4096*8)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		Hash(chunk, []int64{4096}, []int64{4096}, 8)
	}
}
