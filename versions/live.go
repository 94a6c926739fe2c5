package versions

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/swmr"
)

// Live files (OpenLive, the -o live mount). The file is libhdf5's SWMR reader and nothing
// that can change is cached:
//
//   - Datasets outside committed versions (the plain tree) are not cached as Dataset values.
//     Each request refreshes the dataset's open handle (H5Drefresh: libhdf5 drops the
//     dataset's cached metadata, chunk index included, and reads the object header again)
//     and answers from a snapshot made right after: its size and bytes are those of the
//     writer's last flush before the refresh. The chunk cache and h5meta are not used for
//     them: libhdf5 reads them.
//   - Failed refreshes and reads are run again from the start with bounded backoff
//     (swmr.Retrier); a run's bytes are used only when the whole run succeeded.
//   - Committed versions are immutable and cached as in other mounts. New versions written
//     by another process appear when Follow reopens the file: once the file changed (size,
//     mtime or ctime) and no writer has it open any more (swmr.State), the next Follow
//     closes every handle and opens the file again, so libhdf5's metadata cache starts
//     empty. Follow is called by every directory operation (lookup, readdir, readlink).
//
// Lock ordering: live.gate (shared by every request, see Hold; exclusive in Follow's
// reopen) comes before everything else of the File.

// liveState is what a live File adds.
type liveState struct {
	path  string // as given to OpenLive (the HDF5 handle may be opened through /proc/self/fd)
	gate  sync.RWMutex
	retry swmr.Retrier

	mu        sync.Mutex
	stamp     stamp                  // the file when last (re)opened; GUARDED_BY(mu)
	past      h5.RetryInfo           // libhdf5 retries counted by handles since closed; GUARDED_BY(mu)
	reopens   int                    // GUARDED_BY(mu)
	reopenErr error                  // the last reopen's failure; GUARDED_BY(mu)
	handles   map[string]*h5.Dataset // open plain-tree datasets by path; GUARDED_BY(mu)
}

// stamp identifies a state of the file's bytes.
type stamp struct {
	size         int64
	mtime, ctime syscall.Timespec
}

func stampOf(f *os.File) (stamp, error) {
	st, err := f.Stat()
	if err != nil {
		return stamp{}, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{size: st.Size()}, nil
	}
	return stamp{size: st.Size(), mtime: sys.Mtim, ctime: sys.Ctim}, nil
}

// swmrOptions: libhdf5's default read attempts for SWMR (100), and no flock. A SWMR reader
// that locks holds a shared flock as long as the file is open, and a writer (h5py's
// File(path, "a"), versioned-hdf5's commit) then fails to open the file with EAGAIN; a
// SWMR writer itself drops its lock once in SWMR mode.
var swmrOptions = h5.SWMROptions{ReadAttempts: 100, Locking: false}

// OpenLive opens path as a live file: libhdf5's SWMR reader (H5F_ACC_RDONLY |
// H5F_ACC_SWMR_READ) without file locking, following a SWMR writer's appends and, for
// versioned files, commits made by other processes.
func OpenLive(path string) (*File, error) {
	f, err := open(path, func(p string) (*h5.File, error) { return h5.OpenSWMR(p, swmrOptions) })
	if err != nil {
		return nil, err
	}
	st, err := stampOf(f.store.File())
	if err != nil {
		f.Close()
		return nil, err
	}
	f.live = &liveState{path: path, stamp: st, handles: map[string]*h5.Dataset{}}
	return f, nil
}

// openReadOnly is Open's opener: h5.Open, and for a file whose superblock says a SWMR
// writer has it open — a copy taken while one was writing, or the file itself — libhdf5's
// SWMR reader, which a normal open is refused for ("file is already open for write") and
// which trusts the file's length rather than the EOF the writer left behind.
func openReadOnly(path string) (*h5.File, error) {
	h, err := h5.Open(path)
	if err == nil {
		return h, nil
	}
	var he *h5.Error
	if !errors.As(err, &he) {
		return nil, err
	}
	raw, rerr := os.Open(path)
	if rerr != nil {
		return nil, err
	}
	defer raw.Close()
	st, serr := raw.Stat()
	if serr != nil {
		return nil, err
	}
	sb, serr := swmr.ReadSuperblock(raw, st.Size())
	if serr != nil || sb.Version < 3 || sb.Flags&swmr.FlagSWMRWrite == 0 {
		return nil, err
	}
	return h5.OpenSWMR(path, h5.SWMROptions{Locking: true})
}

