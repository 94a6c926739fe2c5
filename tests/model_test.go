package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"
)

// The model-based test: random sequences of pwrite, ftruncate, shape-xattr resizes, fsync
// and close+reopen on a read-write mount of a random dataset, run against an in-memory
// model (the C-order bytes and shape of every version). Every committed version is then
// compared with the model's snapshot through a fresh read-only mount and through h5py, and
// `vh5fs fsck` must pass.
//
// VH5FS_MODEL_SEED sets the first sequence's seed (sequence i uses seed+i; a failure names
// the seed that reproduces it alone), VH5FS_MODEL_SEQS the number of sequences,
// VH5FS_SOAK=1 runs many more and longer sequences.

// mdlType is one element type of the model test: how make_versioned.py makes it and what
// the model expects of it.
type mdlType struct {
	name   string
	dtype  string // numpy dtype for make_versioned.py --dtype; also h5py's dtype.str
	modulo int64  // make_versioned.py --modulo
	fill   string // make_versioned.py --fillvalue (JSON)
	size   int
	// maxElems bounds the dataset so that make_versioned.py's values never repeat a chunk
	// (it stores every chunk in its own slot, without deduplication).
	maxElems int64
	value    func(n int64) []byte // the element with C-order index n of version v0
	fillRaw  []byte
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

var mdlTypes = []mdlType{
	{name: "int8", dtype: "|i1", modulo: 100, fill: "-7", size: 1, maxElems: 100,
		value: func(n int64) []byte { return []byte{byte(n % 100)} }, fillRaw: []byte{0xf9}},
	{name: "uint16", dtype: "<u2", modulo: 60000, fill: "65535", size: 2, maxElems: 600,
		value: func(n int64) []byte { return le16(uint16(n % 60000)) }, fillRaw: le16(65535)},
	{name: "int32", dtype: "<i4", fill: "-1", size: 4, maxElems: 600,
		value: func(n int64) []byte { return le32(uint32(int32(n))) }, fillRaw: le32(math.MaxUint32)},
	{name: "float32", dtype: "<f4", fill: "-0.5", size: 4, maxElems: 600,
		value:   func(n int64) []byte { return le32(math.Float32bits(float32(n))) },
		fillRaw: le32(math.Float32bits(-0.5))},
	{name: "float64", dtype: "<f8", fill: "-0.5", size: 8, maxElems: 600,
		value:   func(n int64) []byte { return le64(math.Float64bits(float64(n))) },
		fillRaw: le64(math.Float64bits(-0.5))},
	// Three-byte elements: fixed-length strings and a packed compound (u1, <u2).
	{name: "S3", dtype: "|S3", fill: `"zz"`, size: 3, maxElems: 600,
		value: func(n int64) []byte { return []byte(fmt.Sprintf("%03d", n%1000)) }, fillRaw: []byte("zz\x00")},
	{name: "compound3", dtype: "|V3", modulo: 200, fill: "[255, 65535]", size: 3, maxElems: 200,
		value: func(n int64) []byte {
			return append([]byte{byte(n % 200)}, le16(uint16(n*3%200))...)
		}, fillRaw: []byte{0xff, 0xff, 0xff}},
}

// generatorDType is the dtype make_versioned.py is given (numpy's spelling of the compound).
func (ty mdlType) generatorDType() string {
	if ty.name == "compound3" {
		return "u1,<u2"
	}
	return ty.dtype
}

// mdlArray is a dataset's content: C-order bytes and shape.
type mdlArray struct {
	shape []int64
	data  []byte
}

func (a mdlArray) clone() mdlArray {
	return mdlArray{shape: slices.Clone(a.shape), data: slices.Clone(a.data)}
}

func prod(s []int64) int64 {
	n := int64(1)
	for _, x := range s {
		n *= x
	}
	return n
}

// resized is a resized to shape: elements inside both shapes keep their values, new ones
// are the fill value.
func (a mdlArray) resized(shape []int64, item int, fill []byte) mdlArray {
	out := mdlArray{shape: slices.Clone(shape), data: bytes.Repeat(fill, int(prod(shape)))}
	nd := len(shape)
	common := make([]int64, nd)
	for i := range shape {
		common[i] = min(shape[i], a.shape[i])
		if common[i] == 0 {
			return out
		}
	}
	idx := make([]int64, nd-1)
	run := int(common[nd-1]) * item
	for {
		var src, dst int64
		for i := 0; i < nd-1; i++ {
			src = src*a.shape[i] + idx[i]
			dst = dst*shape[i] + idx[i]
		}
		src = src * a.shape[nd-1] * int64(item)
		dst = dst * shape[nd-1] * int64(item)
		copy(out.data[dst:dst+int64(run)], a.data[src:src+int64(run)])
		k := nd - 2
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < common[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return out
		}
	}
}

type mdlVersion struct {
	prev string
	arr  mdlArray
}

// mdlSeq is one sequence: a file, its read-write mount, the model and the open handle.
type mdlSeq struct {
	t      *testing.T
	rng    *rand.Rand
	ty     mdlType
	chunks []int64
	file   string
	m      *mounted

	versions map[string]mdlVersion
	order    []string // committed by the sequence, in order
	current  string
	pending  string // the name the next commit takes; "" for a timestamp
	names    int

	f       *os.File // the open handle
	base    string   // the version it is based on
	arr     mdlArray // what it holds
	wrote   bool     // write(2) since its last commit
	touched bool     // writes or resizes since its last commit
	intact  bool     // written since its last commit, and not shrunk since the last write
	// truncated: the handle was truncated (O_TRUNC, ftruncate), and end is where its
	// content ends (the last truncation's size or the furthest write past it): its
	// commits are refused (EINVAL) while end is inside a row.
	truncated bool
	end       int64

	ops     []string // for failure messages
	commits int
	stats   map[string]int // operations run, by kind
}

func (s *mdlSeq) logf(format string, args ...any) {
	s.ops = append(s.ops, fmt.Sprintf(format, args...))
}

func (s *mdlSeq) rowBytes() int64 {
	r := int64(s.ty.size)
	for _, x := range s.arr.shape[1:] {
		r *= x
	}
	return r
}

func (s *mdlSeq) versionPath(v string) string {
	return filepath.Join(s.m.Dir, "versions", v, "data")
}

func (s *mdlSeq) open(v string, trunc bool) {
	t := s.t
	flags := os.O_RDWR
	if trunc {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(s.versionPath(v), flags, 0)
	require.NoError(t, err, "open %s", v)
	s.f, s.base, s.arr = f, v, s.versions[v].arr.clone()
	s.wrote, s.touched, s.intact = false, false, false
	s.truncated, s.end = trunc, 0
	// O_TRUNC empties axis 0; with rows of 0 bytes (a later axis of length 0) any number
	// of rows is 0 bytes, and the shape stays.
	if trunc && s.arr.shape[0] != 0 && s.rowBytes() > 0 {
		s.arr = s.arr.resized(append([]int64{0}, s.arr.shape[1:]...), s.ty.size, s.ty.fillRaw)
		s.touched = true
	}
	s.logf("open %s trunc=%v shape=%v", v, trunc, s.arr.shape)
	s.stats[fmt.Sprintf("open O_TRUNC=%v", trunc)]++
}

// name picks the next commit's name: mostly our own (user.vh5fs.next_version), sometimes
// the default timestamp.
func (s *mdlSeq) name() {
	if s.pending != "" || s.rng.IntN(5) == 0 {
		return
	}
	s.names++
	s.pending = fmt.Sprintf("c%d", s.names)
	require.NoError(s.t, xattr.Set(s.m.Dir, "user.vh5fs.next_version", []byte(s.pending)))
}

type expect int

const (
	commitNo expect = iota
	commitYes
	commitMaybe
)

// settle records the outcome of an operation that may have committed arr on top of prev:
// a commit makes `current` move; want says whether one must, must not or may happen.
// wait: the commit may arrive after the call returned (release runs after close).
func (s *mdlSeq) settle(before, prev string, arr mdlArray, want expect, wait bool, what string) (string, bool) {
	t := s.t
	cur := currentVersion(t, s.m.Dir)
	if wait && want == commitYes {
		for deadline := time.Now().Add(5 * time.Second); cur == before && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			cur = currentVersion(t, s.m.Dir)
		}
	}
	if cur == before {
		require.NotEqual(t, commitYes, want, "%s: expected a commit\n%s", what, s.trace())
		s.logf("  no commit")
		s.stats["no commit"]++
		return "", false
	}
	require.NotEqual(t, commitNo, want, "%s: unexpected commit %s\n%s", what, cur, s.trace())
	if s.pending != "" {
		require.Equal(t, s.pending, cur, "%s: the commit takes the pending name", what)
		s.pending = ""
	}
	_, dup := s.versions[cur]
	require.False(t, dup, "%s: commit %s reuses a name", what, cur)
	s.versions[cur] = mdlVersion{prev: prev, arr: arr.clone()}
	s.order = append(s.order, cur)
	s.current = cur
	s.commits++
	s.stats["commits"]++
	s.logf("  committed %s (prev %s, shape %v)", cur, prev, arr.shape)
	// The read-write mount serves the new version at once.
	got, err := os.ReadFile(s.versionPath(cur))
	require.NoError(t, err)
	requireBytes(t, arr.data, got, "%s: %s read through the read-write mount\n%s", what, cur, s.trace())
	p, err := xattr.Get(filepath.Join(s.m.Dir, "versions", cur), "user.vh5fs.prev_version")
	require.NoError(t, err)
	require.Equal(t, prev, string(p))
	return cur, true
}

func (s *mdlSeq) trace() string {
	ops := s.ops
	if len(ops) > 60 {
		ops = ops[len(ops)-60:]
	}
	return "ops (last " + strconv.Itoa(len(ops)) + "):\n  " + strings.Join(ops, "\n  ")
}

// requireBytes compares without dumping kilobytes: the first differing offset and lengths.
func requireBytes(t *testing.T, want, got []byte, msg string, args ...any) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo, hi := max(0, i-8), i+8
	t.Fatalf("%s\nlengths want %d got %d; first difference at byte %d: want % x got % x", fmt.Sprintf(msg, args...),
		len(want), len(got), i, want[lo:min(hi, len(want))], got[lo:min(hi, len(got))])
}

