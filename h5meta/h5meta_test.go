package h5meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const python = "/usr/bin/python3"

type expMapping struct {
	VStart      []int64 `json:"vstart"`
	VCount      []int64 `json:"vcount"`
	SrcFile     string  `json:"src_file"`
	SrcDataset  string  `json:"src_dataset"`
	SrcStart    []int64 `json:"src_start"`
	SrcCount    []int64 `json:"src_count"`
	Unsupported string  `json:"unsupported"`
}

type expChunk struct {
	Offset     []int64 `json:"offset"`
	Addr       int64   `json:"addr"`
	Size       int64   `json:"size"`
	FilterMask uint32  `json:"filter_mask"`
}

type expDataset struct {
	Path     string       `json:"path"`
	Addr     uint64       `json:"addr"`
	Layout   string       `json:"layout"`
	Shape    []int64      `json:"shape"`
	Mappings []expMapping `json:"mappings"`
	Chunks   []expChunk   `json:"chunks"`
}

type expFile struct {
	Datasets []expDataset `json:"datasets"`
	Groups   []expDataset `json:"groups"` // path and addr only (expect.py --addrs)
}

func (e *expFile) dataset(t testing.TB, path string) expDataset {
	for _, d := range e.Datasets {
		if d.Path == path {
			return d
		}
	}
	t.Fatalf("no dataset %s", path)
	return expDataset{}
}

// needPython skips the test when Debian's h5py is not available.
func needPython(t testing.TB) {
	t.Helper()
	if err := exec.Command(python, "-c", "import h5py").Run(); err != nil {
		t.Skipf("%s with h5py not available: %v", python, err)
	}
}

func execPython(args ...string) ([]byte, error) {
	return exec.Command(python, args...).CombinedOutput()
}

// expect asks libhdf5 (through h5py, testdata/expect.py) about every dataset of file.
func expect(t testing.TB, file string, args ...string) *expFile {
	t.Helper()
	needPython(t)
	cmd := exec.Command(python, append([]string{"testdata/expect.py", file}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "expect.py %s: %s", file, stderr.String())
	var e expFile
	require.NoError(t, json.Unmarshal(out, &e))
	return &e
}

func open(t testing.TB, path string) *File {
	t.Helper()
	fh, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { fh.Close() })
	st, err := fh.Stat()
	require.NoError(t, err)
	f, err := Open(fh, st.Size())
	require.NoError(t, err)
	return f
}

// makeVersioned writes a file with tests/py/make_versioned.py into dir.
func makeVersioned(t testing.TB, dir, name string, args ...string) string {
	t.Helper()
	needPython(t)
	out := filepath.Join(dir, name)
	cmd := exec.Command(python, append([]string{"../tests/py/make_versioned.py", out}, args...)...)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "make_versioned.py: %s", msg)
	return out
}

// cachedVersioned is makeVersioned for big files: the file is kept in the system temp
// directory, keyed by the generator's contents and arguments, so that it is generated once.
func cachedVersioned(t testing.TB, args ...string) string {
	t.Helper()
	script, err := os.ReadFile("../tests/py/make_versioned.py")
	if err != nil {
		t.Skipf("make_versioned.py: %v", err)
	}
	sum := sha256.Sum256(append(script, strings.Join(args, " ")...))
	dir := filepath.Join(os.TempDir(), "h5meta-test")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".h5")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp, err := os.MkdirTemp(dir, "gen")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)
	out := makeVersioned(t, tmp, "f.h5", args...)
	require.NoError(t, os.Rename(out, path))
	return path
}

func toExpMappings(ms []Mapping) []expMapping {
	out := make([]expMapping, len(ms))
	for i, m := range ms {
		out[i] = expMapping{VStart: m.VStart, VCount: m.VCount, SrcFile: m.SrcFile, SrcDataset: m.SrcDataset,
			SrcStart: m.SrcStart, SrcCount: m.SrcCount}
	}
	return out
}

func toExpChunks(cs []Chunk) []expChunk {
	out := make([]expChunk, len(cs))
	for i, c := range cs {
		out[i] = expChunk{Offset: c.Offset, Addr: c.Addr, Size: c.Size, FilterMask: c.FilterMask}
	}
	return out
}

