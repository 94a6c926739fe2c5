package writefile

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// basic_1d's dataset x in v1: ten int64 0..9, chunks of 4, fill value -1.
const (
	base = "v1"
	ds   = "x"
)

func ints(vs ...int64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}

type env struct {
	file string
	f    *versions.File
	c    *commit.Committer
}

func open(t *testing.T) *env { return openWith(t, commit.Options{StageMem: 64 << 20}) }

func openWith(t *testing.T, o commit.Options) *env {
	t.Helper()
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	c, err := commit.Open(f, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(); f.Close() })
	return &env{file: file, f: f, c: c}
}

// read is version's x through a fresh read-only look at the committed file.
func (e *env) read(t *testing.T, version string) []byte {
	t.Helper()
	d, err := e.f.Dataset(versions.VersionsGroup + "/" + version + "/" + ds)
	require.NoError(t, err)
	b := make([]byte, d.Size())
	_, err = d.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

func TestHandle(t *testing.T) {
	partial := append(ints(9), 5, 0, 0, 0, 0) // 13 bytes: one row and 5 bytes of the next
	type step struct {
		op      string // "write", "truncate", "reshape", "fsync", "close"
		off     int64
		data    []byte
		shape   []int64
		wantErr syscall.Errno
	}
	tests := []struct {
		name      string
		steps     []step
		want      []byte // x in the last version made
		versions  int    // versions the handle made
		finalSize int64
	}{
		{"overwrite, fsync", []step{{op: "write", off: 8, data: ints(100, 101)}, {op: "fsync"}},
			ints(0, 100, 101, 3, 4, 5, 6, 7, 8, 9), 1, 80},
		{"unaligned, split elements", []step{{op: "write", off: 3, data: []byte{0xAA, 0xBB}}, {op: "fsync"}},
			append([]byte{0, 0, 0, 0xAA, 0xBB, 0, 0, 0}, ints(1, 2, 3, 4, 5, 6, 7, 8, 9)...), 1, 80},
		{"write past the end grows axis 0 with fill", []step{{op: "write", off: 96, data: ints(42)}, {op: "fsync"}},
			ints(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -1, 42), 1, 104},
		{"truncate by whole rows", []step{{op: "truncate", off: 24}, {op: "fsync"}}, ints(0, 1, 2), 1, 24},
		{"truncate inside a row is EINVAL", []step{{op: "truncate", off: 20, wantErr: syscall.EINVAL}, {op: "fsync"}},
			nil, 0, 80},
		{"negative truncate is EINVAL", []step{{op: "truncate", off: -8, wantErr: syscall.EINVAL}}, nil, 0, 80},
		{"negative offset is EINVAL", []step{{op: "write", off: -1, data: []byte{1}, wantErr: syscall.EINVAL}}, nil, 0, 80},
		{"reshape grows with fill", []step{{op: "reshape", shape: []int64{12}}, {op: "fsync"}},
			ints(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -1), 1, 96},
		{"reshape of another rank is EINVAL", []step{{op: "reshape", shape: []int64{2, 5}, wantErr: syscall.EINVAL}}, nil, 0, 80},
		{"close commits changed data", []step{{op: "write", off: 0, data: ints(7)}, {op: "close"}},
			ints(7, 1, 2, 3, 4, 5, 6, 7, 8, 9), 1, 80},
		{"close with the base's own bytes makes no version", []step{{op: "write", off: 8, data: ints(1, 2)}, {op: "close"}}, nil, 0, 80},
		{"fsync with the base's own bytes makes a version", []step{{op: "write", off: 8, data: ints(1, 2)}, {op: "fsync"}},
			ints(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), 1, 80},
		{"carries on from the version it made", []step{
			{op: "write", off: 0, data: ints(50)}, {op: "fsync"},
			{op: "write", off: 72, data: ints(59)}, {op: "fsync"},
		}, ints(50, 1, 2, 3, 4, 5, 6, 7, 8, 59), 2, 80},
		{"O_TRUNC then cp-style writes", []step{
			{op: "truncate", off: 0}, {op: "write", off: 0, data: ints(9, 8, 7)}, {op: "write", off: 24, data: ints(6, 5)}, {op: "close"},
		}, ints(9, 8, 7, 6, 5), 1, 40},
		{"O_TRUNC then a write that ends inside a row commits nothing", []step{
			{op: "truncate", off: 0}, {op: "write", off: 0, data: partial}, {op: "fsync", wantErr: syscall.EINVAL},
			{op: "close", wantErr: syscall.EINVAL},
		}, nil, 0, 16},
		{"a truncated handle's last row completed later commits", []step{
			{op: "truncate", off: 0}, {op: "write", off: 0, data: partial}, {op: "fsync", wantErr: syscall.EINVAL},
			{op: "write", off: 13, data: []byte{0, 0, 0}}, {op: "fsync"},
		}, ints(9, 5), 1, 16},
		{"a truncate to whole rows after a partial row commits", []step{
			{op: "truncate", off: 0}, {op: "write", off: 0, data: partial}, {op: "truncate", off: 8}, {op: "close"},
		}, ints(9), 1, 8},
		{"a truncated handle refuses a partial row after it committed", []step{
			{op: "truncate", off: 0}, {op: "write", off: 0, data: ints(9)}, {op: "fsync"},
			{op: "write", off: 8, data: []byte{1, 2, 3}}, {op: "fsync", wantErr: syscall.EINVAL},
		}, ints(9), 1, 16},
		{"untruncated, a write that ends inside a row past the end grows a whole row of fill", []step{
			{op: "write", off: 80, data: []byte{1, 2, 3}}, {op: "close"},
		}, append(ints(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), 1, 2, 3, 0xff, 0xff, 0xff, 0xff, 0xff), 1, 88},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := open(t)
			h, err := Open(e.c, base, "", ds)
			require.NoError(t, err)
			made := []string{}
			for i, s := range tt.steps {
				var err error
				switch s.op {
				case "write":
					_, err = h.WriteAt(s.data, s.off)
				case "truncate":
					err = h.Truncate(s.off)
				case "reshape":
					err = h.Reshape(s.shape)
				case "fsync", "close":
					var name string
					name, err = h.Commit(s.op == "fsync")
					if name != "" {
						made = append(made, name)
						require.Equal(t, name, h.Base(), "step %d: the handle carries on from its version", i)
					}
				}
				if s.wantErr != 0 {
					require.ErrorIs(t, err, s.wantErr, "step %d", i)
				} else {
					require.NoError(t, err, "step %d", i)
				}
			}
			require.Len(t, made, tt.versions)
			require.Equal(t, tt.finalSize, h.Size())
			if tt.versions == 0 {
				require.Equal(t, base, h.Base())
				return
			}
			last := made[len(made)-1]
			require.Equal(t, tt.want, e.read(t, last))
			v, ok, err := e.f.Version(last)
			require.NoError(t, err)
			require.True(t, ok)
			prev := base
			if len(made) > 1 {
				prev = made[len(made)-2]
			}
			require.Equal(t, prev, v.PrevVersion)
			require.Equal(t, ints(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), e.read(t, base), "the base version is unchanged")
		})
	}
}

