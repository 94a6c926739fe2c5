package commit

import (
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// Sink files: float64, chunks of 512 elements (4 KiB), 200 chunks; the store holds 8.
const (
	sinkElems  = 512
	sinkChunks = 200
	sinkBudget = 8 * sinkElems * 8
)

// sinkFile makes (once per test) a versioned file with version v0, gzip+shuffle if asked.
func sinkFile(t *testing.T, gzip bool) string {
	path := filepath.Join(t.TempDir(), "sink.h5")
	args := []string{"../tests/py/make_versioned.py", path, "--shape", "102400", "--chunks", "512", "--versions", "1"}
	if gzip {
		args = append(args, "--gzip")
	}
	out, err := exec.Command("/usr/bin/python3", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return path
}

// chunkOf is chunk content k: distinct for every k >= 0, the fill value (zeros) for -1.
func chunkOf(k int) []byte {
	b := make([]byte, sinkElems*8)
	if k < 0 {
		return b
	}
	for i := range sinkElems {
		binary.LittleEndian.PutUint64(b[i*8:], math.Float64bits(1e6+float64(k*sinkElems+i)))
	}
	return b
}

// sinkOp is one step of a staged change: bytes at an offset, or a new shape.
type sinkOp struct {
	off   int64
	data  []byte
	shape int64 // > 0: resize axis 0 to this many elements
}

// writes lays chunk contents ks (see chunkOf) at chunks from first on, one write each.
func writes(first int, ks ...int) []sinkOp {
	var ops []sinkOp
	for i, k := range ks {
		ops = append(ops, sinkOp{off: int64(first+i) * sinkElems * 8, data: chunkOf(k)})
	}
	return ops
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// stageSink applies ops to v0's dataset of file, staged in a store of sinkBudget, with a
// sink if asked, and commits it as version "new".
func stageSink(t *testing.T, file string, sink bool, ops []sinkOp) (Result, []byte) {
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	defer f.Close()
	c, err := Open(f, Options{StageMem: sinkBudget})
	require.NoError(t, err)
	defer c.Close()
	d, err := f.Dataset(versions.VersionsGroup + "/v0/data")
	require.NoError(t, err)
	arr, err := c.NewArray(d, sink)
	require.NoError(t, err)
	for _, op := range ops {
		if op.shape > 0 {
			require.NoError(t, arr.Resize([]int64{op.shape}, d.ChunkSource()))
			continue
		}
		_, err := arr.WriteAt(op.data, op.off, d.ChunkSource())
		require.NoError(t, err)
	}
	want := make([]byte, arr.Size())
	_, err = arr.ReadAt(want, 0, d.ChunkSource())
	require.NoError(t, err)
	require.NoError(t, c.SetNextName("new"))
	res, err := c.Commit(Change{Base: "v0", Dataset: "data", Array: arr})
	require.NoError(t, err)
	return res, want
}

// TestSinkCommitsAsSpilling: a change larger than the store, its chunks evicted to their
// raw_data slots ahead of the commit, commits exactly what the same change spilled to the
// spill file commits — the same data, hash_table rows, slots and mappings — whatever the
// change does to chunks already evicted.
func TestSinkCommitsAsSpilling(t *testing.T) {
	tests := []struct {
		name  string
		gzip  bool
		ops   []sinkOp
		ahead bool // chunks must be found in place
	}{
		{name: "sequential", ops: writes(0, seq(0, sinkChunks)...), ahead: true},
		{name: "sequential gzip", gzip: true, ops: writes(0, seq(0, sinkChunks)...), ahead: true},
		// The fill value (no slot), chunks equal to earlier ones of the change, and a
		// chunk equal to one the file holds (make_versioned's v0 chunk 0 is 0..511).
		{name: "fill and duplicates", ops: append(writes(0, append(seq(0, 20), -1, 3, 3, -1, 7)...),
			append(writes(25, seq(100, 50)...), sinkOp{off: 80 * sinkElems * 8, data: v0Chunk0()})...), ahead: true},
		// A chunk already evicted written again, then more after it.
		{name: "rewrite", ops: append(append(writes(0, seq(0, 100)...), writes(3, 1000)...), writes(100, seq(200, 50)...)...)},
		// Evicted chunks dropped by a shrink, then growth.
		{name: "shrink", ops: append(append(writes(0, seq(0, 150)...), sinkOp{shape: 50 * sinkElems}, sinkOp{shape: 90 * sinkElems}),
			writes(50, seq(300, 40)...)...)},
		// Writes that fill chunks piecewise: no digest at write time.
		{name: "unaligned", ops: unaligned(100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := sinkFile(t, tt.gzip)
			other := filepath.Join(t.TempDir(), "spill.h5")
			copyFileT(t, file, other)
			from, err := conform.Largest(file, "v0", "data")
			require.NoError(t, err)

			res, want := stageSink(t, file, true, tt.ops)
			spill, _ := stageSink(t, other, false, tt.ops)
			if tt.ahead {
				require.Positive(t, res.Ahead, "no chunk was found in place")
			}
			require.Equal(t, spill.Written, res.Written)
			require.Equal(t, spill.Reused, res.Reused)
			require.Equal(t, spill.Unmapped, res.Unmapped)

			got, err := conform.Read(file, "new", "data", from)
			require.NoError(t, err)
			ref, err := conform.Read(other, "new", "data", from)
			require.NoError(t, err)
			require.Equal(t, want, got.Data)
			require.Empty(t, conform.Diff(got, ref))
		})
	}
}

// v0Chunk0 is chunk 0 of make_versioned's v0 (the values 0..511).
func v0Chunk0() []byte {
	b := make([]byte, sinkElems*8)
	for i := range sinkElems {
		binary.LittleEndian.PutUint64(b[i*8:], math.Float64bits(float64(i)))
	}
	return b
}

// unaligned writes chunks 0..n-1 with chunkOf content in 1000-byte pieces.
func unaligned(n int) []sinkOp {
	var all []byte
	for k := range n {
		all = append(all, chunkOf(k)...)
	}
	var ops []sinkOp
	for off := 0; off < len(all); off += 1000 {
		ops = append(ops, sinkOp{off: int64(off), data: all[off:min(off+1000, len(all))]})
	}
	return ops
}

// TestSinkGivesWayToOtherCommits: another array's commit into the same dataset takes the
// slots a sink holds; the sink's chunks move to the spill file first, and both versions
// hold what their arrays staged.
func TestSinkGivesWayToOtherCommits(t *testing.T) {
	file := sinkFile(t, false)
	f, c := openCommitter(t, file, Options{StageMem: sinkBudget})

	stage := func(sink bool, ks []int) (*staged.Array, *versions.Dataset) {
		d, err := f.Dataset(versions.VersionsGroup + "/v0/data")
		require.NoError(t, err)
		arr, err := c.NewArray(d, sink)
		require.NoError(t, err)
		for _, op := range writes(0, ks...) {
			_, err := arr.WriteAt(op.data, op.off, d.ChunkSource())
			require.NoError(t, err)
		}
		return arr, d
	}
	a, da := stage(true, seq(0, 100))
	b, db := stage(false, seq(500, 30))
	wantA, wantB := make([]byte, a.Size()), make([]byte, b.Size())
	_, err := a.ReadAt(wantA, 0, da.ChunkSource())
	require.NoError(t, err)
	_, err = b.ReadAt(wantB, 0, db.ChunkSource())
	require.NoError(t, err)

	rb, err := c.Commit(Change{Base: "v0", Dataset: "data", Array: b})
	require.NoError(t, err)
	require.Equal(t, 30, rb.Written)
	ra, err := c.Commit(Change{Base: "v0", Dataset: "data", Array: a})
	require.NoError(t, err)
	require.Equal(t, 100, ra.Written)
	require.Zero(t, ra.Ahead, "slots taken by the other commit were found in place")

	for _, v := range []struct {
		name string
		want []byte
	}{{rb.Name, wantB}, {ra.Name, wantA}} {
		d, err := f.Dataset(versions.VersionsGroup + "/" + v.name + "/data")
		require.NoError(t, err)
		got := make([]byte, d.Size())
		_, err = d.ReadAt(got, 0)
		require.NoError(t, err)
		require.True(t, slices.Equal(v.want, got), "version %s", v.name)
	}
}

func copyFileT(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, 0o644))
}