// checkFile compares every dataset of path with what libhdf5 says. unsupported lists
// datasets for which h5meta may answer ErrUnsupported; it returns the datasets checked.
func checkFile(t *testing.T, path string, unsupported map[string]bool) int {
	e := expect(t, path)
	f := open(t, path)
	n := 0
	for _, d := range e.Datasets {
		msg := fmt.Sprintf("%s %s", filepath.Base(path), d.Path)
		ms, merr := f.VirtualMappings(d.Addr)
		cs, cerr := f.Chunks(d.Addr)
		switch d.Layout {
		case "virtual":
			require.ErrorIs(t, cerr, ErrUnsupported, msg)
			irregular := false
			for _, m := range d.Mappings {
				irregular = irregular || m.Unsupported != ""
			}
			if irregular || unsupported[d.Path] && errors.Is(merr, ErrUnsupported) {
				require.ErrorIs(t, merr, ErrUnsupported, msg)
				t.Logf("%s: unsupported: %v", msg, merr)
				continue
			}
			require.NoError(t, merr, msg)
			if d.Mappings == nil {
				d.Mappings = []expMapping{}
			}
			require.Equal(t, d.Mappings, toExpMappings(ms), msg)
		case "chunked":
			require.ErrorIs(t, merr, ErrUnsupported, msg)
			if unsupported[d.Path] && errors.Is(cerr, ErrUnsupported) {
				t.Logf("%s: unsupported: %v", msg, cerr)
				continue
			}
			require.NoError(t, cerr, msg)
			if d.Chunks == nil {
				d.Chunks = []expChunk{}
			}
			require.Equal(t, d.Chunks, toExpChunks(cs), msg)
			checkLookups(t, f, d.Addr, cs, msg)
		default:
			require.ErrorIs(t, merr, ErrUnsupported, msg)
			require.ErrorIs(t, cerr, ErrUnsupported, msg)
		}
		n++
	}
	return n
}

// checkLookups looks every chunk of want up through a ChunkIndex, and offsets next to them
// that hold no chunk.
func checkLookups(t *testing.T, f *File, addr uint64, want []Chunk, msg string) {
	x, err := f.ChunkIndex(addr)
	require.NoError(t, err, msg)
	stored := map[string]bool{}
	for _, c := range want {
		stored[fmt.Sprint(c.Offset)] = true
	}
	for _, c := range want {
		got, ok, err := x.Lookup(c.Offset)
		require.NoError(t, err, msg)
		require.True(t, ok, "%s: chunk at %v", msg, c.Offset)
		require.Equal(t, c, got, msg)
		for d := range c.Offset {
			for _, delta := range []int64{-1, 1, 1 << 40} {
				off := slices.Clone(c.Offset)
				off[d] += delta
				if off[d] < 0 || stored[fmt.Sprint(off)] {
					continue
				}
				_, ok, err := x.Lookup(off)
				require.NoError(t, err, msg)
				require.False(t, ok, "%s: no chunk at %v", msg, off)
			}
		}
	}
	_, _, err = x.Lookup([]int64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	require.Error(t, err, "%s: an offset of the wrong rank", msg)
}

func fixtureFiles(t *testing.T) []string {
	var files []string
	for _, pat := range []string{
		"../tests/testdata/fixtures/*.h5",
		"../tests/testdata/fixtures/legacy/*.h5",
		"../tests/testdata/extra/*.h5",
	} {
		m, err := filepath.Glob(pat)
		require.NoError(t, err)
		files = append(files, m...)
	}
	return files
}

func TestFixtures(t *testing.T) {
	files := fixtureFiles(t)
	if len(files) == 0 {
		t.Skip("no reference fixtures")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			n := checkFile(t, file, nil)
			require.Positive(t, n)
		})
	}
}

func TestGenerated(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"plain.h5":  {"--shape", "10,7", "--chunks", "4,3", "--versions", "4"},
		"gzip.h5":   {"--shape", "10,7", "--chunks", "4,3", "--versions", "4", "--gzip"},
		"lzf.h5":    {"--shape", "10,7", "--chunks", "4,3", "--versions", "4", "--lzf"},
		"1d.h5":     {"--shape", "1000", "--chunks", "7", "--versions", "3"},
		"multi.h5":  {"--shape", "300,20", "--chunks", "2,3", "--versions", "2"}, // multi-level B-tree
		"single.h5": {"--shape", "3,2", "--chunks", "4,4"},
		"10k.h5":    {"--shape", "10000", "--chunks", "1", "--versions", "2"},
		"deep.h5":   {"--shape", "40,40,8", "--chunks", "1,1,8"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && (name == "10k.h5" || name == "deep.h5") {
				t.Skip("short")
			}
			path := makeVersioned(t, dir, name, args...)
			require.Positive(t, checkFile(t, path, nil))
		})
	}
}