// TestHandleSpills: under a store that spills every chunk, what a handle writes reads
// back and commits as written, and the store holds nothing once it is committed.
func TestHandleSpills(t *testing.T) {
	e := openWith(t, commit.Options{}) // a budget of 0: every staged chunk spills
	h, err := Open(e.c, base, "", ds)
	require.NoError(t, err)
	want := make([]byte, 0, 8*40)
	for i := range int64(40) {
		want = append(want, ints(1000+i)...)
	}
	for off := 0; off < len(want); off += 24 { // three elements a write: chunks complete across writes
		_, err := h.WriteAt(want[off:min(off+24, len(want))], int64(off))
		require.NoError(t, err)
	}
	got := make([]byte, len(want))
	_, err = h.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	name, err := h.Commit(true)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, e.read(t, name)))
	require.Zero(t, e.c.Store().Resident())
}

// TestSizeDuringCommit: Size answers while the handle's lock is held (by a commit).
func TestSizeDuringCommit(t *testing.T) {
	e := open(t)
	h, err := Open(e.c, base, "", ds)
	require.NoError(t, err)
	_, err = h.WriteAt(ints(1), 80)
	require.NoError(t, err)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, int64(88), h.Size())
}

// TestHandlesFollowHead: two handles opened on the current version of nested, on two
// datasets, make two versions in a chain, the second holding both changes; a handle
// opened on an older version still branches off the version it made last.
func TestHandlesFollowHead(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "nested.h5"))
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	c, err := commit.Open(f, commit.Options{StageMem: 64 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(); f.Close() })
	read := func(version, rel string) []byte {
		t.Helper()
		d, err := f.Dataset(versions.VersionsGroup + "/" + version + "/" + rel)
		require.NoError(t, err)
		b := make([]byte, d.Size())
		_, err = d.ReadAt(b, 0)
		require.NoError(t, err)
		return b
	}
	prev := func(version string) string {
		t.Helper()
		v, ok, err := f.Version(version)
		require.NoError(t, err)
		require.True(t, ok)
		return v.PrevVersion
	}
	const cur, old, level, phase, flags = "dropped", "added", "sensors/south/level", "phase", "sensors/north/flags"
	openWrite := func(version, rel string, b byte) (*Handle, []byte) {
		t.Helper()
		h, err := Open(c, version, "", rel)
		require.NoError(t, err)
		t.Cleanup(h.Close)
		want := read(version, rel)
		_, err = h.WriteAt([]byte{b, b, b, b}, 0)
		require.NoError(t, err)
		copy(want, []byte{b, b, b, b})
		return h, want
	}
	a, wantPhase := openWrite(cur, phase, 1)
	b, wantLevel := openWrite(cur, level, 2)
	// flags is the same in every version so far: only the open decides where o commits.
	o, wantOld := openWrite(old, flags, 1)

	va, err := a.Commit(false)
	require.NoError(t, err)
	require.Equal(t, cur, prev(va))
	vb, err := b.Commit(false)
	require.NoError(t, err)
	require.Equal(t, va, prev(vb), "b goes on top of a's version")
	require.Equal(t, vb, b.Base())
	require.Equal(t, wantPhase, read(vb, phase))
	require.Equal(t, wantLevel, read(vb, level))

	vo, err := o.Commit(false)
	require.NoError(t, err)
	require.Equal(t, old, prev(vo), "a handle opened on an older version branches off it")
	require.Equal(t, wantOld, read(vo, flags))
	require.Equal(t, read(old, phase), read(vo, phase))
	require.Equal(t, read(old, level), read(vo, level))
	require.Equal(t, read(old, "top"), read(vo, "top"))

	// The older version's line stays its own: its next commit goes on top of vo although
	// another handle moves the head in between.
	n, _ := openWrite(vo, phase, 4)
	vn, err := n.Commit(true)
	require.NoError(t, err)
	require.Equal(t, vo, prev(vn))
	_, err = o.WriteAt([]byte{0}, 0)
	require.NoError(t, err)
	vo2, err := o.Commit(true)
	require.NoError(t, err)
	require.Equal(t, vo, prev(vo2))
}