// committedHandle: after a commit the handle carries on from the version it made.
func (s *mdlSeq) committedHandle(name string) {
	s.base, s.wrote, s.touched, s.intact = name, false, false, false
}

// differs reports whether the handle's content differs from its base version's.
func (s *mdlSeq) differs() bool {
	b := s.versions[s.base].arr
	return !slices.Equal(b.shape, s.arr.shape) || !bytes.Equal(b.data, s.arr.data)
}

func (s *mdlSeq) pwrite(off int64, data []byte, kind string) {
	t := s.t
	end := off + int64(len(data))
	size := int64(len(s.arr.data))
	s.logf("pwrite %s off=%d n=%d (size %d)", kind, off, len(data), size)
	s.stats["pwrite "+kind]++
	_, err := s.f.WriteAt(data, off)
	if end > size {
		row := s.rowBytes()
		if row == 0 {
			require.ErrorIs(t, err, syscall.EFBIG, "a write past the end with rows of 0 bytes")
			return
		}
		shape := slices.Clone(s.arr.shape)
		shape[0] = (end + row - 1) / row
		s.arr = s.arr.resized(shape, s.ty.size, s.ty.fillRaw)
	}
	require.NoError(t, err, "%s", s.trace())
	copy(s.arr.data[off:], data)
	s.wrote, s.touched, s.intact = true, true, true
	s.end = max(s.end, end)
}