// Live reports whether the file was opened with OpenLive.
func (f *File) Live() bool { return f.live != nil }

// Hold marks a request in progress on a live file, so that Follow's reopen waits for it;
// call the returned function when the request is answered. A request must not call Hold
// twice, nor Follow while holding. No-op for other files.
func (f *File) Hold() (release func()) {
	if f.live == nil {
		return func() {}
	}
	f.live.gate.RLock()
	return f.live.gate.RUnlock
}

// Follow reopens a live file that another process changed and has closed (see the
// comment at the top of live.go); otherwise it does nothing. Call it before Hold.
func (f *File) Follow() error {
	l := f.live
	if l == nil {
		return nil
	}
	st, err := stampOf(f.store.File())
	if err != nil {
		return err
	}
	l.mu.Lock()
	same := st == l.stamp && l.reopenErr == nil
	l.mu.Unlock()
	if same {
		return nil
	}
	state, err := swmr.ReadState(f.store.File())
	if err != nil || state.Writer() != swmr.WriterClosed {
		return nil // torn superblock, or a writer still at work: look again next time
	}
	l.gate.Lock()
	defer l.gate.Unlock()
	l.mu.Lock()
	same = st == l.stamp && l.reopenErr == nil
	l.mu.Unlock()
	if same {
		return nil // another request reopened it meanwhile
	}
	return f.reopen(st)
}

// reopen closes every handle and opens the file again; called with gate held exclusively.
func (f *File) reopen(st stamp) error {
	l := f.live
	if r, err := f.h.MetadataRetries(); err == nil {
		l.mu.Lock()
		l.past = addRetries(l.past, r)
		l.mu.Unlock()
	}
	f.mu.Lock()
	ds, raws := f.datasets, f.raws
	f.datasets, f.raws = map[string]*Dataset{}, map[string]*h5.Dataset{}
	f.mapped.reset()
	f.meta = map[string]Version{}
	f.store.Reset() // the writer may have rewritten slots: no index or decoded chunk holds
	f.mu.Unlock()
	for _, d := range ds {
		d.close()
	}
	for _, r := range raws {
		r.Close()
	}
	l.mu.Lock()
	handles := l.handles
	l.handles = map[string]*h5.Dataset{}
	l.mu.Unlock()
	for _, h := range handles {
		h.Close()
	}
	f.h.Close()
	// Open the inode the mount follows (the store's descriptor), even if the path now
	// names another file.
	proc := fmt.Sprintf("/proc/self/fd/%d", f.store.Fd())
	var h *h5.File
	err := l.retry.Do(func() error {
		var err error
		h, err = h5.OpenSWMR(proc, swmrOptions)
		return err
	}, retryable)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reopens++
	if err != nil {
		l.reopenErr = err // f.h stays closed: requests fail until a Follow succeeds
		return err
	}
	f.h = h
	if err := f.checkLayout(); err != nil {
		l.reopenErr = err
		return err
	}
	l.stamp, l.reopenErr = st, nil
	return nil
}

// closeLive closes the live handles (from Close).
func (f *File) closeLive() {
	if f.live == nil {
		return
	}
	f.live.mu.Lock()
	handles := f.live.handles
	f.live.handles = map[string]*h5.Dataset{}
	f.live.mu.Unlock()
	for _, h := range handles {
		h.Close()
	}
}

func addRetries(a, b h5.RetryInfo) h5.RetryInfo {
	for i := range a.Reads {
		a.Reads[i] += b.Reads[i]
	}
	for j, x := range b.Bins {
		if j < len(a.Bins) {
			a.Bins[j] += x
		} else {
			a.Bins = append(a.Bins, x)
		}
	}
	return a
}

