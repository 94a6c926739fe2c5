package fsnode

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Passthrough writes. An open of a committed version's dataset in a read-write mount that
// replaces its content (O_TRUNC: cp, a shell's >, dd without notrunc) gets a staging file
// in the cache directory (decoded.Cache.Staging), which the kernel reads, writes and maps
// itself (FUSE passthrough): no WRITE reaches vh5fs. What still does
// (TestPassthroughRequests): FLUSH at every close, FSYNC, SETATTR (ftruncate) and RELEASE
// at the last close. So at those vh5fs loads the staging file into the handle's
// writefile.Handle (truncated, then written in order, as the daemon-served writes would
// have been) and commits as without passthrough: the same chunks, hashes and version.
//
// What vh5fs cannot see is whether the file changed: a FLUSH loads it only if its size or
// times moved since the last load (a shell's > closes a duplicate descriptor before any
// write: no commit), FSYNC and RELEASE always do (a page written through a mapping since
// the last load moves no time; a load of unchanged content commits nothing at RELEASE).
//
// The kernel takes one backing file per inode and refuses a non-passthrough open while it
// has one (EINVAL), and go-fuse hands a node's backing file to every later open that
// offers one until the last such handle is released. So a replacing open is passthrough
// only while no other handle of the file is open (hotState), other opens wait for its
// release (ptWait, then EBUSY, logged), read handles of read-write mounts never offer a
// backing file (rwHotHandle), and a node keeps its staging file for its next passthrough
// open (a backing id go-fuse has not yet dropped names that same file).
//
// Fallbacks, each with one log line, to daemon-served writes: no cache directory
// (-o nocache), -o nopassthrough, a kernel that takes no backing file (no CAP_SYS_ADMIN,
// Linux before 6.9), less free space beside the cache than the dataset's size and
// ptHeadroom. A crash before a commit loses only what that commit would have written; the
// staging file goes at the next start (decoded.Open).

// ptWait is how long an open waits for a passthrough handle of the same file to be
// released before it answers EBUSY.
const ptWait = 5 * time.Second

// ptHeadroom is free space left beside a staging file of the replaced dataset's size.
const ptHeadroom = 256 << 20

// coarseTick bounds the filesystem's timestamp granularity: a load waits until the
// staging file's mtime is this old, so that a later write moves it.
const coarseTick = 20 * time.Millisecond

// loadStep is the bytes a load reads from the staging file and writes into the handle at
// a time (the request size of daemon-served writes, TuneReads).
const loadStep = 1 << 20

// ptHandle is a write handle whose content is its staging file, served by the kernel.
type ptHandle struct {
	*writeHandle
}

var _ fs.FilePassthroughFder = (*ptHandle)(nil)

// PassthroughFd offers the staging file to the kernel as the handle's backing file.
func (h *ptHandle) PassthroughFd() (int, bool) { return int(h.pt.f.Fd()), true }

// stagingFile is a node's staging file and what was last loaded of it.
type stagingFile struct {
	f      *os.File
	seed   maphash.Seed
	mu     sync.Mutex // one load and commit at a time; above writefile.File.mu (docs/ARCHITECTURE.md)
	loaded fileStamp  // the file when last loaded at a commit (or emptied); GUARDED_BY(mu)
	sums   []uint64   // checksums of the whole pieces loaded, in order; GUARDED_BY(mu)
	tail   int64      // the end of what the last load loaded; GUARDED_BY(mu)
	stop   chan struct{}
}

// fileStamp is what a write to a file moves: its size and times.
type fileStamp struct {
	size         int64
	mtime, ctime unix.Timespec
}

func (s *stagingFile) stamp() (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(s.f.Fd()), &st); err != nil {
		return fileStamp{}, fmt.Errorf("staging file %s: %w", s.f.Name(), err)
	}
	return fileStamp{size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, nil
}

