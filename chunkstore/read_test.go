package chunkstore_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/chunkstore"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
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
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			fast, numeric := 0, 0
			for _, v := range m.Versions {
				for p, md := range v.Datasets {
					if md.IsString() {
						continue
					}
					numeric++
					d, err := f.Dataset(versions.VersionsGroup + "/" + v.Name + "/" + p)
					require.NoError(t, err)
					size := d.Type.Size
					for _, c := range d.Chunks {
						size *= int(c)
					}
					blocks, _ := d.Blocks()
					for _, b := range blocks {
						got, ok, err := d.Chunked().ReadSlot(b.Row, size)
						require.NoError(t, err)
						if !ok {
							continue
						}
						fast++
						want := make([]byte, size)
						start := make([]int64, len(d.Chunks))
						start[0] = b.Row
						require.NoError(t, d.RawDataset().ReadBox(start, d.Chunks, d.Chunks, make([]int64, len(d.Chunks)), want))
						require.Equal(t, want, got, "%s/%s slot %d", v.Name, p, b.Row)
					}
				}
			}
			if m.DataVersion == 4 && numeric > 0 && m.File != "strings.h5" { // a file of strings alone has no chunk to serve
				require.Positive(t, fast, "the fast path served nothing")
			}
		})
	}
}

// TestLocate: every range Read places in the file, and every answer from the
// file's mapping, holds the dataset's bytes.
func TestLocate(t *testing.T) {
	f, err := versions.Open(fixture.Dir() + "/basic_1d.h5")
	require.NoError(t, err)
	defer f.Close()
	raw, err := os.ReadFile(fixture.Dir() + "/basic_1d.h5")
	require.NoError(t, err)
	hits := 0
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/x")
		require.NoError(t, err)
		all := make([]byte, d.Size())
		_, err = d.ReadAt(all, 0)
		require.NoError(t, err)
		for off := int64(0); off < d.Size(); off++ {
			for n := int64(1); off+n <= d.Size(); n++ {
				r, err := d.Read(make([]byte, n), off, 1<<20)
				require.NoError(t, err)
				require.Equal(t, int(n), r.N)
				switch {
				case r.Located:
					hits++
					require.Equal(t, all[off:off+n], raw[r.FileOff:r.FileOff+n], "%s [%d, +%d)", v, off, n)
				case r.Vec != nil:
					hits++
					require.Equal(t, all[off:off+n], bytes.Join(r.Vec, nil), "%s [%d, +%d) mapped", v, off, n)
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
			f, err := versions.Open(path)
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
			require.Eventually(t, func() bool { return d.Chunked().AheadBusy() == 0 }, 10*time.Second, time.Millisecond)
			for off := tc.firstOff; off < min(tc.firstOff+chunkstore.ReadAheadBytes, 4<<20); off += chunk {
				require.Equal(t, tc.ahead, d.Chunked().Cached(off/8), "slot at row %d", off/8)
			}
			if tc.ahead && tc.firstOff+chunkstore.ReadAheadBytes < 4<<20 {
				require.False(t, d.Chunked().Cached((tc.firstOff+chunkstore.ReadAheadBytes)/8), "beyond the window")
			}
		})
	}
}

// makeGzip writes a versioned file whose dataset "data" of the given shape and chunks is
// stored with gzip + shuffle (tests/py/make_versioned.py).
func makeGzip(t testing.TB, shape, chunks string) string {
	return makeVersioned(t, "--shape", shape, "--chunks", chunks, "--gzip", "--versions", "2")
}