// writeOp makes one write of a random kind.
func (s *mdlSeq) writeOp() {
	rng, it := s.rng, int64(s.ty.size)
	size := int64(len(s.arr.data))
	row := s.rowBytes()
	random := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	kinds := []string{"aligned", "unaligned", "split", "chunk-span", "row-span", "past-end", "noop", "fill", "whole"}
	kind := kinds[rng.IntN(len(kinds))]
	if size == 0 && kind != "past-end" {
		kind = "past-end"
	}
	elems := size / it
	switch kind {
	case "aligned":
		e := rng.Int64N(elems)
		n := 1 + rng.Int64N(min(elems-e, 16))
		s.pwrite(e*it, random(n*it), kind)
	case "unaligned":
		off := rng.Int64N(size)
		s.pwrite(off, random(1+rng.Int64N(min(size-off, 64))), kind)
	case "split": // starts and ends inside elements
		e := rng.Int64N(elems)
		off := e*it + rng.Int64N(it)
		if it > 1 {
			off = e*it + 1 + rng.Int64N(it-1)
		}
		n := rng.Int64N(4)*it + 1 + rng.Int64N(it)
		s.pwrite(off, random(min(n, size-off+it)), kind)
	case "chunk-span": // across a chunk boundary on a random axis
		ax := rng.IntN(len(s.arr.shape))
		c := s.chunks[ax]
		if s.arr.shape[ax] <= c {
			s.pwrite(rng.Int64N(size), random(1+rng.Int64N(3*it)), kind)
			return
		}
		// An element whose coordinate on ax is the last before a boundary.
		coords := make([]int64, len(s.arr.shape))
		for i, x := range s.arr.shape {
			coords[i] = rng.Int64N(x)
		}
		coords[ax] = c*(1+rng.Int64N((s.arr.shape[ax]-1)/c)) - 1
		var flat int64
		for i, x := range s.arr.shape {
			flat = flat*x + coords[i]
		}
		stride := it
		for _, x := range s.arr.shape[ax+1:] {
			stride *= x
		}
		off := flat*it + rng.Int64N(it)
		n := stride + 1 + rng.Int64N(stride+it)
		s.pwrite(off, random(n), kind)
	case "row-span":
		if row == 0 || s.arr.shape[0] < 2 {
			s.pwrite(rng.Int64N(size), random(1+rng.Int64N(it)), kind)
			return
		}
		r := 1 + rng.Int64N(s.arr.shape[0]-1)
		off := r*row - 1 - rng.Int64N(row)
		s.pwrite(off, random(2+rng.Int64N(row)), kind)
	case "past-end": // may leave a gap of fill elements
		r := max(row, it)
		off := max(0, size-rng.Int64N(min(size, 2*r)+1)) + rng.Int64N(2*r+1)
		s.pwrite(off, random(1+rng.Int64N(2*r+it)), kind)
	case "noop": // the bytes already there
		off := rng.Int64N(size)
		n := 1 + rng.Int64N(min(size-off, 4*row+it))
		s.pwrite(off, slices.Clone(s.arr.data[off:off+n]), kind)
	case "fill": // whole rows of the fill value: full chunks become unmapped
		r0 := rng.Int64N(s.arr.shape[0])
		n := 1 + rng.Int64N(min(s.arr.shape[0]-r0, 2*s.chunks[0]))
		s.pwrite(r0*row, bytes.Repeat(s.ty.fillRaw, int(n*row/it)), kind)
	case "whole":
		s.pwrite(0, random(size), kind)
	}
}

