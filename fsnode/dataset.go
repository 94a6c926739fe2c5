package fsnode

import (
	"context"
	"encoding/json"
	"log/slog"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// datasetNode is a dataset's file.
type datasetNode struct {
	fs.Inode
	m         *mount
	path      string
	immutable bool // inside a committed version
	mtime     time.Time
	// latest is the write handle opened or changed last, whose size stat reports. fstat
	// sends no handle (the kernel never does), and go-fuse then hands Getattr the node's
	// first open one, which can be a closed descriptor's handle whose release is still
	// on its way.
	latest atomic.Pointer[writeHandle]
}

func (n *datasetNode) dataset() (*versions.Dataset, syscall.Errno) {
	d, err := n.m.file.Dataset(n.path)
	if err != nil {
		return nil, errno(err)
	}
	return d, 0
}

// maxSplice bounds fd-backed read replies: header and data must fit one pipe (1 MiB).
const maxSplice = 1<<20 - 64<<10

// writable reports whether this file takes writes: a versioned dataset of fixed-size
// elements in a read-write mount.
func (n *datasetNode) writable(d *versions.Dataset) bool {
	return n.m.commit != nil && n.immutable && d.Stageable()
}

// versionAndRel splits the node's HDF5 path into its version and the dataset's path
// inside the version.
func (n *datasetNode) versionAndRel() (version, rel string) {
	rest := strings.TrimPrefix(n.path, versions.VersionsGroup+"/")
	version, rel, _ = strings.Cut(rest, "/")
	return version, rel
}

func (n *datasetNode) fill(a *fuse.Attr, h *writeHandle) syscall.Errno {
	d, errn := n.dataset()
	if errn != 0 {
		return errn
	}
	a.Mode = fuse.S_IFREG | n.m.perm(0o444)
	if n.writable(d) {
		a.Mode = fuse.S_IFREG | n.m.perm(0o644)
	}
	a.Nlink = 1
	a.Size = uint64(d.Size())
	if h != nil {
		a.Size = uint64(h.size())
	}
	a.Blocks = (a.Size + 511) / 512
	setTime(a, n.mtime)
	if n.live() {
		setTime(a, fileMtime(n.m.file.Path())) // the writer's last write
	}
	return 0
}

// live: a dataset of the plain tree in a live mount, which follows its writer.
func (n *datasetNode) live() bool { return n.m.live && !n.immutable }

// attrTimeout: in read-write mounts a writer's handle changes the size it sees, and the
// kernel keeps one size per inode, so every stat asks vh5fs.
func (n *datasetNode) attrTimeout() time.Duration {
	if n.m.commit != nil {
		return 0
	}
	return n.m.timeoutFor(n.immutable)
}

var _ fs.NodeGetattrer = (*datasetNode)(nil)

func (n *datasetNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer n.m.hold()()
	out.SetTimeout(n.attrTimeout())
	h, _ := fh.(*writeHandle)
	if l := n.latest.Load(); l != nil {
		h = l
	}
	return n.fill(&out.Attr, h)
}

var _ fs.NodeOpener = (*datasetNode)(nil)

// Open: read-only mounts let the kernel keep the page cache of committed versions across
// opens. Read-write mounts open every version's file with FOPEN_DIRECT_IO: each handle
// reads and writes through vh5fs, never through pages another handle could have changed,
// which is what keeps versions immutable for everyone but the writer. mmap still works
// (DIRECT_IO_ALLOW_MMAP); mapped pages are dropped after each commit.
func (n *datasetNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	defer n.m.hold()()
	d, errn := n.dataset()
	if errn != 0 {
		return nil, 0, errn
	}
	write := flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0
	var fuseFlags uint32
	switch {
	case n.m.commit == nil && n.immutable:
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	case n.immutable, n.live():
		fuseFlags |= fuse.FOPEN_DIRECT_IO // live: every read asks vh5fs, which refreshes
	}
	if !write {
		return nil, fuseFlags, 0
	}
	switch {
	case n.m.commit == nil || !n.immutable:
		return nil, 0, syscall.EROFS
	case !n.writable(d):
		return nil, 0, syscall.EACCES // variable-length strings are served read-only
	}
	h, err := n.newWriteHandle(d)
	if err != nil {
		return nil, 0, errno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		if errn := h.truncate(0); errn != 0 {
			return nil, 0, errn
		}
	}
	n.latest.Store(h)
	return h, fuseFlags, 0
}

var _ fs.NodeReader = (*datasetNode)(nil)

// bytesResult is the reply to a read of the bytes b. go-fuse first tries to splice every
// fuse.ReadResultData reply, which for bytes in memory costs three system calls for
// nothing (and logs an error for replies of nearly 1 MiB); a vector of one slice goes
// straight to writev.
func bytesResult(b []byte) fuse.ReadResult { return fuse.ReadResultVector([][]byte{b}) }

func (n *datasetNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h, ok := fh.(*writeHandle); ok {
		nr, err := h.readAt(dest, off)
		if err != nil {
			return nil, errno(err)
		}
		return bytesResult(dest[:nr]), 0
	}
	defer n.m.hold()()
	if n.live() {
		nr, err := n.m.file.LiveReadAt(n.path, dest, off)
		if err != nil {
			return nil, errno(err)
		}
		return bytesResult(dest[:nr]), 0
	}
	d, errn := n.dataset()
	if errn != 0 {
		return nil, errn
	}
	// Decoded chunks go out as they are cached (writev), when the read is whole pieces of
	// them.
	if vec, ok, err := d.ReadSlices(off, len(dest)); err != nil {
		return nil, errno(err)
	} else if ok {
		return fuse.ReadResultVector(vec), 0
	}
	// Unfiltered bytes go straight from the file: spliced when they sit contiguously in it
	// (a pipe of the default maximum size carries up to a little under 1 MiB), else
	// written from its mapping.
	r, err := d.ReadOrLocate(dest, off, maxSplice)
	switch {
	case err != nil:
		return nil, errno(err)
	case r.Located:
		return fuse.ReadResultFd(n.m.file.Fd(), r.FileOff, r.N), 0
	case r.Vec != nil:
		return mappedResult{r}, 0
	}
	return bytesResult(dest[:r.N]), 0
}

// mappedResult is a reply written (writev) from slices of the HDF5 file's mapping; it
// holds the Reply, which keeps them mapped, until go-fuse has written them.
type mappedResult struct{ r versions.Reply }

// Slices makes go-fuse write the reply with writev, straight from the mapping.
func (m mappedResult) Slices() ([][]byte, fuse.Status) { return m.r.Vec, fuse.OK }

func (m mappedResult) Size() int { return m.r.N }

// Done hands the written slices back (Reply.Release unmaps their pages in batches).
func (m mappedResult) Done() { m.r.Release() }

// Bytes copies the slices (go-fuse asks only when it cannot write slices); a page the
// file lost since it was mapped is EIO, not a crash.
func (m mappedResult) Bytes(buf []byte) (out []byte, st fuse.Status) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			out, st = nil, fuse.EIO
		}
	}()
	buf = buf[:0]
	for _, v := range m.r.Vec {
		buf = append(buf, v...)
	}
	return buf, fuse.OK
}

