package h5meta

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedFiles writes two small real files (libver earliest and latest) and returns their
// bytes and the object header addresses of their datasets.
func seedFiles(t testing.TB) ([][]byte, []uint64) {
	dir := t.TempDir()
	paths := []string{
		makeVersioned(t, dir, "v.h5", "--shape", "10,7", "--chunks", "4,3", "--versions", "3", "--gzip"),
		filepath.Join(dir, "latest.h5"),
	}
	out, err := execPython("testdata/make_latest.py", paths[1], "--small")
	require.NoError(t, err, "%s", out)
	var files [][]byte
	seen := map[uint64]bool{}
	var addrs []uint64
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		files = append(files, data)
		e := expect(t, p, "--addrs")
		for _, d := range append(e.Datasets, e.Groups...) {
			if !seen[d.Addr] {
				seen[d.Addr] = true
				addrs = append(addrs, d.Addr)
			}
		}
	}
	return files, addrs
}

// exercise runs every entry point on data; it must not panic.
func exercise(data []byte, addrs []uint64) {
	f, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return
	}
	for _, a := range addrs {
		_, _ = f.VirtualMappings(a)
		_, _ = f.Chunks(a)
		if x, err := f.ChunkIndex(a); err == nil {
			for _, off := range [][]int64{{0}, {0, 0}, {4, 3}, {8, 6}, {1 << 40, 0}} {
				_, _, _ = x.Lookup(off)
			}
			_, _ = x.LookupRows([]int64{0, 4, 8, 4, 1 << 40}, make([]Chunk, 5))
		}
		_, _ = f.Links(a)
		_, _ = f.Inspect(a)
	}
}

// TestCorrupt overwrites bytes of two real files in turn (every byte of the first 4 KiB,
// where the superblock and most object headers are, then a sample): no call may panic.
func TestCorrupt(t *testing.T) {
	files, addrs := seedFiles(t)
	for _, data := range files {
		mut := bytes.Clone(data)
		step := 1
		if testing.Short() {
			step = 7
		}
		for i := 0; i < len(mut); i += step {
			if i >= 4096 && step < 13 {
				step = 13
			}
			orig := mut[i]
			for _, v := range []byte{0xff, orig ^ 0x01, 0x00} {
				mut[i] = v
				exercise(mut, addrs)
			}
			mut[i] = orig
		}
		// Truncations.
		for n := 0; n < len(data); n += 97 {
			exercise(data[:n], addrs)
		}
	}
}

func FuzzMetadata(f *testing.F) {
	files, addrs := seedFiles(f)
	for _, data := range files {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		exercise(data, addrs)
	})
}

func TestErrors(t *testing.T) {
	_, err := Open(bytes.NewReader([]byte("not an hdf5 file")), 16)
	require.Error(t, err)
	files, addrs := seedFiles(t)
	f, err := Open(bytes.NewReader(files[0]), int64(len(files[0])))
	require.NoError(t, err)
	_, err = f.Chunks(uint64(len(files[0])) + 10)
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrUnsupported))
	_, err = f.VirtualMappings(^uint64(0) - 3)
	require.Error(t, err)
	require.NotEmpty(t, addrs)
}