func (s *mdlSeq) readBack() {
	size := int64(len(s.arr.data))
	off := s.rng.Int64N(size + 2)
	n := 1 + s.rng.Int64N(64)
	buf := make([]byte, n)
	got, err := s.f.ReadAt(buf, off)
	if err != nil {
		require.ErrorIs(s.t, err, io.EOF)
	}
	want := []byte{}
	if off < size {
		want = s.arr.data[off:min(size, off+n)]
	}
	requireBytes(s.t, want, buf[:got], "read-your-writes at %d+%d\n%s", off, n, s.trace())
	s.stats["pread on the handle"]++
	st, err := s.f.Stat()
	require.NoError(s.t, err)
	require.Equal(s.t, size, st.Size(), "fstat size of the handle")
}

func (s *mdlSeq) ftruncate() {
	t, row := s.t, s.rowBytes()
	if row > 1 && s.rng.IntN(5) == 0 { // not a whole number of rows
		size := s.rng.Int64N(s.arr.shape[0]+2)*row + 1 + s.rng.Int64N(row-1)
		s.logf("ftruncate %d (not whole rows)", size)
		s.stats["ftruncate EINVAL"]++
		require.ErrorIs(t, s.f.Truncate(size), syscall.EINVAL)
		return
	}
	rows := s.rng.Int64N(s.arr.shape[0] + 4)
	if row == 0 {
		rows = 0
	}
	s.logf("ftruncate %d rows (%d bytes)", rows, rows*row)
	s.stats["ftruncate"]++
	require.NoError(t, s.f.Truncate(rows*row))
	s.truncated, s.end = true, rows*row
	if row > 0 && rows != s.arr.shape[0] {
		// Shrinking may drop every chunk the writes staged: fsync then has nothing to
		// commit (when the data is the base's again).
		s.intact = s.intact && rows > s.arr.shape[0]
		shape := slices.Clone(s.arr.shape)
		shape[0] = rows
		s.arr = s.arr.resized(shape, s.ty.size, s.ty.fillRaw)
		s.touched = true
	}
}