var _ fs.NodeWriter = (*datasetNode)(nil)

func (n *datasetNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(*writeHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	n.latest.Store(h)
	return h.writeAt(data, off)
}

var _ fs.NodeSetattrer = (*datasetNode)(nil)

// Setattr: truncate/ftruncate resize axis 0 (EINVAL unless the size is a whole number of
// rows). A truncate by path has no handle to commit later, so it commits at once. Other
// attribute changes (mode, times) are accepted and ignored in read-write mounts.
func (n *datasetNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.m.commit == nil || !n.immutable {
		return syscall.EROFS
	}
	h, _ := fh.(*writeHandle)
	if size, ok := in.GetSize(); ok {
		d, errn := n.dataset()
		if errn != 0 {
			return errn
		}
		if !n.writable(d) {
			return syscall.EACCES
		}
		oneShot := h == nil
		if oneShot {
			var err error
			if h, err = n.newWriteHandle(d); err != nil {
				return errno(err)
			}
		} else {
			n.latest.Store(h)
		}
		if errn := h.truncate(int64(size)); errn != 0 {
			return errn
		}
		if oneShot {
			if errn := h.commit(true); errn != 0 {
				return errn
			}
		}
	}
	out.SetTimeout(n.attrTimeout())
	return n.fill(&out.Attr, h)
}

var _ fs.NodeFlusher = (*datasetNode)(nil)

// Flush runs on every close(2) of a descriptor: a handle that was written to commits here,
// so close returns the commit's error and no write is silently lost. A handle changed only
// by O_TRUNC or ftruncate commits at fsync or at release (the last close): a shell's
// `> file` closes a duplicate descriptor right after the O_TRUNC open, and that must not
// commit an empty version.
func (n *datasetNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(*writeHandle); ok && h.written() {
		return h.commit(false)
	}
	return 0
}

var _ fs.NodeFsyncer = (*datasetNode)(nil)

// Fsync commits the handle's changes as a new version and returns once it is durable.
func (n *datasetNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := fh.(*writeHandle); ok {
		return h.commit(true)
	}
	return 0
}

var _ fs.NodeReleaser = (*datasetNode)(nil)

func (n *datasetNode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(*writeHandle); ok {
		n.latest.CompareAndSwap(h, nil)
		if errn := h.commit(false); errn != 0 {
			slog.Error("changes lost: commit at release failed", "dataset", n.path)
		}
	}
	return 0
}

// setShape resizes the dataset to the JSON shape in value and commits at once (the shape
// xattr of read-write mounts).
func (n *datasetNode) setShape(value []byte) syscall.Errno {
	d, errn := n.dataset()
	if errn != 0 {
		return errn
	}
	if !n.writable(d) {
		return syscall.EROFS
	}
	var shape []int64
	if err := json.Unmarshal(value, &shape); err != nil || len(shape) != len(d.Shape) {
		return syscall.EINVAL
	}
	for _, s := range shape {
		if s < 0 {
			return syscall.EINVAL
		}
	}
	h, err := n.newWriteHandle(d)
	if err != nil {
		return errno(err)
	}
	h.mu.Lock()
	err = h.arr.Resize(shape, h.src)
	h.sz.Store(h.arr.Size())
	h.mu.Unlock()
	if err != nil {
		return errno(err)
	}
	return h.commit(true)
}

// writeHandle is one open-for-writing of a version's dataset file. It owns a
// StagedChangesArray based on that version; commits turn it into new versions and the
// handle carries on from the version it made.
//
// Lock ordering: writeHandle.mu, then commit.Committer's, then versions.File's, then the
// HDF5 lock.
type writeHandle struct {
	n   *datasetNode
	rel string // the dataset's path inside its version

	mu    sync.Mutex
	base  string        // the version the staged changes apply to; GUARDED_BY(mu)
	arr   *staged.Array // GUARDED_BY(mu)
	wrote bool          // write(2) since the last commit; GUARDED_BY(mu)
	src   staged.ChunkSource
	// sz is arr.Size(), stored after each change under mu: stat reads it without waiting
	// for mu, which a commit holds for as long as it runs.
	sz atomic.Int64
}

func (n *datasetNode) newWriteHandle(d *versions.Dataset) (*writeHandle, error) {
	arr, err := d.NewStaged()
	if err != nil {
		return nil, err
	}
	if n.m.stage != nil {
		arr.UseStore(n.m.stage)
	}
	version, rel := n.versionAndRel()
	h := &writeHandle{n: n, rel: rel, base: version, arr: arr, src: d.ChunkSource()}
	h.sz.Store(arr.Size())
	return h, nil
}

func (h *writeHandle) written() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wrote
}