// reset empties the staging file for a new replacing open.
func (s *stagingFile) reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.f.Truncate(0); err != nil {
		return fmt.Errorf("staging file %s: %w", s.f.Name(), err)
	}
	// ext4 (auto_da_alloc) marks a file truncated to 0 and writes back all its dirty pages
	// at the next close of any of its open files: the kernel's own open of it (the backing
	// file) at the handle's release would write the whole staging file to disk, doubling a
	// replace's disk writes. A close now, with nothing dirty, clears the mark.
	if f, err := os.Open(s.f.Name()); err == nil {
		f.Close()
	}
	st, err := s.stamp()
	s.loaded, s.sums, s.tail = st, nil, 0
	return err
}

// write and read serve requests the kernel sends despite passthrough (go-fuse gave up on
// backing files after the probe): the staging file stays the handle's content.
func (h *ptHandle) write(data []byte, off int64) error {
	h.n.latest.Store(h.writeHandle)
	_, err := h.pt.f.WriteAt(data, off)
	return err
}

func (h *ptHandle) read(dest []byte, off int64) (int, error) {
	n, err := h.pt.f.ReadAt(dest, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// flush commits if the staging file moved since its last load.
func (h *ptHandle) flush() syscall.Errno { return h.commitStaged(false, false) }

// fsync loads the staging file and commits it, durable on return.
func (h *ptHandle) fsync() syscall.Errno { return h.commitStaged(true, true) }

// release loads the staging file a last time and commits what differs from the base;
// then the staging file is emptied (the node keeps it for its next passthrough open).
func (h *ptHandle) release() {
	h.n.latest.CompareAndSwap(h.writeHandle, nil)
	close(h.pt.stop)
	errn := h.commitStaged(false, true)
	switch errn {
	case 0:
	case syscall.EINVAL:
		slog.Warn("dropped: the refused changes go with the file's last close", "path", mountPath(h.n.path))
	default:
		h.n.rescue(h.writeHandle)
	}
	h.Close()
	if err := h.pt.reset(); err != nil {
		slog.Warn("staging file not emptied", "dataset", h.n.path, "err", err)
	}
}

// truncate resizes the staging file (ftruncate), to a whole number of rows.
func (h *ptHandle) truncate(size int64) syscall.Errno {
	s := h.pt
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := h.Truncate(size); err != nil { // checks the rows; the loaded content shrinks with it
		return errno(err)
	}
	if err := s.f.Truncate(size); err != nil {
		slog.Error("staging file not resized", "dataset", h.n.path, "size", size, "err", err)
		return syscall.EIO
	}
	s.sums = s.sums[:min(int64(len(s.sums)), size/loadStep)]
	s.tail = min(s.tail, size)
	return 0
}

// startFollowing starts the handle's follower (follow), stopped at its release.
func (h *ptHandle) startFollowing() {
	h.pt.stop = make(chan struct{})
	go h.follow(h.pt.stop)
}

// size is the handle's size: its staging file's.
func (s *stagingFile) size() int64 {
	st, err := s.stamp()
	if err != nil {
		return 0
	}
	return st.size
}

// commitStaged brings the handle's content up to the staging file's (load) if always, or
// if the file moved since the last load, and then commits (explicit: fsync's commit).
func (h *ptHandle) commitStaged(explicit, always bool) syscall.Errno {
	s := h.pt
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.stamp()
	if err != nil {
		slog.Error("commit failed", "dataset", h.n.path, "base", h.Base(), "err", err)
		return syscall.EIO
	}
	if !always && st == s.loaded {
		return 0
	}
	start := time.Now()
	reloaded, err := h.load()
	if err != nil {
		en := errno(err)
		slog.Error("commit failed: the staging file could not be loaded", "dataset", h.n.path, "base", h.Base(), "errno", en, "err", err)
		return en
	}
	slog.Debug("staging file loaded", "dataset", h.n.path, "bytes", s.loaded.size, "pieces_reloaded", reloaded,
		"took", time.Since(start).Round(time.Millisecond))
	return h.commit(explicit)
}

// A staging file is loaded in pieces of loadStep bytes at multiples of it. While the handle
// is open a follower (follow) loads each whole piece as soon as the writer has written past
// it, so that hashing and storing the chunks run beside the writes as they do for writes
// vh5fs serves; it keeps a checksum of each piece as loaded. A load at a commit (load)
// checks every loaded piece against the file and loads again the pieces that differ (the
// writer went back, or wrote through a mapping), then the rest.

// pieceSum is a piece's checksum: maphash, 64 bits with a seed of the process's, fast
// enough that checking a piece costs less than reading it.
func (s *stagingFile) pieceSum(b []byte) uint64 { return maphash.Bytes(s.seed, b) }

// follow loads whole pieces past the loaded ones while the handle is open, until stop.
func (h *ptHandle) follow(stop <-chan struct{}) {
	s := h.pt
	buf := make([]byte, loadStep)
	idle := time.NewTicker(followPoll)
	defer idle.Stop()
	for {
		select {
		case <-stop:
			return
		default:
		}
		s.mu.Lock()
		progressed, err := h.followStep(buf)
		s.mu.Unlock()
		if err != nil {
			slog.Debug("staging file: the follower stops; the commit loads the rest", "dataset", h.n.path, "err", err)
			return
		}
		if !progressed {
			select {
			case <-stop:
				return
			case <-idle.C:
			}
		}
	}
}

// followPoll is how often an idle follower looks for a new whole piece.
const followPoll = 5 * time.Millisecond

// followStep loads the next piece if the file holds all of it. Called with s.mu held.
func (h *ptHandle) followStep(buf []byte) (bool, error) {
	s := h.pt
	st, err := s.stamp()
	if err != nil {
		return false, err
	}
	off := int64(len(s.sums)) * loadStep
	if st.size < off+loadStep {
		return false, nil
	}
	n, err := s.f.ReadAt(buf, off)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return false, fmt.Errorf("reading %s at %d: %w", s.f.Name(), off, err)
	}
	if _, err := h.WriteAt(buf, off); err != nil {
		return false, err
	}
	s.sums = append(s.sums, s.pieceSum(buf))
	return true, nil
}

// load brings the handle's content up to the staging file's: the loaded pieces that
// differ from the file again, then the rest; a file shorter than what was loaded is
// loaded anew from its start. It first waits until the file's mtime is a clock tick old,
// so that a write after the stamp it records moves it. It returns how many pieces it
// loaded again. Called with s.mu held.
func (h *ptHandle) load() (int, error) {
	s := h.pt
	st, err := s.stamp()
	if err != nil {
		return 0, err
	}
	if age := time.Since(time.Unix(st.mtime.Unix())); age < coarseTick {
		time.Sleep(coarseTick - age)
	}
	if st.size < int64(len(s.sums))*loadStep || s.tail > st.size {
		if err := h.Truncate(0); err != nil {
			return 0, err
		}
		s.sums, s.tail = nil, 0
	}
	stale, err := s.changedPieces()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, loadStep)
	for _, i := range stale {
		off := int64(i) * loadStep
		if _, err := s.f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("reading %s at %d: %w", s.f.Name(), off, err)
		}
		if _, err := h.WriteAt(buf, off); err != nil {
			return 0, err
		}
		s.sums[i] = s.pieceSum(buf)
	}
	for {
		progressed, err := h.followStep(buf)
		if err != nil {
			return 0, err
		}
		if !progressed {
			break
		}
	}
	// The last piece, not whole: loaded at each commit (it is less than loadStep).
	off := int64(len(s.sums)) * loadStep
	if tail := st.size - off; tail > 0 {
		n, err := s.f.ReadAt(buf[:tail], off)
		if err != nil && !(errors.Is(err, io.EOF) && int64(n) == tail) {
			return 0, fmt.Errorf("reading %s at %d: %w", s.f.Name(), off, err)
		}
		if _, err := h.WriteAt(buf[:tail], off); err != nil {
			return 0, err
		}
	}
	s.tail = st.size
	s.loaded = st
	return len(stale), nil
}

