package fsnode

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
)

// These tests drive the node tree the way the kernel does (Lookup, Open, Read, Write,
// Setattr, Flush, Fsync, Release), without a kernel or root: the tree is attached to
// go-fuse's bridge (fs.NewNodeFS) but never mounted. tests/ proves the same behaviours
// through real mounts.

// engine is a mount's node tree over a file, without a kernel.
type engine struct {
	m      *mount
	root   *rootNode
	closed bool
}

// newEngine opens file (read-write if rw) and builds its node tree as Mount does.
func newEngine(t *testing.T, file string, rw bool) *engine {
	t.Helper()
	open := versions.Open
	if rw {
		open = versions.OpenRW
	}
	f, err := open(file)
	require.NoError(t, err)
	eng := Engines{File: f}
	if rw {
		eng.Commit, err = commit.Open(f, commit.Options{StageMem: mountopts.DefaultStageMem})
		require.NoError(t, err)
		eng.Stages, err = stage.Open(eng.Commit)
		require.NoError(t, err)
	}
	m, err := newMount(eng, mountopts.Config{ReadWrite: rw})
	require.NoError(t, err)
	root := &rootNode{m: m, frozenDir: frozenDir{m, "/"}}
	fs.NewNodeFS(root, &fs.Options{}) // gives the tree its bridge (no server: no kernel)
	e := &engine{m: m, root: root}
	t.Cleanup(func() { e.close(t) })
	return e
}

// close ends the engine as an unmount does (stages saved, the file closed), once.
func (e *engine) close(t *testing.T) {
	t.Helper()
	if e.closed {
		return
	}
	e.closed = true
	if e.m.stages != nil {
		require.NoError(t, e.m.stages.Close())
	}
	if e.m.commit != nil {
		e.m.commit.Close()
	}
	require.NoError(t, e.m.file.Close())
}

// dataset looks up the dataset file at path ("versions/v4/x") name by name.
func (e *engine) dataset(t *testing.T, path string) *datasetNode {
	t.Helper()
	n, ok := walk(t, e.root, path).(*datasetNode)
	require.True(t, ok, "%s is not a dataset file", path)
	return n
}

// walk looks up path ("a/b/c"; "" is dir itself) below dir name by name, as the kernel's
// LOOKUPs do, and returns its node.
func walk(t *testing.T, dir fs.InodeEmbedder, path string) fs.InodeEmbedder {
	t.Helper()
	if path == "" {
		return dir
	}
	cur := dir
	for _, name := range strings.Split(path, "/") {
		lk, ok := cur.(fs.NodeLookuper)
		require.True(t, ok, "%s: no lookup before %s", path, name)
		var out fuse.EntryOut
		child, errno := lk.Lookup(context.Background(), name, &out)
		require.Zero(t, errno, "lookup %s in %s", name, path)
		cur = child.Operations()
	}
	return cur
}

func (e *engine) current(t *testing.T) string {
	t.Helper()
	cur, err := e.m.file.CurrentVersion()
	require.NoError(t, err)
	return cur
}

// read reads n bytes at off through the node, as the kernel's READ does, and returns the
// reply's bytes (whatever kind of reply the read made).
func read(t *testing.T, n *datasetNode, fh fs.FileHandle, off int64, size int) []byte {
	t.Helper()
	res, errno := n.Read(context.Background(), fh, make([]byte, size), off)
	require.Zero(t, errno, "read %d at %d", size, off)
	defer res.Done()
	b, st := res.Bytes(make([]byte, max(size, res.Size())))
	require.True(t, st.Ok(), "reply bytes: %v", st)
	return append([]byte{}, b...)
}