// partialRow reports whether the handle's commits are refused: it truncated and its
// content ends inside a row.
func (s *mdlSeq) partialRow() bool {
	row := s.rowBytes()
	return s.truncated && row > 0 && s.end%row != 0
}

func (s *mdlSeq) fsync() {
	if s.partialRow() {
		before := currentVersion(s.t, s.m.Dir)
		s.logf("fsync (base %s): truncated, ends at %d inside a row", s.base, s.end)
		s.stats["fsync EINVAL"]++
		require.ErrorIs(s.t, s.f.Sync(), syscall.EINVAL, "%s", s.trace())
		s.settle(before, s.base, s.arr, commitNo, false, "fsync")
		return
	}
	want := commitNo
	switch {
	case s.differs(), s.intact: // fsync commits whatever was written, even the same bytes
		want = commitYes
	case s.touched: // resized and back, or writes truncated away: whether staged chunks
		// remain depends on the chunk grid; either outcome is right
		want = commitMaybe
	}
	s.name()
	before := currentVersion(s.t, s.m.Dir)
	s.logf("fsync (base %s)", s.base)
	s.stats["fsync"]++
	require.NoError(s.t, s.f.Sync(), "%s", s.trace())
	if name, ok := s.settle(before, s.base, s.arr, want, false, "fsync"); ok {
		s.committedHandle(name)
	} else {
		s.committedHandle(s.base)
	}
}

// closeHandle: close commits a changed handle (at flush when it was written to, else at
// release); data equal to the base makes no version.
func (s *mdlSeq) closeHandle() {
	if s.partialRow() {
		before := currentVersion(s.t, s.m.Dir)
		s.logf("close (base %s): truncated, ends at %d inside a row", s.base, s.end)
		s.stats["close EINVAL"]++
		require.ErrorIs(s.t, s.f.Close(), syscall.EINVAL, "%s", s.trace())
		s.settle(before, s.base, s.arr, commitNo, false, "close")
		s.f = nil
		return
	}
	want := commitNo
	if s.differs() {
		want = commitYes
	}
	s.name()
	before := currentVersion(s.t, s.m.Dir)
	s.logf("close (base %s)", s.base)
	s.stats["close"]++
	require.NoError(s.t, s.f.Close(), "%s", s.trace())
	s.settle(before, s.base, s.arr, want, !s.wrote, "close")
	s.f = nil
}

func (s *mdlSeq) reopen() {
	v := s.current
	if s.rng.IntN(4) == 0 {
		all := append([]string{"v0"}, s.order...)
		v = all[s.rng.IntN(len(all))]
	}
	s.open(v, s.rng.IntN(12) == 0)
}

// setShape sets user.vh5fs.shape on a committed version's file: it resizes and commits at
// once, on top of that version (a sibling of whatever the open handle stages).
func (s *mdlSeq) setShape() {
	t := s.t
	v := s.current
	if s.rng.IntN(3) == 0 {
		all := append([]string{"v0"}, s.order...)
		v = all[s.rng.IntN(len(all))]
	}
	old := s.versions[v].arr
	if s.rng.IntN(10) == 0 { // wrong rank
		bad := append(slices.Clone(old.shape), 1)
		s.logf("setxattr shape %v on %s (wrong rank)", bad, v)
		s.stats["setxattr shape EINVAL"]++
		require.ErrorIs(t, xattr.Set(s.versionPath(v), "user.vh5fs.shape", jsonShape(bad)), syscall.EINVAL)
		return
	}
	shape := slices.Clone(old.shape)
	for {
		for i := range shape {
			switch s.rng.IntN(4) {
			case 0:
				shape[i] = old.shape[i]
			case 1:
				shape[i] = s.rng.Int64N(old.shape[i] + 1)
			default:
				shape[i] = max(0, old.shape[i]+s.rng.Int64N(2*s.chunks[i]+1)-s.chunks[i])
			}
			if s.rng.IntN(30) == 0 {
				shape[i] = 0
			}
		}
		if prod(shape) <= s.ty.maxElems {
			break
		}
	}
	arr := old.resized(shape, s.ty.size, s.ty.fillRaw)
	want := commitYes
	if slices.Equal(shape, old.shape) {
		want = commitNo
	}
	s.name()
	before := currentVersion(t, s.m.Dir)
	s.logf("setxattr shape %v on %s (was %v)", shape, v, old.shape)
	s.stats["setxattr shape"]++
	require.NoError(t, xattr.Set(s.versionPath(v), "user.vh5fs.shape", jsonShape(shape)), "%s", s.trace())
	s.settle(before, v, arr, want, false, "setxattr shape")
}