func (h *writeHandle) size() int64 { return h.sz.Load() }

func (h *writeHandle) readAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.arr.ReadAt(p, off, h.src)
}

// rowBytes is the size of one row along axis 0; 0 if a later axis has length 0.
func rowBytes(arr *staged.Array) int64 {
	r := int64(arr.ItemSize())
	for _, s := range arr.Shape()[1:] {
		r *= s
	}
	return r
}

// writeAt writes data at off; writing past the end grows axis 0 first (rows not written
// read as the fill value).
func (h *writeHandle) writeAt(data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := off + int64(len(data))
	if off < 0 {
		return 0, syscall.EINVAL
	}
	if end > h.arr.Size() {
		row := rowBytes(h.arr)
		if row == 0 {
			return 0, syscall.EFBIG
		}
		shape := h.arr.Shape()
		shape[0] = (end + row - 1) / row
		err := h.arr.Resize(shape, h.src)
		h.sz.Store(h.arr.Size())
		if err != nil {
			return 0, h.writeFailed(err, off, len(data))
		}
	}
	if _, err := h.arr.WriteAt(data, off, h.src); err != nil {
		return 0, h.writeFailed(err, off, len(data))
	}
	h.wrote = true
	return uint32(len(data)), 0
}

// writeFailed logs a write the engine refused (a spill file on a full disk, say: the
// write fails, what was staged before stays) and maps its error.
func (h *writeHandle) writeFailed(err error, off int64, n int) syscall.Errno {
	en := errno(err)
	slog.Error("write failed", "dataset", path.Join(h.base, h.rel), "off", off, "len", n, "errno", en, "err", err)
	return en
}

// truncate resizes axis 0 to size bytes, which must be a whole number of rows.
func (h *writeHandle) truncate(size int64) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	row := rowBytes(h.arr)
	if size < 0 || (row == 0 && size != 0) || (row > 0 && size%row != 0) {
		return syscall.EINVAL
	}
	shape := h.arr.Shape()
	if row > 0 {
		shape[0] = size / row
	}
	err := h.arr.Resize(shape, h.src)
	h.sz.Store(h.arr.Size())
	if err != nil {
		return errno(err)
	}
	return 0
}

// commit commits the handle's changes, if any, as a new version on top of its base; the
// handle then continues from the new version. explicit is fsync's request: it commits
// whatever was written. Close and release commit only data that differs from the base, so
// that a write-back of unchanged pages (mmap) makes no empty version.
func (h *writeHandle) commit(explicit bool) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.arr.Dirty() {
		return 0
	}
	res, err := h.n.m.commit.Commit(commit.Change{Base: h.base, Dataset: h.rel, Array: h.arr, SkipUnchanged: !explicit})
	if err != nil {
		slog.Error("commit failed", "dataset", path.Join(h.base, h.rel), "err", err)
		return syscall.EIO
	}
	h.wrote = false
	if res.Skipped {
		return 0
	}
	h.base = res.Name
	// Pages an mmap put in the kernel's cache belong to this inode, i.e. to the old
	// version: drop them (asynchronously: the kernel may hold locks on our behalf now).
	go h.n.NotifyContent(0, 0)
	return 0
}