func ints(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func raw(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// TestReadOffsets: reads at odd offsets, across chunks, at and past the end give exactly
// the dataset's bytes there (none past the end), by every route a read can take: located
// in the file or mapped (unfiltered chunks), cached decoded chunks (gzip), libhdf5's copy
// and text (variable-length strings).
func TestReadOffsets(t *testing.T) {
	for _, tc := range []struct {
		file, path string
	}{
		{"basic_1d.h5", "versions/v4/x"},
		{"basic_1d.h5", "versions/v2/x"},
		{"grid_2d_gzip.h5", "versions/r5/temp"},
		{"strings.h5", "versions/s1/names"},
	} {
		t.Run(tc.file+"/"+tc.path, func(t *testing.T) {
			e := newEngine(t, filepath.Join(fixture.Dir(), tc.file), false)
			n := e.dataset(t, tc.path)
			d, err := e.m.file.Dataset(n.path)
			require.NoError(t, err)
			size := d.Size()
			want := make([]byte, size)
			got, err := d.ReadAt(want, 0)
			require.NoError(t, err)
			require.EqualValues(t, size, got)
			var attr fuse.AttrOut
			require.Zero(t, n.Getattr(context.Background(), nil, &attr))
			require.EqualValues(t, size, attr.Size)
			for _, off := range []int64{0, 1, 7, 13, size/2 + 3, size - 1, size, size + 4096} {
				for _, len := range []int{1, 5, 4096, 1 << 20} {
					b := read(t, n, nil, off, len)
					lo, hi := min(off, size), min(off+int64(len), size)
					require.Equal(t, want[lo:hi], b, "%d bytes at %d of %d", len, off, size)
				}
			}
		})
	}
}

// TestHandles: a write handle reads its own writes, grows the dataset when written past
// the end, commits on fsync or at the close after a write, commits a truncate by path at
// once, and commits at release what only O_TRUNC changed; the version it was opened on
// never changes.
func TestHandles(t *testing.T) {
	base := []int64{0, 1, 2, 3, 40, 555} // basic_1d's v4: int64, chunks of 4, fill -1
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// run drives the handles and returns the content the new current version must
		// have (nil: no new version).
		run func(t *testing.T, e *engine, n *datasetNode) []int64
	}{
		{"unaligned write, read back, fsync commits", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			fh, _, errno := n.Open(ctx, syscall.O_RDWR)
			require.Zero(t, errno)
			w, errno := n.Write(ctx, fh, []byte{0xff, 0xff, 0xff}, 13) // the top bytes of element 1
			require.Zero(t, errno)
			require.EqualValues(t, 3, w)
			want := append([]int64(nil), base...)
			want[1] = int64(binary.LittleEndian.Uint64(append(raw(1)[:5], 0xff, 0xff, 0xff)))
			require.Equal(t, want, ints(read(t, n, fh, 0, 48)), "read-your-writes")
			require.Equal(t, base, ints(read(t, n, nil, 0, 48)), "other readers see the version")
			require.Equal(t, "v4", e.current(t), "nothing committed before fsync")
			require.Zero(t, n.Fsync(ctx, fh, 0))
			require.Zero(t, n.Release(ctx, fh))
			return want
		}},
		{"write past the end grows with fill, close commits", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			fh, _, errno := n.Open(ctx, syscall.O_RDWR)
			require.Zero(t, errno)
			_, errno = n.Write(ctx, fh, raw(77), 8*9)
			require.Zero(t, errno)
			var attr fuse.AttrOut
			require.Zero(t, n.Getattr(ctx, nil, &attr), "fstat names no handle")
			require.EqualValues(t, 80, attr.Size, "the size of the handle written last")
			require.Zero(t, n.Flush(ctx, fh))
			require.NotEqual(t, "v4", e.current(t), "the close after a write commits")
			require.Zero(t, n.Release(ctx, fh))
			return append(append([]int64(nil), base...), -1, -1, -1, 77)
		}},
		{"truncate by path: whole rows only, commits at once", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			var out fuse.AttrOut
			require.Equal(t, syscall.EINVAL, n.Setattr(ctx, nil, sizeIn(20), &out))
			require.Equal(t, "v4", e.current(t))
			require.Zero(t, n.Setattr(ctx, nil, sizeIn(24), &out))
			require.EqualValues(t, 24, out.Size)
			return base[:3]
		}},
		{"ftruncate commits at release, not at close", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			fh, _, errno := n.Open(ctx, syscall.O_RDWR)
			require.Zero(t, errno)
			var out fuse.AttrOut
			require.Zero(t, n.Setattr(ctx, fh, sizeIn(8*8), &out))
			require.EqualValues(t, 64, out.Size)
			require.Zero(t, n.Flush(ctx, fh))
			require.Equal(t, "v4", e.current(t), "close does not commit a truncate alone")
			require.Zero(t, n.Release(ctx, fh))
			return append(append([]int64(nil), base...), -1, -1)
		}},
		{"O_TRUNC, written, closed: replaces the content", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			fh, _, errno := n.Open(ctx, syscall.O_WRONLY|syscall.O_TRUNC)
			require.Zero(t, errno)
			require.Empty(t, read(t, n, fh, 0, 48))
			_, errno = n.Write(ctx, fh, raw(1, 2), 0)
			require.Zero(t, errno)
			require.Zero(t, n.Flush(ctx, fh))
			require.Zero(t, n.Release(ctx, fh))
			return []int64{1, 2}
		}},
		{"O_TRUNC, a partial row: EINVAL at fsync and close, nothing committed or kept", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			fh, _, errno := n.Open(ctx, syscall.O_WRONLY|syscall.O_TRUNC)
			require.Zero(t, errno)
			_, errno = n.Write(ctx, fh, append(raw(1), 2, 0, 0), 0) // 11 bytes: rows of 8
			require.Zero(t, errno)
			require.Equal(t, syscall.EINVAL, n.Fsync(ctx, fh, 0))
			require.Equal(t, syscall.EINVAL, n.Flush(ctx, fh))
			require.Zero(t, n.Release(ctx, fh))
			require.Empty(t, e.m.stages.Names(), "no stage keeps content no commit could take")
			return nil
		}},
		{"opened for writing, never written: no commit", func(t *testing.T, e *engine, n *datasetNode) []int64 {
			fh, _, errno := n.Open(ctx, syscall.O_RDWR)
			require.Zero(t, errno)
			require.Equal(t, base, ints(read(t, n, fh, 0, 4096)))
			require.Zero(t, n.Flush(ctx, fh))
			require.Zero(t, n.Fsync(ctx, fh, 0))
			require.Zero(t, n.Release(ctx, fh))
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5")), true)
			n := e.dataset(t, "versions/v4/x")
			want := tc.run(t, e, n)
			cur := e.current(t)
			if want == nil {
				require.Equal(t, "v4", cur)
				return
			}
			require.NotEqual(t, "v4", cur, "a new version is current")
			v, ok, err := e.m.file.Version(cur)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, "v4", v.PrevVersion)
			require.Equal(t, want, ints(read(t, e.dataset(t, "versions/"+cur+"/x"), nil, 0, 4096)))
			require.Equal(t, base, ints(read(t, e.dataset(t, "versions/v4/x"), nil, 0, 4096)), "v4 never changes")
		})
	}
}