// makeVersioned writes a versioned file with tests/py/make_versioned.py.
func makeVersioned(t testing.TB, args ...string) string {
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
// rewrote chunks into slots out of the reading order. Located, a read stored in one run of
// the file is one range of it, up to the caller's limit; others are slices of the file's
// mapping, one per run.
func TestReadDirect(t *testing.T) {
	path := makeVersioned(t, "--shape", "20000", "--chunks", "512", "--versions", "3")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := versions.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, v := range []string{"v0", "v1", "v2"} { // v1 and v2 rewrote chunks 0 and 1
		d, err := f.Dataset("/_version_data/versions/" + v + "/data")
		require.NoError(t, err)
		for _, r := range [][2]int64{{0, 4096}, {0, 512 << 10}, {5, 20000}, {4093, 70000}, {159000, 4096}} {
			plan, err := d.Chunked().Plan(r[0], min(r[1], d.Size()-r[0]))
			require.NoError(t, err)
			pieces, pl, ok, err := d.Chunked().PiecesOf(r[0], plan.N)
			require.NoError(t, err)
			require.True(t, ok)
			require.Nil(t, pl, "1-D: pieces straight from the chunk grid")
			fromPlan, ok := d.Chunked().PlanPieces(plan)
			require.True(t, ok)
			require.Equal(t, joinRuns(fromPlan), pieces, "%s %v: the grid's pieces are the plan's", v, r)

			direct := make([]byte, plan.N)
			rep, ok, err := d.Chunked().Locate(pieces, direct, 0)
			require.NoError(t, err)
			require.True(t, ok, "%s %v", v, r)
			require.Equal(t, int(plan.N), rep.N)
			require.False(t, rep.Located || rep.Vec != nil, "nothing located with maxRange 0")
			chunked := make([]byte, plan.N)
			require.NoError(t, d.Chunked().ReadPlan(plan, chunked))
			require.Equal(t, chunked, direct, "%s %v", v, r)

			spans, ok := d.Chunked().FileSpans(pieces)
			require.True(t, ok)
			for _, maxRange := range []int{int(plan.N), int(plan.N) - 1} {
				rep, err := d.Read(make([]byte, r[1]), r[0], maxRange)
				require.NoError(t, err)
				require.Equal(t, int(plan.N), rep.N)
				oneRange := len(spans) == 1 && maxRange >= rep.N
				require.Equal(t, oneRange, rep.Located, "%s %v max %d: one range iff one span that fits", v, r, maxRange)
				if rep.Located {
					require.Equal(t, chunked, raw[rep.FileOff:rep.FileOff+int64(rep.N)], "%s %v located at %d", v, r, rep.FileOff)
				} else {
					require.Len(t, rep.Vec, len(spans), "%s %v: a slice per run", v, r)
					require.Equal(t, chunked, bytes.Join(rep.Vec, nil), "%s %v mapped", v, r)
				}
			}
			if v != "v0" && r[0] == 0 && r[1] > 8192 { // across the rewritten chunks 0 and 1
				require.Greater(t, len(spans), 1, "%s %v: rewritten chunks stored apart", v, r)
			}
		}
	}
}

// joinRuns merges runs that continue each other in one chunk and in the read (a plan
// splits a read at partial elements; chunkmap.Map.Runs does not).
func joinRuns(runs []chunkplan.Run) []chunkplan.Run {
	var out []chunkplan.Run
	for _, r := range runs {
		if k := len(out) - 1; k >= 0 && out[k].SlabOffset == r.SlabOffset && out[k].ChunkOff+out[k].N == r.ChunkOff && out[k].DstOff+out[k].N == r.DstOff {
			out[k].N += r.N
			continue
		}
		out = append(out, r)
	}
	return out
}

// TestReadSlices: where slices answers, its slices hold exactly what ReadAt reads, end
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
			f, err := versions.Open(makeGzip(t, tc.shape, tc.chunks))
			require.NoError(t, err)
			defer f.Close()
			for _, v := range []string{"v0", "v1"} { // v1 rewrote chunk 0: its slot is last
				d, err := f.Dataset("/_version_data/versions/" + v + "/data")
				require.NoError(t, err)
				for _, r := range tc.reads {
					vec, ok, err := d.Chunked().Slices(r.off, int(r.n))
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
				vec, ok, err := d.Chunked().Slices(d.Size(), 4096)
				require.NoError(t, err)
				require.False(t, ok, "at the end")
				require.Empty(t, vec)
			}
		})
	}
	t.Run("unfiltered", func(t *testing.T) {
		f, err := versions.Open("../tests/testdata/fixtures/basic_1d.h5")
		require.NoError(t, err)
		defer f.Close()
		d, err := f.Dataset("/_version_data/versions/v1/x")
		require.NoError(t, err)
		_, ok, err := d.Chunked().Slices(0, 16)
		require.NoError(t, err)
		require.False(t, ok, "unfiltered reads are copied or spliced from the file")
	})
}