// retryable: failures a concurrent write can cause. A missing object, an unsupported type
// or a closed file stays so.
func retryable(err error) bool {
	return !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, h5.ErrUnsupported) &&
		!errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrClosed)
}

// isLivePath: datasets outside committed versions follow the writer.
func (f *File) isLivePath(path string) bool {
	return f.live != nil && !(f.versioned && strings.HasPrefix(path, VersionsGroup+"/"))
}

// liveDataset refreshes the dataset at path and returns a snapshot of it (see the top).
func (f *File) liveDataset(path string) (*Dataset, error) {
	var d *Dataset
	err := f.live.retry.Do(func() error {
		var err error
		d, err = f.liveSnapshot(path)
		return err
	}, retryable)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// LiveReadAt reads bytes [off, off+len(p)) of the live dataset at path as it is now:
// refresh, snapshot, read, the whole run again on failure. p holds data only when err is
// nil. For other datasets it is Dataset(path).ReadAt.
func (f *File) LiveReadAt(path string, p []byte, off int64) (int, error) {
	if !f.isLivePath(path) {
		d, err := f.Dataset(path)
		if err != nil {
			return 0, err
		}
		return d.ReadAt(p, off)
	}
	var n int
	err := f.live.retry.Do(func() error {
		d, err := f.liveSnapshot(path)
		if err != nil {
			return err
		}
		n, err = d.ReadAt(p, off)
		return err
	}, retryable)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// liveHandle returns the open handle of the plain dataset at path, opening it once.
func (f *File) liveHandle(path string) (*h5.Dataset, error) {
	l := f.live
	l.mu.Lock()
	h := l.handles[path]
	l.mu.Unlock()
	if h != nil {
		return h, nil
	}
	h, err := f.h.OpenDataset(path)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.handles[path]; old != nil {
		h.Close()
		return old, nil
	}
	l.handles[path] = h
	return h, nil
}

// liveSnapshot refreshes the handle and builds a Dataset of its extent now, read through
// libhdf5 (the general route of loadDataset).
func (f *File) liveSnapshot(path string) (*Dataset, error) {
	h, err := f.liveHandle(path)
	if err != nil {
		return nil, err
	}
	if err := h.Refresh(); err != nil {
		return nil, err
	}
	d := f.describe(path, h)
	d.live = true
	if err := d.checkStorage(h); err != nil {
		return nil, err
	}
	if text, err := d.sizeOrText(h); err != nil {
		return nil, err
	} else if text {
		return d, nil
	}
	if len(d.Shape) == 0 {
		return d, d.readScalar(h)
	}
	// h is shared with later snapshots; closed by reopen or Close, never by the snapshot.
	if err := d.readThroughHDF5(h); err != nil {
		return nil, err
	}
	return d, nil
}

// LiveStatus is what a live mount shows about its file (root xattrs user.vh5fs.live.*).
type LiveStatus struct {
	Writer     swmr.Writer
	State      swmr.State
	HDF5       h5.RetryInfo // libhdf5's retried metadata reads, all handles since the mount
	Operations swmr.Counts  // vh5fs's retries of whole refreshes, reads and reopens
	Reopens    int
	ReopenErr  error
	At         time.Time
}

// LiveStatus reads the writer state and the retry counts now.
func (f *File) LiveStatus() (LiveStatus, error) {
	l := f.live
	if l == nil {
		return LiveStatus{}, fmt.Errorf("not a live file")
	}
	state, err := swmr.ReadState(f.store.File())
	if err != nil {
		return LiveStatus{}, err
	}
	s := LiveStatus{Writer: state.Writer(), State: state, Operations: l.retry.Counts(), At: time.Now()}
	cur, _ := f.h.MetadataRetries() // a closed handle (failed reopen) has none
	l.mu.Lock()
	s.HDF5 = addRetries(addRetries(h5.RetryInfo{}, l.past), cur)
	s.Reopens, s.ReopenErr = l.reopens, l.reopenErr
	l.mu.Unlock()
	return s, nil
}