func TestLatest(t *testing.T) {
	needPython(t)
	path := filepath.Join(t.TempDir(), "latest.h5")
	args := []string{"testdata/make_latest.py", path}
	if testing.Short() {
		args = append(args, "--small")
	}
	out, err := exec.Command(python, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	checkFile(t, path, map[string]bool{"/implicit": true, "/bt2": true, "/ext_dim1": true, "/fixed_resizable": true})
	f := open(t, path)
	e := expect(t, path, "--no-chunks")
	_, err = f.Chunks(e.dataset(t, "/implicit").Addr)
	require.ErrorIs(t, err, ErrUnsupported)
	_, err = f.Chunks(e.dataset(t, "/bt2").Addr)
	require.ErrorIs(t, err, ErrUnsupported)
}

func TestUserBlock(t *testing.T) {
	needPython(t)
	path := filepath.Join(t.TempDir(), "ub.h5")
	script := `import h5py, numpy as np, sys
with h5py.File(sys.argv[1], "w", userblock_size=1024) as f:
    d = f.create_dataset("x", shape=(100,), maxshape=(None,), chunks=(10,))
    d[:55] = 1
    l = h5py.VirtualLayout(shape=(20,), dtype="<f8")
    l[0:10] = h5py.VirtualSource(".", "/x", shape=(100,))[10:20]
    f.create_virtual_dataset("v", l)
`
	out, err := exec.Command(python, "-c", script, path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	f := open(t, path)
	require.EqualValues(t, 1024, f.Base())
	require.Equal(t, 2, checkFile(t, path, nil))
}

func Test100k(t *testing.T) {
	if testing.Short() {
		t.Skip("short: generating the 100k file takes ~20 s")
	}
	path := cachedVersioned(t, "--shape", "100000", "--chunks", "1", "--versions", "2")
	e := expect(t, path, "--addrs")
	f := open(t, path)
	raw, err := f.Chunks(e.dataset(t, "/_version_data/data/raw_data").Addr)
	require.NoError(t, err)
	require.Len(t, raw, 100001)
	for i, c := range raw {
		if len(c.Offset) != 1 || c.Offset[0] != int64(i) || c.Size != 8 {
			t.Fatalf("chunk %d: %+v", i, c)
		}
	}
	for v, changed := range map[string]int64{"v0": 0, "v1": 100000} {
		ms, err := f.VirtualMappings(e.dataset(t, "/_version_data/versions/"+v+"/data").Addr)
		require.NoError(t, err)
		require.Len(t, ms, 100000)
		for i, m := range ms {
			src := int64(i)
			if i == 0 {
				src = changed
			}
			want := Mapping{VStart: []int64{int64(i)}, VCount: []int64{1}, SrcFile: ".",
				SrcDataset: "/_version_data/data/raw_data", SrcStart: []int64{src}, SrcCount: []int64{1}}
			if fmt.Sprint(m) != fmt.Sprint(want) {
				t.Fatalf("%s mapping %d: got %+v, want %+v", v, i, m, want)
			}
			if src >= int64(len(raw)) { // raw_data's chunks are 0..len-1 (checked above)
				t.Fatalf("%s mapping %d: no chunk at %d", v, i, src)
			}
		}
	}
}

func benchFile(b *testing.B, n int) (*File, *expFile) {
	path := cachedVersioned(b, "--shape", fmt.Sprint(n), "--chunks", "1", "--versions", "2")
	return open(b, path), expect(b, path, "--addrs")
}

func benchMappings(b *testing.B, n int) {
	f, e := benchFile(b, n)
	addr := e.dataset(b, "/_version_data/versions/v1/data").Addr
	b.ResetTimer()
	for b.Loop() {
		ms, err := f.VirtualMappings(addr)
		if err != nil || len(ms) != n {
			b.Fatal(err, len(ms))
		}
	}
}

func benchChunks(b *testing.B, n int) {
	f, e := benchFile(b, n)
	addr := e.dataset(b, "/_version_data/data/raw_data").Addr
	b.ResetTimer()
	for b.Loop() {
		cs, err := f.Chunks(addr)
		if err != nil || len(cs) != n+1 {
			b.Fatal(err, len(cs))
		}
	}
}

func BenchmarkVirtualMappings10k(b *testing.B)  { benchMappings(b, 10000) }
func BenchmarkVirtualMappings100k(b *testing.B) { benchMappings(b, 100000) }
func BenchmarkChunks10k(b *testing.B)           { benchChunks(b, 10000) }
func BenchmarkChunks100k(b *testing.B)          { benchChunks(b, 100000) }

// TestMappedListShrinks: a long mapping list is mapped from the file; when the file is cut
// short under it (another process truncating it), Scan and Verify fail with an error
// instead of the process dying of SIGBUS.
func TestMappedListShrinks(t *testing.T) {
	if testing.Short() {
		t.Skip("short: generating the 100k file takes ~20 s")
	}
	src := cachedVersioned(t, "--shape", "100000", "--chunks", "1", "--versions", "2")
	addr := expect(t, src, "--addrs").dataset(t, "/_version_data/versions/v1/data").Addr
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "shrinks.h5")
	require.NoError(t, os.WriteFile(path, data, 0o644))

	for _, step := range []string{"scan", "verify", "copy"} {
		t.Run(step, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, data, 0o644))
			f := open(t, path)
			l, err := f.Mappings(addr)
			require.NoError(t, err)
			require.True(t, l.mapped, "a list of 100k mappings is mapped, not read")
			require.NoError(t, os.Truncate(path, int64(addr)))
			switch step {
			case "scan":
				err = l.Scan(func(*Batch) bool { return true })
			case "verify":
				err = l.Verify()
			default:
				err = l.Copy(func([]byte) error { return nil })
			}
			require.ErrorContains(t, err, "the file changed while it was read")
		})
	}
}

