package versions

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestFastPathMatchesLibhdf5 reads every stored chunk of every fixture version both ways —
// by file offset, decoded in Go, and through libhdf5 — and requires the same bytes inside
// the chunk's trimmed extent. It also requires the fast path to have served every chunk
// of the data_version 4 files (their filters all decode in Go).
func TestFastPathMatchesLibhdf5(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			f, err := Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			fast := 0
			for _, v := range m.Versions {
				for p, md := range v.Datasets {
					if md.IsString() {
						continue
					}
					d, err := f.Dataset(VersionsGroup + "/" + v.Name + "/" + p)
					require.NoError(t, err)
					size := d.Type.Size
					for _, c := range d.Chunks {
						size *= int(c)
					}
					for _, b := range d.blocks() {
						got, ok, err := f.readSlot(d, b.off, size)
						require.NoError(t, err)
						if !ok {
							continue
						}
						fast++
						want := make([]byte, size)
						start := make([]int64, len(d.Chunks))
						start[0] = b.off
						require.NoError(t, d.raw.ReadBox(start, d.Chunks, d.Chunks, make([]int64, len(d.Chunks)), want))
						require.Equal(t, want, got, "%s/%s slot %d", v.Name, p, b.off)
					}
				}
			}
			if m.DataVersion == 4 && m.File != "strings.h5" {
				require.Positive(t, fast, "the fast path served nothing")
			}
		})
	}
}

// TestLocate: every range ReadOrLocate places in the file holds the dataset's bytes.
func TestLocate(t *testing.T) {
	f, err := Open(fixture.Dir() + "/basic_1d.h5")
	require.NoError(t, err)
	defer f.Close()
	raw, err := os.ReadFile(fixture.Dir() + "/basic_1d.h5")
	require.NoError(t, err)
	hits := 0
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		d, err := f.Dataset(VersionsGroup + "/" + v + "/x")
		require.NoError(t, err)
		all := make([]byte, d.Size())
		_, err = d.ReadAt(all, 0)
		require.NoError(t, err)
		for off := int64(0); off < d.Size(); off++ {
			for n := int64(1); off+n <= d.Size(); n++ {
				if _, fo, ok, err := d.ReadOrLocate(make([]byte, n), off, true); err == nil && ok {
					hits++
					require.Equal(t, all[off:off+n], raw[fo:fo+n], "%s [%d, +%d)", v, off, n)
				}
			}
		}
	}
	require.Positive(t, hits)
}

// TestReadAhead: a read that continues a sequential reader of a filtered dataset has the
// chunks of the next readAheadBytes decoded in the background; a random read has none.
func TestReadAhead(t *testing.T) {
	// 4 MiB of float64 in 64 chunks of 64 KiB.
	path := makeGzip(t, "524288", "8192")
	const chunk = 64 << 10
	for _, tc := range []struct {
		name     string
		reads    []int64 // offsets of chunk-sized reads, in order
		ahead    bool    // whether the chunks after the last read get decoded
		firstOff int64   // the first chunk after the last read
	}{
		{name: "from the start", reads: []int64{0}, ahead: true, firstOff: chunk},
		{name: "sequential", reads: []int64{0, chunk, 2 * chunk}, ahead: true, firstOff: 3 * chunk},
		{name: "random", reads: []int64{3 << 20}, ahead: false, firstOff: 3<<20 + chunk},
		{name: "random after sequential", reads: []int64{0, 3 << 20}, ahead: false, firstOff: 3<<20 + chunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(path)
			require.NoError(t, err)
			defer f.Close()
			d, err := f.Dataset("/_version_data/versions/v0/data")
			require.NoError(t, err)
			p := make([]byte, chunk)
			for _, off := range tc.reads {
				n, err := d.ReadAt(p, off)
				require.NoError(t, err)
				require.Equal(t, chunk, n)
			}
			// readAhead takes its decoding slots before the read returns: once they are free
			// again, whatever it decoded is in the cache.
			require.Eventually(t, func() bool { return len(f.ahead) == 0 }, 10*time.Second, time.Millisecond)
			for off := tc.firstOff; off < min(tc.firstOff+readAheadBytes, 4<<20); off += chunk {
				k := chunkKey{d.RawData, off / 8}
				require.Equal(t, tc.ahead, f.chunks.has(k), "slot at row %d", off/8)
			}
			if tc.ahead && tc.firstOff+readAheadBytes < 4<<20 {
				require.False(t, f.chunks.has(chunkKey{d.RawData, (tc.firstOff + readAheadBytes) / 8}), "beyond the window")
			}
		})
	}
}