func jsonShape(shape []int64) []byte {
	b, _ := json.Marshal(shape)
	return b
}

// mdlGeometry draws a dataset's shape and chunks: 1-3 axes, chunk shapes that mostly
// leave edge chunks.
func mdlGeometry(rng *rand.Rand, maxElems int64) (shape, chunks []int64) {
	dims := 1 + rng.IntN(3)
	maxChunk := []int64{0, 9, 4, 3}[dims]
	for {
		shape, chunks = make([]int64, dims), make([]int64, dims)
		for i := range shape {
			chunks[i] = 1 + rng.Int64N(maxChunk)
			shape[i] = chunks[i]*rng.Int64N(4) + 1 + rng.Int64N(chunks[i])
			if rng.IntN(30) == 0 {
				shape[i] = 0
			}
		}
		switch r := rng.IntN(4); {
		case dims == 1 && r == 0: // fewer, bigger chunks
			chunks[0] = 16 + rng.Int64N(48)
			shape[0] = rng.Int64N(4 * chunks[0])
		case dims == 1 && r == 1: // many chunks: mapping lists vh5fs writes without libhdf5
			chunks[0] = 1 + rng.Int64N(2)
			shape[0] = maxElems/2 + rng.Int64N(maxElems/2)
		}
		if prod(shape) <= maxElems && (prod(shape) > 0 || rng.IntN(3) == 0) {
			return shape, chunks
		}
	}
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

// runModelSequence runs one sequence of ops steps from seed and checks the result.
func runModelSequence(t *testing.T, seed uint64, ty mdlType, steps int, stats map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	shape, chunks := mdlGeometry(rng, ty.maxElems)
	filter := []string{"none", "none", "gzip", "lzf"}[rng.IntN(4)]
	t.Logf("seed %d: %s shape %v chunks %v filter %s, %d steps", seed, ty.name, shape, chunks, filter, steps)
	args := []string{"--shape", joinInts(shape), "--chunks", joinInts(chunks), "--dtype", ty.generatorDType(),
		"--modulo", strconv.FormatInt(ty.modulo, 10), "--fillvalue", ty.fill}
	if filter != "none" {
		args = append(args, "--"+filter)
	}
	file := makeVersioned(t, args...)

	v0 := mdlArray{shape: shape}
	for n := int64(0); n < prod(shape); n++ {
		v0.data = append(v0.data, ty.value(n)...)
	}
	s := &mdlSeq{t: t, rng: rng, ty: ty, chunks: chunks, file: file,
		versions: map[string]mdlVersion{"v0": {prev: "__first_version__", arr: v0}}, current: "v0", stats: stats}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (VH5FS_MODEL_SEED=%d VH5FS_MODEL_SEQS=1 reproduces it)\n%s", seed, seed, s.trace())
		}
	})
	opts := "rw"
	if rng.IntN(2) == 0 {
		s.pending = "first"
		opts = "rw,commit_name=first"
	}
	s.m = mount(t, file, opts)
	t.Cleanup(func() { // before the unmount: a failed sequence leaves its handle open
		if s.f != nil {
			s.f.Close()
		}
	})
	s.open("v0", false)
	for i := 0; i < steps; i++ {
		switch p := rng.IntN(100); {
		case p < 50:
			s.writeOp()
		case p < 58:
			s.readBack()
		case p < 68:
			s.ftruncate()
		case p < 76:
			s.setShape()
		case p < 88:
			s.fsync()
		default:
			s.closeHandle()
			s.reopen()
		}
	}
	s.closeHandle()
	s.m.unmount(t)

	// The file passes the checker.
	stdout, stderr, code := vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, "vh5fs fsck: %s%s\n%s", stdout, stderr, s.trace())

	s.checkReadOnlyMount()
	s.checkH5py()
	t.Logf("%d versions committed", s.commits)
}

