package fsnode

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/chunkstore"
	"github.com/vh5fs/vh5fs/decoded"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/writefile"
)

// datasetNode is a dataset's file outside stages: in versions/ and in the plain tree.
type datasetNode struct {
	fileNode
	m         *mount
	path      string
	immutable bool   // inside a committed version
	branch    string // reached through branches/NAME/: writes commit on that branch
	mtime     time.Time
	// latest is the write handle opened or changed last, whose size stat reports. fstat
	// sends no handle (the kernel never does), and go-fuse then hands Getattr the node's
	// first open one, which can be a closed descriptor's handle whose release is still
	// on its way.
	latest atomic.Pointer[writeHandle]
	hot    hotState // the decoded cache's view of the file (committed versions, -o cache)
}

func (n *datasetNode) dataset() (*versions.Dataset, syscall.Errno) {
	d, err := n.m.file.Dataset(n.path)
	if err != nil {
		return nil, n.m.staleOr(n.path, n.immutable, errno(err))
	}
	return d, 0
}

// maxSplice bounds fd-backed read replies: header and data must fit one pipe (1 MiB).
const maxSplice = 1<<20 - 64<<10

// writable reports whether this file takes writes: a versioned dataset in a read-write
// mount, of fixed-size elements or of variable-length strings (written as its text).
func (n *datasetNode) writable(d *versions.Dataset) bool {
	return n.m.commit != nil && n.immutable && (d.Stageable() || d.TextWritable())
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
	size, mtime := d.Size(), n.mtime
	if h != nil {
		size = h.Size()
	}
	if n.live() {
		mtime = fileMtime(n.m.file.Path()) // the writer's last write
	}
	n.m.fileAttr(a, size, n.writable(d), mtime)
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
	var fuseFlags uint32
	switch {
	case n.m.commit == nil && n.immutable:
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	case n.immutable, n.live():
		fuseFlags |= fuse.FOPEN_DIRECT_IO // live: every read asks vh5fs, which refreshes
	}
	if !opensForWriting(flags) {
		if n.cacheable() {
			return n.openRead(d, fuseFlags)
		}
		return nil, fuseFlags, 0
	}
	switch {
	case n.m.commit == nil || !n.immutable:
		return nil, 0, syscall.EROFS
	case !n.writable(d):
		return nil, 0, syscall.EACCES // datasets vh5fs reads through libhdf5 alone
	}
	h, err := n.newWriteHandle()
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

func (n *datasetNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	switch h := fh.(type) {
	case *writeHandle:
		r, err := readFrom(h, dest, off) // its own view: the base with its staged changes
		return r, errno(err)
	case *hotHandle:
		return n.readHot(h, dest, off)
	}
	n.hot.reads.Add(1)
	defer n.m.hold()()
	if _, ok := fh.(*coldHandle); ok {
		defer n.fillAtEnd(off, len(dest))
	}
	// One read, one reply: bytes copied into dest (strings, libhdf5's reads, live
	// datasets), a range of the file to splice (a pipe of the default maximum size carries
	// up to a little under 1 MiB), slices of the file's mapping, or slices of cached decoded
	// chunks; the last two go out with writev.
	r, err := n.m.file.Read(n.path, dest, off, maxSplice)
	switch {
	case err != nil:
		return nil, errno(err)
	case r.Located:
		return fuse.ReadResultFd(r.Fd, r.FileOff, r.N), 0
	case r.Mapped():
		return mappedResult{r}, 0
	case r.Vec != nil:
		return fuse.ReadResultVector(r.Vec), 0
	}
	return bytesResult(dest[:r.N]), 0
}

// mappedResult is a reply written (writev) from slices of the HDF5 file's mapping; it
// holds the Reply, which keeps them mapped, until go-fuse has written them.
type mappedResult struct{ r chunkstore.Reply }

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

var _ fs.NodeSetattrer = (*datasetNode)(nil)

// Setattr: truncate/ftruncate resize axis 0 (EINVAL unless the size is a whole number of
// rows). A truncate by path has no handle to commit later, so it commits at once. A mode or
// owner cannot change (EPERM); times come along with truncations and are left to the
// version's timestamp, but a change of times alone (touch) is refused too.
func (n *datasetNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.m.commit == nil || !n.immutable {
		return syscall.EROFS
	}
	_, mode := in.GetMode()
	_, uid := in.GetUID()
	_, gid := in.GetGID()
	size, ok := in.GetSize()
	if mode || uid || gid || !ok {
		return n.m.refuse("setattr", n.path)
	}
	h, _ := fh.(*writeHandle)
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
		if h, err = n.newWriteHandle(); err != nil {
			return errno(err)
		}
		defer h.Close()
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
	out.SetTimeout(n.attrTimeout())
	return n.fill(&out.Attr, h)
}

// rescue keeps the changes of a handle whose commit failed at its last close in a stage
// (stage.Manager.Rescue), which a later mount commits; they are lost only if that fails
// too.
func (n *datasetNode) rescue(h *writeHandle) {
	version, rel := n.versionAndRel()
	if n.m.stages == nil {
		slog.Error("changes lost: commit at release failed", "dataset", n.path)
		return
	}
	name, err := n.m.stages.Rescue(h.Base(), h.Branch(), rel, &h.Handle.File)
	if err != nil {
		slog.Error("changes lost: commit at release failed, and keeping them in a stage failed too", "dataset", n.path, "err", err)
		return
	}
	slog.Error("commit at release failed: the changes are kept in a stage; mount again and commit it with mv",
		"dataset", n.path, "opened_on", version, "stage", "stage/"+name, "base", h.Base())
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
	shape, err := parseShape(value)
	if err != nil || len(shape) != len(d.Shape) {
		return syscall.EINVAL
	}
	for _, s := range shape {
		if s < 0 {
			return syscall.EINVAL
		}
	}
	h, err := n.newWriteHandle()
	if err != nil {
		return errno(err)
	}
	defer h.Close()
	if err := h.Reshape(shape); err != nil {
		return errno(err)
	}
	return h.commit(true)
}

// writeHandle is a FUSE file handle on a writefile.Handle, which has the semantics (of a
// string dataset's text too); this adds the node it belongs to, errno mapping, logging and
// the kernel's page cache.
type writeHandle struct {
	n *datasetNode
	*writefile.Handle
}

func (n *datasetNode) newWriteHandle() (*writeHandle, error) {
	version, rel := n.versionAndRel()
	h, err := writefile.Open(n.m.commit, version, n.branch, rel)
	if err != nil {
		return nil, err
	}
	return &writeHandle{n: n, Handle: h}, nil
}

var _ fileHandle = (*writeHandle)(nil)

func (h *writeHandle) read(dest []byte, off int64) (int, error) { return h.ReadAt(dest, off) }

// write makes h the handle whose size stat reports.
func (h *writeHandle) write(data []byte, off int64) error {
	h.n.latest.Store(h)
	_, err := h.WriteAt(data, off)
	return err
}

// flush: a handle that was written to commits at every close(2), so close returns the
// commit's error and no write is silently lost. A handle changed only by O_TRUNC or
// ftruncate commits at fsync or at release (the last close): a shell's `> file` closes a
// duplicate descriptor right after the O_TRUNC open, and that must not commit an empty
// version.
func (h *writeHandle) flush() syscall.Errno {
	if h.Written() {
		return h.commit(false)
	}
	return 0
}

// fsync commits the handle's changes as a new version and returns once it is durable.
func (h *writeHandle) fsync() syscall.Errno { return h.commit(true) }

// release commits what is left; changes that cannot be committed are rescued into a
// stage (datasetNode.rescue), except content refused as a partial row (EINVAL): a stage
// would only keep the wrong-size content to commit later, so it is dropped, logged.
func (h *writeHandle) release() {
	h.n.latest.CompareAndSwap(h, nil)
	switch errn := h.commit(false); errn {
	case 0:
	case syscall.EINVAL:
		slog.Warn("dropped: the refused changes go with the file's last close", "path", mountPath(h.n.path))
	default:
		h.n.rescue(h)
	}
	h.Close() // what could not be committed gives its memory and spill slots back
}

func (h *writeHandle) logArgs() []any { return []any{"dataset", h.n.path, "base", h.Base()} }

// truncate resizes axis 0 to size bytes, which must be a whole number of rows.
func (h *writeHandle) truncate(size int64) syscall.Errno { return errno(h.Truncate(size)) }

// commit commits the handle's changes (writefile.Handle.Commit); a failure is logged and
// answered EIO, a refusal of the content (a truncated file that ends inside a row) is
// logged as the mount's refusals are and answered EINVAL.
func (h *writeHandle) commit(explicit bool) syscall.Errno {
	name, err := h.Commit(explicit)
	var partial *writefile.PartialRowError
	var text *writefile.TextError
	if errors.As(err, &text) {
		slog.Warn("refused: a string dataset's file holds one JSON string per line, each ending in a newline; nothing is committed",
			"op", "commit", "path", mountPath(h.n.path), "line", text.Line, "reason", text.Reason)
		return syscall.EINVAL
	}
	if errors.As(err, &partial) {
		slog.Warn("refused: the file was truncated (O_TRUNC, ftruncate) and its content ends inside a row: "+
			"a dataset's file replaced whole must hold whole rows of row_bytes (item size x the other axes; "+
			"user.vh5fs.dtype and user.vh5fs.shape say which); nothing is committed; write the rest of the last row, "+
			"or ftruncate to a whole number of rows",
			"op", "commit", "path", mountPath(h.n.path), "size", partial.Size, "row_bytes", partial.Row)
		return syscall.EINVAL
	}
	if err != nil {
		slog.Error("commit failed", "dataset", h.n.path, "base", h.Base(), "err", err)
		return syscall.EIO
	}
	if name != "" {
		// Pages an mmap put in the kernel's cache belong to this inode, i.e. to the old
		// version: drop them (asynchronously: the kernel may hold locks on our behalf now).
		go h.n.NotifyContent(0, 0)
	}
	return 0
}

// The decoded cache (-o cache, package decoded). A read-only open of a committed
// version's dataset whose content has a complete cache entry is hot: its handle holds
// the entry, which the kernel reads itself (FUSE passthrough: go-fuse registers the
// handle's descriptor as the inode's backing file), so vh5fs serves none of its reads,
// mmap included. Otherwise it is cold and read as without a cache, and the first read
// that reaches the end of the file starts the entry's fill in the background. Never for
// stage files, write handles, live mounts or the plain tree. Where the kernel does not
// take the backing file (no CAP_SYS_ADMIN, an older kernel, -o nopassthrough, read-write
// mounts, whose opens are FOPEN_DIRECT_IO), vh5fs reads hot handles from the entry; the
// first hot open asks the kernel (mount.passthrough).

// hotState counts a dataset file's open read handles of each kind. The kernel refuses
// an open of one kind while the inode has handles of the other (ETXTBSY: a backing file
// and the inode's own page cache cannot both serve it), so an open is hot only while no
// cold handle is open, and cold only while no hot one is; hot opens share one entry.
type hotState struct {
	mu     sync.Mutex
	cold   int          // GUARDED_BY(mu)
	hot    int          // GUARDED_BY(mu)
	entry  *os.File     // the hot handles' entry; GUARDED_BY(mu)
	filled atomic.Bool  // a fill was started (once a node)
	reads  atomic.Int64 // reads vh5fs served of this file, by any handle
}

// hotHandle is a read handle served from a cache entry.
type hotHandle struct {
	f           *os.File
	size        int64
	passthrough bool         // offered to the kernel as the backing file
	reads       atomic.Int64 // reads vh5fs served of this handle
}

var _ fs.FilePassthroughFder = (*hotHandle)(nil)

// PassthroughFd offers the entry to the kernel; go-fuse registers it at the open.
func (h *hotHandle) PassthroughFd() (int, bool) { return int(h.f.Fd()), h.passthrough }

// coldHandle is a read handle of a file with a content key, served as without a cache.
type coldHandle struct{}

// cacheable: opens of this file may use the cache.
func (n *datasetNode) cacheable() bool { return n.m.cache != nil && n.immutable && !n.m.live }

// openRead opens a cacheable file for reading: hot if the entry of its content is
// complete (or hot handles are open), cold otherwise (datasets without a content key, no
// clean chunk map or a slot without a hash_table row, are never hot).
func (n *datasetNode) openRead(d *versions.Dataset, fuseFlags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	n.hot.mu.Lock()
	defer n.hot.mu.Unlock()
	// The content key costs a read of the hash table: only when an entry of the size is
	// there to be found.
	if n.hot.hot == 0 && n.hot.cold == 0 && n.m.cache.MayHave(d.Size()) {
		key, ok, err := d.ContentKey()
		if err != nil {
			slog.Warn("decoded cache: no content key, read as without a cache", "dataset", n.path, "err", err)
		}
		if ok {
			if f, ok := n.m.cache.Get(decoded.Key(key), d.Size()); ok {
				n.hot.entry = f
			}
		}
	}
	if n.hot.entry == nil {
		n.hot.cold++
		return &coldHandle{}, fuseFlags, 0
	}
	n.hot.hot++
	return &hotHandle{f: n.hot.entry, size: d.Size(), passthrough: n.m.passthrough(n.hot.entry, n.path)}, fuseFlags, 0
}

// passthrough tells whether hot handles are offered to the kernel as backing files. The
// first hot open asks the kernel with the entry itself: go-fuse drops a refused
// registration without a word, after which vh5fs serves every read of hot files, so the
// refusal is logged then, once, and no handle claims passthrough.
func (m *mount) passthrough(entry *os.File, dataset string) bool {
	if m.commit != nil || m.noPassthrough {
		return false
	}
	m.backingMu.Lock()
	defer m.backingMu.Unlock()
	if m.backingSeen {
		return m.backingOK
	}
	srv := m.server.Load()
	if srv == nil {
		return true // an open before Mount has its server: go-fuse tries
	}
	errno := probeBacking(srv, int(entry.Fd()))
	m.backingSeen, m.backingOK = true, errno == 0
	if errno != 0 {
		m.servedOnce.Do(func() {
			slog.Warn("decoded cache: the kernel refused passthrough (it needs CAP_SYS_ADMIN in the initial user namespace and Linux 6.9 or later): "+
				"vh5fs serves the reads of cached datasets from their entries itself", "dataset", dataset, "err", errno)
		})
	}
	return m.backingOK
}

// readHot reads a hot handle's entry: the kernel did not take it as the backing file.
func (n *datasetNode) readHot(h *hotHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.hot.reads.Add(1)
	h.reads.Add(1)
	if h.passthrough {
		n.m.servedOnce.Do(func() {
			slog.Warn("decoded cache: the kernel refused passthrough (it needs CAP_SYS_ADMIN and Linux 6.9 or later): vh5fs reads cached datasets from their entries")
		})
	}
	size := min(int64(len(dest)), max(h.size-off, 0))
	if size <= maxSplice {
		return fuse.ReadResultFd(h.f.Fd(), off, int(size)), 0
	}
	nr, err := h.f.ReadAt(dest[:size], off)
	if err != nil && !errors.Is(err, io.EOF) {
		slog.Error("decoded cache: entry unreadable", "dataset", n.path, "entry", h.f.Name(), "err", err)
		return nil, syscall.EIO
	}
	return bytesResult(dest[:nr]), 0
}

// fillAtEnd starts the fill of the file's entry after a read of size bytes at off that
// reached its end: the first whole read of a version pays nothing for the cache.
func (n *datasetNode) fillAtEnd(off int64, size int) {
	if n.hot.filled.Load() {
		return
	}
	d, errn := n.dataset()
	if errn != 0 || off+int64(size) < d.Size() || n.hot.filled.Swap(true) {
		return
	}
	start, file, path := time.Now(), n.m.file, n.path
	// The key is named in the fill's goroutine: the read that reached the end is not
	// kept waiting for the hash table.
	job := func() (decoded.Key, int64, io.ReaderAt, bool, error) {
		key, ok, err := d.ContentKey()
		return decoded.Key(key), d.Size(), datasetReader{file, path}, ok, err
	}
	n.m.cache.Start(job, func(err error) {
		switch {
		case err == nil:
			slog.Info("decoded cache: filled", "dataset", path, "bytes", d.Size(), "took", time.Since(start).Round(time.Millisecond))
		case errors.Is(err, decoded.ErrFilling), errors.Is(err, context.Canceled):
		default:
			slog.Warn("decoded cache: not filled; reads go on without it", "dataset", path, "err", err)
		}
	})
}

// datasetReader reads a dataset's bytes as reads through the mount do (versions.File.Read
// finds the dataset anew each time: the File's budget may have let the first go).
type datasetReader struct {
	f    *versions.File
	path string
}

func (r datasetReader) ReadAt(p []byte, off int64) (int, error) {
	rep, err := r.f.Read(r.path, p, off, 0)
	return rep.N, err
}

var _ fs.NodeReleaser = (*datasetNode)(nil)

// Release counts the handle out; a hot file's entry is closed with its last hot handle
// (an entry evicted meanwhile stays readable until then). Hot handles log how many reads
// vh5fs served of them: none when the kernel served them.
func (n *datasetNode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	switch h := fh.(type) {
	case *hotHandle:
		// Reads served by vh5fs mean the kernel did not take the backing file after all.
		slog.Debug("decoded cache: hot handle closed", "dataset", n.path, "passthrough", h.passthrough && h.reads.Load() == 0,
			"daemon_reads", h.reads.Load(), "file_daemon_reads", n.hot.reads.Load())
		n.hot.mu.Lock()
		if n.hot.hot--; n.hot.hot == 0 {
			n.hot.entry.Close()
			n.hot.entry = nil
		}
		n.hot.mu.Unlock()
	case *coldHandle:
		n.hot.mu.Lock()
		n.hot.cold--
		n.hot.mu.Unlock()
	}
	return n.fileNode.Release(ctx, fh)
}