// makeGzip writes a versioned file whose dataset "data" of the given shape and chunks is
// stored with gzip + shuffle (tests/py/make_versioned.py).
func makeGzip(t *testing.T, shape, chunks string) string {
	return makeVersioned(t, "--shape", shape, "--chunks", chunks, "--gzip", "--versions", "2")
}

// makeVersioned writes a versioned file with tests/py/make_versioned.py.
func makeVersioned(t *testing.T, args ...string) string {
	py, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		t.Skip("python3 with h5py not available")
	}
	path := filepath.Join(t.TempDir(), "f.h5")
	out, err := exec.Command(py, append([]string{"../tests/py/make_versioned.py", path}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return path
}

// TestReadDirect: reads of an unfiltered dataset straight from the file (one pread for
// chunks stored one after another) give what the chunk route gives, also where versions
// rewrote chunks into slots out of the reading order; a read inside one chunk is located
// in the file.
func TestReadDirect(t *testing.T) {
	path := makeVersioned(t, "--shape", "20000", "--chunks", "512", "--versions", "3")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, v := range []string{"v0", "v1", "v2"} { // v1 and v2 rewrote chunks 0 and 1
		d, err := f.Dataset("/_version_data/versions/" + v + "/data")
		require.NoError(t, err)
		for _, r := range [][2]int64{{0, 4096}, {0, 512 << 10}, {5, 20000}, {4093, 70000}, {159000, 4096}} {
			plan, err := d.arr.GetItemPlan(r[0], min(r[1], d.Size()-r[0]))
			require.NoError(t, err)
			direct := make([]byte, plan.N)
			n, ok, err := d.readDirect(plan, direct)
			require.NoError(t, err)
			require.True(t, ok, "%s %v", v, r)
			require.Equal(t, int(plan.N), n)
			chunked := make([]byte, plan.N)
			require.NoError(t, d.arr.ReadPlan(plan, chunked, rawSource{d}))
			require.Equal(t, chunked, direct, "%s %v", v, r)

			n, fo, located, err := d.ReadOrLocate(make([]byte, r[1]), r[0], true)
			require.NoError(t, err)
			require.Equal(t, len(plan.Transfers) == 1, located, "%s %v: located iff inside one chunk", v, r)
			if located {
				require.Equal(t, chunked, raw[fo:fo+int64(n)], "%s %v located at %d", v, r, fo)
			}
		}
	}
}

// TestReadSlices: where ReadSlices answers, its slices hold exactly what ReadAt reads, end
// to end; it declines reads of more than maxSlices pieces.
func TestReadSlices(t *testing.T) {
	type rng struct {
		off, n int64
		ok     bool
	}
	for _, tc := range []struct {
		name, shape, chunks string
		reads               []rng
	}{
		{"1-D", "20000", "512", []rng{{0, 4096, true}, {0, 128 << 10, true}, {5, 4000, true}, {4093, 70000, true}, {159900, 4096, true}}},
		{"2-D whole rows", "100,300", "8,300", []rng{{0, 4096, true}, {0, 128 << 10, true}, {5, 4000, true}, {4093, 70000, true}, {239900, 4096, true}}},
		// Rows of 2,400 bytes in chunks 512 bytes wide: five pieces a row.
		{"2-D partial rows", "100,300", "8,64", []rng{{0, 4096, true}, {5, 4000, true}, {0, 128 << 10, false}, {239900, 4096, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(makeGzip(t, tc.shape, tc.chunks))
			require.NoError(t, err)
			defer f.Close()
			for _, v := range []string{"v0", "v1"} { // v1 rewrote chunk 0: its slot is last
				d, err := f.Dataset("/_version_data/versions/" + v + "/data")
				require.NoError(t, err)
				for _, r := range tc.reads {
					vec, ok, err := d.ReadSlices(r.off, int(r.n))
					require.NoError(t, err)
					require.Equal(t, r.ok, ok, "%s %+v", v, r)
					if !ok {
						continue
					}
					want := make([]byte, r.n)
					n, err := d.ReadAt(want, r.off)
					require.NoError(t, err)
					require.Equal(t, want[:n], bytes.Join(vec, nil), "%s %+v", v, r)
				}
				vec, ok, err := d.ReadSlices(d.Size(), 4096)
				require.NoError(t, err)
				require.False(t, ok, "at the end")
				require.Empty(t, vec)
			}
		})
	}
	t.Run("unfiltered", func(t *testing.T) {
		f, err := Open("../tests/testdata/fixtures/basic_1d.h5")
		require.NoError(t, err)
		defer f.Close()
		d, err := f.Dataset("/_version_data/versions/v1/x")
		require.NoError(t, err)
		_, ok, err := d.ReadSlices(0, 16)
		require.NoError(t, err)
		require.False(t, ok, "unfiltered reads are copied or spliced from the file")
	})
}