// checkReadOnlyMount compares every version, read through a fresh read-only mount, with
// the model's snapshot.
func (s *mdlSeq) checkReadOnlyMount() {
	t := s.t
	m := mount(t, s.file, "ro")
	all := append([]string{"v0"}, s.order...)
	require.ElementsMatch(t, all, readDirNames(t, filepath.Join(m.Dir, "versions")), "the versions listed")
	require.Equal(t, s.current, currentVersion(t, m.Dir))
	for _, v := range all {
		want := s.versions[v]
		p := filepath.Join(m.Dir, "versions", v, "data")
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		requireBytes(t, want.arr.data, got, "version %s through a read-only mount\n%s", v, s.trace())
		shape, err := xattr.Get(p, "user.vh5fs.shape")
		require.NoError(t, err)
		require.Equal(t, string(jsonShape(want.arr.shape)), string(shape), "shape of %s", v)
		dtype, err := xattr.Get(p, "user.vh5fs.dtype")
		require.NoError(t, err)
		require.Equal(t, s.ty.dtype, string(dtype))
		prev, err := xattr.Get(filepath.Join(m.Dir, "versions", v), "user.vh5fs.prev_version")
		require.NoError(t, err)
		require.Equal(t, want.prev, string(prev), "prev_version of %s", v)
	}
	m.unmount(t)
}

// checkH5py reads every version with h5py (versioned-hdf5's layout) and compares digests.
func (s *mdlSeq) checkH5py() {
	t := s.t
	out, err := exec.Command(python(t), "py/model_digests.py", s.file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	type row struct {
		Current, Version, Prev, Path, Dtype, Sha256 string
		Shape                                       []int64
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r row
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Text())
		if r.Current != "" {
			require.Equal(t, s.current, r.Current, "current_version")
			continue
		}
		want, ok := s.versions[r.Version]
		require.True(t, ok, "h5py sees version %s the model does not have", r.Version)
		require.Equal(t, "data", r.Path)
		require.Equal(t, want.prev, r.Prev, "prev_version of %s", r.Version)
		require.Equal(t, s.ty.dtype, r.Dtype)
		require.Equal(t, want.arr.shape, append([]int64{}, r.Shape...), "h5py's shape of %s", r.Version)
		sum := sha256.Sum256(want.arr.data)
		require.Equal(t, hex.EncodeToString(sum[:]), r.Sha256, "h5py's read of %s\n%s", r.Version, s.trace())
		seen[r.Version] = true
	}
	require.Len(t, seen, len(s.versions), "h5py read every version:\n%s", out)
}

func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "%s", name)
	return n
}

// TestModelRandomized: see the top of this file.
func TestModelRandomized(t *testing.T) {
	seqs, steps := int64(len(mdlTypes)*4), 60
	if os.Getenv("VH5FS_SOAK") == "1" {
		seqs, steps = 210, 80
	}
	seqs = envInt(t, "VH5FS_MODEL_SEQS", seqs)
	first := uint64(envInt(t, "VH5FS_MODEL_SEED", 1))
	t.Logf("seeds %d..%d, %d steps per sequence", first, first+uint64(seqs)-1, steps)
	start := time.Now()
	stats := map[string]int{}
	for i := int64(0); i < seqs; i++ {
		seed := first + uint64(i)
		ty := mdlTypes[seed%uint64(len(mdlTypes))] // every type in turn
		t.Run(fmt.Sprintf("seed=%d/%s", seed, ty.name), func(t *testing.T) {
			runModelSequence(t, seed, ty, steps, stats)
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d sequences in %v", seqs, time.Since(start).Round(time.Millisecond))
	var kinds []string
	for k, n := range stats {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(kinds)
	t.Logf("operations: %s", strings.Join(kinds, ", "))
}
