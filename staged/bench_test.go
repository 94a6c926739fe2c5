package staged

import (
	"path/filepath"
	"testing"
)

// sumDigest is a digester that costs little: benchmarks measure the array, not a hash.
func sumDigest(chunk []byte, _, _ []int64, _ int) [32]byte {
	var d [32]byte
	for i, b := range chunk {
		d[i&31] += b
	}
	return d
}

// BenchmarkRowWrites writes a 2-D float64 array of 16 MiB one row (4 KiB) at a time: each
// row covers a row of 8 chunks of 32 KiB in part, which record the bytes written (holes)
// until 64 rows complete them and the store's workers digest them.
func BenchmarkRowWrites(b *testing.B) {
	const rows, cols = 4096, 512
	row := make([]byte, cols*8)
	b.SetBytes(rows * cols * 8)
	for b.Loop() {
		a, err := New([]int64{rows, cols}, []int64{64, 64}, 8, make([]byte, 8))
		if err != nil {
			b.Fatal(err)
		}
		st := OpenStore(filepath.Join(b.TempDir(), "f.h5"), -1)
		st.SetDigester(sumDigest)
		a.UseStore(st)
		for r := range int64(rows) {
			if _, err := a.WriteAt(row, r*cols*8, nil); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := a.StagedChunks(); err != nil {
			b.Fatal(err)
		}
		a.Discard()
		st.Close()
	}
}

// BenchmarkSpillWrites writes 64 MiB of a 1-D array of 64 KiB chunks in 128 KiB writes
// through a store of an 8 MiB budget: beyond it the oldest chunks spill to the file.
func BenchmarkSpillWrites(b *testing.B) {
	const size, write = 64 << 20, 128 << 10
	p := make([]byte, write)
	b.SetBytes(size)
	for b.Loop() {
		a, err := New([]int64{size / 8}, []int64{8192}, 8, make([]byte, 8))
		if err != nil {
			b.Fatal(err)
		}
		st := OpenStore(filepath.Join(b.TempDir(), "f.h5"), 8<<20)
		a.UseStore(st)
		for off := int64(0); off < size; off += write {
			if _, err := a.WriteAt(p, off, nil); err != nil {
				b.Fatal(err)
			}
		}
		a.Discard()
		st.Close()
	}
}