// changedPieces checks the loaded pieces against the file, on every core, and lists those
// whose checksum changed. Called with s.mu held.
func (s *stagingFile) changedPieces() ([]int, error) {
	workers := min(runtime.NumCPU(), max(len(s.sums), 1))
	var (
		mu      sync.Mutex
		changed []int
		firstE  error
		wg      sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, loadStep)
			for i := range next {
				n, err := s.f.ReadAt(buf, int64(i)*loadStep)
				if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
					if errors.Is(err, io.EOF) { // shorter than loaded: the piece changed
						err = nil
					}
					mu.Lock()
					if err != nil && firstE == nil {
						firstE = fmt.Errorf("reading %s: %w", s.f.Name(), err)
					}
					changed = append(changed, i)
					mu.Unlock()
					continue
				}
				if s.pieceSum(buf) != s.sums[i] {
					mu.Lock()
					changed = append(changed, i)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range s.sums {
		next <- i
	}
	close(next)
	wg.Wait()
	sort.Ints(changed)
	return changed, firstE
}

// waitPassthrough waits, up to ptWait, while the file has an open passthrough handle: the
// kernel refuses every other open meanwhile. Then EBUSY, logged. Called with n.hot.mu held.
func (n *datasetNode) waitPassthrough() syscall.Errno {
	if n.hot.pt != ptOpen {
		return 0
	}
	deadline := time.Now().Add(ptWait)
	// sync.Cond waits without a deadline: a timer wakes the waiters at it.
	t := time.AfterFunc(ptWait, func() {
		n.hot.mu.Lock()
		n.hot.ptDone.Broadcast()
		n.hot.mu.Unlock()
	})
	defer t.Stop()
	for n.hot.pt == ptOpen {
		if !time.Now().Before(deadline) {
			slog.Warn("refused: the file is open for a replacing write that the kernel serves (passthrough): "+
				"no other open of it until that one is closed", "op", "open", "path", mountPath(n.path), "waited", ptWait)
			return syscall.EBUSY
		}
		n.hot.ptDone.Wait()
	}
	return 0
}

// staging is the node's staging file, emptied, for a passthrough open; nil when the open
// is served by vh5fs instead (logged: once a mount for what the kernel refuses, at each
// open for a lack of space). Called with n.hot.mu held, the file open nowhere else.
func (n *datasetNode) staging(d interface{ Size() int64 }) *stagingFile {
	m := n.m
	if m.cache == nil || m.noPassthrough || m.live || n.hot.pt != ptNone {
		return nil
	}
	free, err := m.cache.Free()
	if err != nil || free < d.Size()+ptHeadroom {
		slog.Warn("passthrough write off for this open: too little free space beside the cache for its staging file; vh5fs serves its writes",
			"dataset", n.path, "cache", m.cache.Dir(), "free", free, "need", d.Size()+ptHeadroom, "err", err)
		return nil
	}
	if n.hot.staging == nil {
		f, err := m.cache.Staging()
		if err != nil {
			slog.Warn("passthrough write off for this open: no staging file; vh5fs serves its writes", "dataset", n.path, "err", err)
			return nil
		}
		n.hot.staging = &stagingFile{f: f, seed: maphash.MakeSeed()}
	}
	s := n.hot.staging
	if !m.kernelBacks(s.f, func(errno syscall.Errno) {
		m.ptWriteOnce.Do(func() {
			slog.Warn("passthrough writes off: the kernel refused a backing file (it needs CAP_SYS_ADMIN in the initial user namespace and Linux 6.9 or later): "+
				"vh5fs serves every write itself", "err", errno)
		})
	}) {
		n.hot.staging = nil
		os.Remove(s.f.Name())
		s.f.Close()
		return nil
	}
	if err := s.reset(); err != nil {
		slog.Warn("passthrough write off for this open: staging file not emptied; vh5fs serves its writes", "dataset", n.path, "err", err)
		return nil
	}
	if n.hot.ptDone == nil {
		n.hot.ptDone = sync.NewCond(&n.hot.mu)
	}
	return s
}