// TestPartialRowRefused: over grid_2d_gzip's temp ([50, 37] float64: rows of 296 bytes), a
// handle that truncated commits only content that ends at a row's end; a refusal names
// the size and the row size, and the file keeps its versions.
func TestPartialRowRefused(t *testing.T) {
	tests := []struct {
		name    string
		size    int // bytes written after the truncation to 0
		refused bool
		rows    int64 // axis 0 of the version made
	}{
		{"1001 bytes end inside the fourth row", 1001, true, 0},
		{"one byte", 1, true, 0},
		{"three whole rows", 3 * 296, false, 3},
		{"nothing: an empty dataset", 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := fixture.Copy(t, filepath.Join(fixture.Dir(), "grid_2d_gzip.h5"))
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			c, err := commit.Open(f, commit.Options{StageMem: 64 << 20})
			require.NoError(t, err)
			t.Cleanup(func() { c.Close(); f.Close() })
			before, err := f.Versions()
			require.NoError(t, err)
			h, err := Open(c, "r5", "", "temp")
			require.NoError(t, err)
			defer h.Close()
			require.NoError(t, h.Truncate(0))
			_, err = h.WriteAt(bytes.Repeat([]byte{0x3f}, tt.size), 0)
			require.NoError(t, err)
			name, err := h.Commit(true)
			if tt.refused {
				require.ErrorIs(t, err, syscall.EINVAL)
				var pr *PartialRowError
				require.ErrorAs(t, err, &pr)
				require.Equal(t, PartialRowError{Size: int64(tt.size), Row: 296}, *pr)
				require.ErrorContains(t, err, "r5/temp: ")
				require.Empty(t, name)
				after, err := f.Versions()
				require.NoError(t, err)
				require.Equal(t, before, after, "nothing committed")
				cur, err := f.CurrentVersion()
				require.NoError(t, err)
				require.Equal(t, "r5", cur)
				return
			}
			require.NoError(t, err)
			d, err := f.Dataset(versions.VersionsGroup + "/" + name + "/temp")
			require.NoError(t, err)
			require.Equal(t, []int64{tt.rows, 37}, d.Shape)
		})
	}
}