// ranger reads a file and says every range is the file's (FileRanger), as the journal
// driver's reader does for a range no held write covers.
type ranger struct{ f *os.File }

func (r ranger) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }

func (r ranger) FileOf(off, n int64) *os.File {
	f, err := os.Open(r.f.Name())
	if err != nil {
		return nil
	}
	return f
}

// TestStoredMappingsCopy: a long list is mapped through a FileRanger and copied window by
// window as stored; a changed byte makes the copy fail on the checksum, and write's error
// stops it.
func TestStoredMappingsCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("short: generating the 100k file takes ~20 s")
	}
	src := cachedVersioned(t, "--shape", "100000", "--chunks", "1", "--versions", "2")
	addr := expect(t, src, "--addrs").dataset(t, "/_version_data/versions/v1/data").Addr
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	openRanger := func(data []byte) *File {
		path := filepath.Join(t.TempDir(), "copy.h5")
		require.NoError(t, os.WriteFile(path, data, 0o644))
		fh, err := os.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { fh.Close() })
		f, err := Open(ranger{fh}, int64(len(data)))
		require.NoError(t, err)
		return f
	}
	f := openRanger(data)
	l, err := f.StoredMappings(addr)
	require.NoError(t, err)
	require.True(t, l.mapped, "a FileRanger's range is mapped")
	ref, err := f.MappingListRef(addr)
	require.NoError(t, err)
	at, n, large, err := f.largeHeapObject(ref.Addr, ref.Index)
	require.NoError(t, err)
	require.True(t, large)
	require.Equal(t, int(n), l.Size())
	var got []byte
	require.NoError(t, l.Copy(func(p []byte) error { got = append(got, p...); return nil }))
	require.Equal(t, data[at:at+n], got, "the list as stored")

	bad := slices.Clone(data)
	bad[at+n/2] ^= 1
	l, err = openRanger(bad).StoredMappings(addr)
	require.NoError(t, err)
	require.ErrorContains(t, l.Copy(func([]byte) error { return nil }), "corrupt")

	stop := errors.New("disk full")
	calls := 0
	require.ErrorIs(t, l.Copy(func([]byte) error { calls++; return stop }), stop)
	require.Equal(t, 1, calls, "nothing is written after write fails")
}