// BenchmarkLocate4KiB: what the mount does per 512 KiB READ of a dataset of 4 KiB chunks,
// the kernel's copies aside: plan, find the slots, make the spans.
func BenchmarkLocate4KiB(b *testing.B) {
	path := makeVersioned(b, "--shape", "1048576", "--chunks", "512", "--versions", "1")
	f, err := versions.Open(path)
	require.NoError(b, err)
	defer f.Close()
	d, err := f.Dataset("/_version_data/versions/v0/data")
	require.NoError(b, err)
	p := make([]byte, 512<<10)
	b.SetBytes(int64(len(p)))
	off := int64(0)
	for b.Loop() {
		if _, err := d.Read(p, off, 1<<20); err != nil {
			b.Fatal(err)
		}
		if off += int64(len(p)); off >= d.Size() {
			off = 0
		}
	}
}

// TestSlotsMatchLibhdf5: slots found in one batch, in ascending, descending and shuffled
// order, across the leaves of a chunk B-tree of two levels, are where libhdf5 says they
// are; a batch with a row that holds no chunk is not found.
func TestSlotsMatchLibhdf5(t *testing.T) {
	// 1,563 chunks of 64 elements, and two versions rewriting chunks into later slots.
	path := makeVersioned(t, "--shape", "100000", "--chunks", "64", "--versions", "3")
	f, err := versions.Open(path)
	require.NoError(t, err)
	defer f.Close()
	d, err := f.Dataset("/_version_data/versions/v2/data")
	require.NoError(t, err)
	rows := d.RawDataset().Info().Shape[0]
	var offs []int64
	var coords [][]int64
	for off := int64(0); off < rows; off += d.Chunks[0] {
		offs = append(offs, off)
		coords = append(coords, []int64{off})
	}
	want, err := d.RawDataset().ChunkInfo(coords)
	require.NoError(t, err)
	require.Greater(t, len(offs), 64*2, "enough chunks for several leaves")

	perm := rand.New(rand.NewPCG(1, 2)).Perm(len(offs))
	for _, tc := range []struct {
		name  string
		order func(i int) int // the batch's i-th slot is offs[order(i)]
	}{
		{"ascending", func(i int) int { return i }},
		{"descending", func(i int) int { return len(offs) - 1 - i }},
		{"shuffled", func(i int) int { return perm[i] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := make([]int64, len(offs))
			for i := range batch {
				batch[i] = offs[tc.order(i)]
			}
			got, ok := d.Chunked().SlotsAt(batch...)
			require.True(t, ok)
			for i := range batch {
				require.Equal(t, want[tc.order(i)], got[i], "slot at row %d", batch[i])
			}
			_, ok = d.Chunked().SlotsAt(append(batch[:10:10], rows+d.Chunks[0], offs[0])...)
			require.False(t, ok, "a row past raw_data")
			_, ok = d.Chunked().SlotsAt(offs[0], 1, offs[1])
			require.False(t, ok, "a row inside a chunk")
		})
	}
}

// TestLocateTruncated: a read whose chunks lie beyond the end of a file cut short after it
// was opened fails, by every route, instead of coming back short or empty.
func TestLocateTruncated(t *testing.T) {
	path := makeVersioned(t, "--shape", "200000", "--chunks", "512", "--versions", "2")
	f, err := versions.Open(path)
	require.NoError(t, err)
	defer f.Close()
	d, err := f.Dataset("/_version_data/versions/v1/data") // v1 rewrote chunk 0: reads from 0 are two runs
	require.NoError(t, err)
	p := make([]byte, 512<<10)
	end := d.Size() - int64(len(p))
	for _, off := range []int64{0, end} { // the chunk index is read now, before the cut
		_, err := d.ReadAt(p, off)
		require.NoError(t, err)
	}
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()/2))
	for _, tc := range []struct {
		name     string
		off, n   int64
		maxRange int
	}{
		{"one range", d.Size() - 4096, 4096, 1 << 20}, // the last chunk
		{"mapped runs", 0, 512 << 10, 1 << 20},
		{"read", end, 512 << 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := d.Read(p[:tc.n], tc.off, tc.maxRange)
			require.Error(t, err, "located %v, %d mapped slices", r.Located, len(r.Vec))
		})
	}
}

