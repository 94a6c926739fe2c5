package filters

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
)

// TestAgainstLibhdf5 writes datasets with h5py under each pipeline, then decodes every
// stored chunk read straight from the file and compares with libhdf5's read of it.
func TestAgainstLibhdf5(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pipelines.h5")
	script := `
import sys, h5py, numpy as np
rng = np.random.default_rng(1)
smooth = np.arange(6000, dtype="<f8").reshape(60, 100)
noise = rng.integers(0, 2**62, size=(60, 100), dtype="<i8")
with h5py.File(sys.argv[1], "w") as f:
    for name, data in (("smooth", smooth), ("noise", noise)):
        f.create_dataset(name + "/none", data=data, chunks=(16, 30))
        f.create_dataset(name + "/gzip_shuffle", data=data, chunks=(16, 30), compression="gzip", compression_opts=4, shuffle=True)
        f.create_dataset(name + "/shuffle", data=data, chunks=(16, 30), shuffle=True)
        f.create_dataset(name + "/lzf", data=data, chunks=(16, 30), compression="lzf")
        f.create_dataset(name + "/fletcher_gzip", data=data, chunks=(16, 30), compression="gzip", fletcher32=True)
        f.create_dataset(name + "/u2_shuffle_lzf", data=(data % 65536).astype("<u2"), chunks=(7, 9), shuffle=True, compression="lzf")
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	f, err := h5.Open(file)
	require.NoError(t, err)
	defer f.Close()
	skipped := 0
	for _, group := range []string{"/smooth", "/noise"} {
		members, err := f.Members(group)
		require.NoError(t, err)
		for _, m := range members {
			path := group + "/" + m.Name
			t.Run(path, func(t *testing.T) {
				d, err := f.OpenDataset(path)
				require.NoError(t, err)
				defer d.Close()
				info := d.Info()
				var pipeline []Filter
				for _, fl := range info.Filters {
					pipeline = append(pipeline, Filter{ID: fl.ID, Params: fl.Params})
				}
				require.True(t, Supported(pipeline))
				var coords [][]int64
				for r := int64(0); r < info.Shape[0]; r += info.Chunks[0] {
					for c := int64(0); c < info.Shape[1]; c += info.Chunks[1] {
						coords = append(coords, []int64{r, c})
					}
				}
				infos, err := d.ChunkInfo(coords)
				require.NoError(t, err)
				size := info.Type.Size * int(info.Chunks[0]*info.Chunks[1])
				for i, ci := range infos {
					got, err := Decode(raw[ci.Offset:ci.Offset+ci.Size], pipeline, ci.FilterMask, info.Type.Size, size, nil)
					require.NoError(t, err, "chunk %v", coords[i])
					want := make([]byte, size)
					count := []int64{min(info.Chunks[0], info.Shape[0]-coords[i][0]), min(info.Chunks[1], info.Shape[1]-coords[i][1])}
					require.NoError(t, d.ReadBox(coords[i], count, info.Chunks, []int64{0, 0}, want))
					// Compare the part inside the dataset (edge chunks' padding is unspecified).
					for r := int64(0); r < count[0]; r++ {
						row := int(r*info.Chunks[1]) * info.Type.Size
						n := int(count[1]) * info.Type.Size
						require.Equal(t, want[row:row+n], got[row:row+n], "chunk %v row %d", coords[i], r)
					}
					if ci.FilterMask != 0 {
						skipped++
					}
				}
			})
		}
	}
	require.Positive(t, skipped, "LZF on noise must have skipped the filter for some chunk (filter_mask)")
}

func TestCorruptInput(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pipeline []Filter
		data     []byte
	}{
		{"deflate", []Filter{{ID: Deflate}}, []byte("not zlib")},
		{"lzf literal past end", []Filter{{ID: LZF}}, []byte{31, 1, 2}},
		{"lzf reference before start", []Filter{{ID: LZF}}, []byte{0x20, 0x05}},
		{"fletcher32", []Filter{{ID: Fletcher32}}, []byte{1, 2, 3, 4, 5, 6}},
		{"unsupported", []Filter{{ID: 307}}, []byte{1}},
		{"wrong size", nil, []byte{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.data, tc.pipeline, 0, 1, 8, nil)
			require.Error(t, err)
		})
	}
}

func FuzzLZF(f *testing.F) {
	f.Add([]byte{0, 'a', 0x20, 0x00}, 8)
	f.Fuzz(func(t *testing.T, in []byte, size int) {
		if size < 0 || size > 1<<16 {
			return
		}
		_, _ = lzfDecompress(in, size) // must not panic
	})
}

// TestUnshuffle compares the fast path with the definition on odd sizes and item sizes.
func TestUnshuffle(t *testing.T) {
	for _, isz := range []int{1, 2, 3, 4, 8, 16} {
		for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 8192} {
			in := make([]byte, n*isz+isz/2)
			for i := range in {
				in[i] = byte(i*7 + 3)
			}
			want := make([]byte, len(in))
			for i := 0; i < n; i++ {
				for j := 0; j < isz; j++ {
					want[i*isz+j] = in[j*n+i]
				}
			}
			copy(want[n*isz:], in[n*isz:])
			if isz == 1 {
				want = in
			}
			require.Equal(t, want, unshuffle(in, isz), "itemsize %d, %d elements", isz, n)
		}
	}
}

// TestDecoderInflate: a Decoder with another inflater (libdeflate through cgo) decodes the
// same, and refuses a damaged stream (bad checksum) and one longer than the chunk.
func TestDecoderInflate(t *testing.T) {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	want := bytes.Repeat([]byte("vh5fs chunk "), 1000)
	w.Write(want)
	w.Close()
	got, err := Decoder{Inflate: h5.Inflate}.Decode(buf.Bytes(), []Filter{{ID: Deflate}}, 0, 1, len(want), nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = Decoder{Inflate: h5.Inflate}.Decode([]byte("nope"), []Filter{{ID: Deflate}}, 0, 1, len(want), nil)
	require.Error(t, err)
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)-1] ^= 1 // the Adler-32 trailer
	_, err = Decoder{Inflate: h5.Inflate}.Decode(bad, []Filter{{ID: Deflate}}, 0, 1, len(want), nil)
	require.Error(t, err)
	_, err = Decoder{Inflate: h5.Inflate}.Decode(buf.Bytes(), []Filter{{ID: Deflate}}, 0, 1, len(want)-1, nil)
	require.Error(t, err)
}

// BenchmarkUnshuffle: undoing the shuffle of a 64 KiB chunk of float32 and of float64.
func BenchmarkUnshuffle(b *testing.B) {
	in := make([]byte, 64<<10)
	for i := range in {
		in[i] = byte(i * 7)
	}
	for _, isz := range []int{4, 8} {
		b.Run(fmt.Sprintf("itemsize%d", isz), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				unshuffle(in, isz)
			}
		})
	}
}

// TestDecoderScratch: with a scratch pool, shuffle+deflate chunks decode as without one,
// and a result stays intact after the pool's buffers are reused for the next chunk.
func TestDecoderScratch(t *testing.T) {
	chunk := func(seed byte) (stored, want []byte) {
		want = make([]byte, 8*1000)
		for i := range want {
			want[i] = byte(i/8) + seed*byte(i%8)
		}
		shuffled := make([]byte, len(want))
		for i := 0; i < 1000; i++ {
			for j := 0; j < 8; j++ {
				shuffled[j*1000+i] = want[i*8+j]
			}
		}
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		w.Write(shuffled)
		w.Close()
		return buf.Bytes(), want
	}
	dec := Decoder{Inflate: h5.Inflate, Scratch: &sync.Pool{}}
	pipe := []Filter{{ID: Shuffle}, {ID: Deflate}}
	a, wantA := chunk(1)
	gotA, err := dec.Decode(a, pipe, 0, 8, len(wantA), nil)
	require.NoError(t, err)
	require.Equal(t, wantA, gotA)
	b, wantB := chunk(2)
	gotB, err := dec.Decode(b, pipe, 0, 8, len(wantB), nil)
	require.NoError(t, err)
	require.Equal(t, wantB, gotB)
	require.Equal(t, wantA, gotA, "the first result does not share the pool's buffer")
	// Shuffle skipped (mask bit 0): the inflated bytes are the result, never a pool buffer.
	gotC, err := dec.Decode(a, pipe, 1, 8, len(wantA), nil)
	require.NoError(t, err)
	_, err = dec.Decode(b, pipe, 1, 8, len(wantB), nil)
	require.NoError(t, err)
	shuffledA, err := Decode(a, []Filter{{ID: Deflate}}, 0, 8, len(wantA), nil)
	require.NoError(t, err)
	require.Equal(t, shuffledA, gotC)
}