// TestFastSelections: the selections run decodes itself (fastHeader, blockCoords)
// decode as the general decoder (selection) decodes them, and every one the general
// decoder refuses is left to it.
func TestFastSelections(t *testing.T) {
	le32 := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	le64 := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	v1 := func(rank uint32, corners ...uint32) []byte { // type, version, reserved, length, rank, blocks
		return append(le32(selHyper, 1, 0, 8+8*rank, rank, 1), le32(corners...)...)
	}
	v2 := func(flags byte, rank uint32, fields ...uint64) []byte { // type, version, flags, length, rank
		b := append(le32(selHyper, 2), flags)
		b = append(b, le32(4+32*rank, rank)...)
		return append(b, le64(fields...)...)
	}
	v3 := func(flags, enc byte, rank uint32, fields ...uint64) []byte { // type, version, flags, size, rank
		b := append(le32(selHyper, 3), flags, enc)
		b = append(b, le32(rank)...)
		for _, v := range fields {
			b = binary.LittleEndian.AppendUint64(b, v)[:len(b)+int(enc)]
		}
		return b
	}
	const unlim = ^uint64(0)
	for _, tc := range []struct {
		name string
		sel  []byte
		rank int
	}{
		{"v1 1-D", v1(1, 128, 255), 1},
		{"v1 2-D", v1(2, 4, 0, 7, 9), 2},
		{"v1 one element", v1(1, 5, 5), 1},
		{"v1 end before start", v1(1, 9, 8), 1},
		{"v1 two blocks", append(le32(selHyper, 1, 0, 24, 1, 2), le32(0, 1, 4, 5)...), 1},
		{"v1 other rank", v1(2, 0, 0, 1, 1), 1},
		{"v2 regular", v2(1, 1, 64, 64, 1, 64), 1},
		{"v2 regular 2-D", v2(1, 2, 0, 1, 1, 10, 8, 4, 3, 4), 2},
		{"v2 count zero", v2(1, 1, 3, 1, 0, 7), 1},
		{"v2 strided", v2(1, 1, 0, 8, 4, 2), 1},
		{"v2 unlimited", v2(1, 1, 0, 1, unlim, 1), 1},
		{"v2 out of range", v2(1, 1, maxCoord, 1, 1, 1), 1},
		{"v2 overflowing extent", v2(1, 1, 0, 1<<40, 1<<30, 1<<40), 1},
		{"v2 irregular", v2(0, 1, 0, 1, 1, 1), 1},
		{"v3 regular 2-byte", v3(1, 2, 1, 6, 1, 1, 3), 1},
		{"v3 regular 4-byte 2-D", v3(1, 4, 2, 1<<20, 1, 1, 1<<16, 0, 1, 3, 2), 2},
		{"v3 regular 8-byte", v3(1, 8, 1, 1<<40, 1<<40, 1, 1<<20), 1},
		{"v3 count stride block", v3(1, 2, 1, 4, 5, 3, 5), 1},
		{"v3 strided", v3(1, 4, 1, 0, 8, 4, 2), 1},
		{"v3 unlimited count 2-byte", v3(1, 2, 1, 0, 1, 0xffff, 1), 1},
		{"v3 unlimited block 4-byte", v3(1, 4, 1, 0, 1, 1, 0xffffffff), 1},
		{"v3 unlimited 8-byte", v3(1, 8, 1, 0, 1, unlim, 1), 1},
		{"v3 bad size", v3(1, 3, 1, 0, 1, 1, 1), 1},
		{"v3 other rank", v3(1, 2, 2, 0, 1, 1, 1, 0, 1, 1, 1), 1},
		{"v3 irregular one block", append(append(le32(selHyper, 3), 0, 2), append(le32(1), 1, 0, 1, 0, 4, 0)...), 1},
		{"hyperslab version 4", append(le32(selHyper, 4), make([]byte, 40)...), 1},
		{"points", append(le32(selPoints, 1, 0, 16, 1, 1), le32(3)...), 1},
		{"all", le32(selAll, 1, 0, 0, 0, 0), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &File{so: 8, sl: 8}
			var a arena
			b := &buf{b: tc.sel}
			start, count, all, err := f.selection(b, &a)
			general := err == nil && !all && len(start) == tc.rank
			out := make([]int64, 2*tc.rank)
			n, ver := fastHeader(append(tc.sel, make([]byte, 24)...), tc.rank) // room for the header check
			fast := n > 0
			if fast {
				var used int
				used, fast = blockCoords(tc.sel[n:], ver, tc.rank, out)
				if fast {
					require.Equal(t, b.off, n+used, "length")
				}
			}
			require.Equal(t, general, fast, "fast path taken iff the general decoder accepts (err %v)", err)
			if fast {
				require.Equal(t, start, out[:tc.rank])
				require.Equal(t, count, out[tc.rank:])
			}
			if tc.rank == 1 && ver == (form{true, 4}) { // run's inline form of the same decoding
				s, c, ok := corners1(tc.sel[n:])
				require.Equal(t, fast, ok)
				if ok {
					require.Equal(t, []int64{s, c}, out)
				}
			}
		})
	}
}