// TestReadReplies: Chunked.Read, the one read of the chunk route, answers each kind of
// read with the reply the mount writes fastest, and every reply holds the dataset's bytes.
func TestReadReplies(t *testing.T) {
	gzip := makeGzip(t, "20000", "512")
	plain := makeVersioned(t, "--shape", "20000", "--chunks", "512", "--versions", "1")
	type kind int
	const (
		copied kind = iota
		located
		mapped
		decoded
	)
	for _, tc := range []struct {
		name     string
		file     string
		off, n   int64
		maxRange int
		want     kind
	}{
		{"unfiltered, inside a chunk", plain, 8, 4000, 1 << 20, located},
		{"unfiltered, stored in order", plain, 0, 512 << 10, 1 << 20, located},
		{"unfiltered, longer than the range", plain, 0, 64 << 10, 32 << 10, mapped},
		{"unfiltered, copy asked", plain, 5, 70000, 0, copied},
		{"gzip, whole runs of chunks", gzip, 4093, 70000, 1 << 20, decoded},
		{"gzip, copy asked", gzip, 4093, 70000, 0, copied},
		{"past the end", plain, 160000, 4096, 1 << 20, copied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := versions.Open(tc.file)
			require.NoError(t, err)
			defer f.Close()
			d, err := f.Dataset("/_version_data/versions/v0/data")
			require.NoError(t, err)
			want := make([]byte, max(0, min(tc.n, d.Size()-tc.off)))
			if len(want) > 0 {
				_, err = d.ReadAt(want, tc.off)
				require.NoError(t, err)
			}
			p := make([]byte, tc.n)
			r, err := d.Chunked().Read(p, tc.off, tc.maxRange)
			require.NoError(t, err)
			defer r.Release()
			require.Equal(t, len(want), r.N)
			var got []byte
			var k kind
			switch {
			case r.Located:
				k = located
				got = make([]byte, r.N)
				// pread, not an os.File: its finalizer would close the store's descriptor.
				n, err := syscall.Pread(int(r.Fd), got, r.FileOff)
				require.NoError(t, err)
				require.Equal(t, r.N, n)
			case r.Mapped():
				k, got = mapped, bytes.Join(r.Vec, nil)
			case r.Vec != nil:
				k, got = decoded, bytes.Join(r.Vec, nil)
			default:
				got = p[:r.N]
			}
			require.Equal(t, tc.want, k)
			require.Equal(t, want, got)
		})
	}
}

// TestReadWindows: a read of more pieces than one pass plans is planned a window at a
// time and copied, with the bytes one pass gives, at any offset and length.
func TestReadWindows(t *testing.T) {
	file := makeVersioned(t, "--shape", "20000", "--chunks", "1", "--modulo", "251", "--versions", "2")
	f, err := versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	d, err := f.Dataset("/_version_data/versions/v1/data")
	require.NoError(t, err)
	c := d.Chunked()
	for _, tc := range []struct{ off, n int64 }{{0, d.Size()}, {3, 70001}, {d.Size() - 9, 100}} {
		chunkstore.SetMaxPieces(c, 0)
		want := make([]byte, tc.n)
		r, err := c.Read(want, tc.off, 0)
		require.NoError(t, err)
		want = want[:r.N]
		chunkstore.SetMaxPieces(c, 1000) // 8,000 bytes a pass
		got := make([]byte, tc.n)
		r, err = c.Read(got, tc.off, 1<<20)
		require.NoError(t, err)
		require.Equal(t, len(want), r.N)
		switch {
		case r.Located || r.Vec != nil:
			require.LessOrEqual(t, r.N, 8000, "only a read of one pass is answered other than copied")
		default:
			require.Equal(t, want, got[:r.N], "off %d n %d", tc.off, tc.n)
		}
	}
}