func sizeIn(size uint64) *fuse.SetAttrIn {
	in := &fuse.SetAttrIn{}
	in.Valid = fuse.FATTR_SIZE
	in.Size = size
	return in
}

// TestHandleErrnos: what the handles refuse, and with which errno.
func TestHandleErrnos(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		file string
		rw   bool
		path string
		op   func(n *datasetNode) syscall.Errno
		want syscall.Errno
	}{
		{"open for writing, read-only mount", "basic_1d.h5", false, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			_, _, errno := n.Open(ctx, syscall.O_RDWR)
			return errno
		}, syscall.EROFS},
		{"truncate, read-only mount", "basic_1d.h5", false, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			return n.Setattr(ctx, nil, sizeIn(8), &fuse.AttrOut{})
		}, syscall.EROFS},
		{"write without a write handle", "basic_1d.h5", true, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			_, errno := n.Write(ctx, nil, raw(1), 0)
			return errno
		}, syscall.EBADF},
		{"chmod", "basic_1d.h5", true, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			in := &fuse.SetAttrIn{}
			in.Valid = fuse.FATTR_MODE
			in.Mode = 0o600
			return n.Setattr(ctx, nil, in, &fuse.AttrOut{})
		}, syscall.EROFS},
		{"truncate to part of a row", "basic_1d.h5", true, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			return n.Setattr(ctx, nil, sizeIn(20), &fuse.AttrOut{})
		}, syscall.EINVAL},
		{"set the shape of strings", "strings.h5", true, "versions/s1/names", func(n *datasetNode) syscall.Errno {
			return n.Setxattr(ctx, "user.vh5fs.shape", []byte("[2]"), 0)
		}, syscall.EINVAL},
		{"set the dtype xattr", "basic_1d.h5", true, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			return n.Setxattr(ctx, "user.vh5fs.dtype", []byte("<f4"), 0)
		}, syscall.EPERM},
		{"set a shape of another rank", "basic_1d.h5", true, "versions/v4/x", func(n *datasetNode) syscall.Errno {
			return n.Setxattr(ctx, "user.vh5fs.shape", []byte("[1,2]"), 0)
		}, syscall.EINVAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(fixture.Dir(), tc.file)
			if tc.rw {
				file = fixture.Copy(t, file)
			}
			e := newEngine(t, file, tc.rw)
			n := e.dataset(t, tc.path)
			before := e.current(t)
			require.Equal(t, tc.want, tc.op(n))
			require.Equal(t, before, e.current(t), "nothing committed")
		})
	}
}

// TestXattrErrnos: getxattr and listxattr answer as the kernel expects: the value, ERANGE
// with the size needed when the buffer is short, ENODATA for a name the node lacks or in
// another namespace.
func TestXattrErrnos(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, filepath.Join(fixture.Dir(), "basic_1d.h5"), false)
	n := e.dataset(t, "versions/v4/x")
	for _, tc := range []struct {
		name  string
		attr  string
		dest  int
		want  syscall.Errno
		value string
	}{
		{"value", "user.vh5fs.dtype", 64, 0, "<i8"},
		{"short buffer", "user.vh5fs.dtype", 1, syscall.ERANGE, ""},
		{"missing", "user.vh5fs.nope", 64, syscall.ENODATA, ""},
		{"other namespace", "security.selinux", 64, syscall.ENODATA, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := make([]byte, tc.dest)
			sz, errno := n.Getxattr(ctx, tc.attr, dest)
			require.Equal(t, tc.want, errno)
			if tc.want == syscall.ERANGE {
				require.EqualValues(t, 3, sz, "the size needed")
			}
			if tc.value != "" {
				require.Equal(t, tc.value, string(dest[:sz]))
			}
		})
	}
	size, errno := n.Listxattr(ctx, nil)
	require.Equal(t, syscall.ERANGE, errno)
	list := make([]byte, size)
	_, errno = n.Listxattr(ctx, list)
	require.Zero(t, errno)
	require.Contains(t, strings.Split(string(list), "\x00"), "user.vh5fs.chunkmap")
}
