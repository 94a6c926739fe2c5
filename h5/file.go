package h5

// #include "vh5.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"gonum.org/v1/hdf5"
)

// ErrNotHDF5 is returned by Open for a file that is not HDF5.
var ErrNotHDF5 = errors.New("not an HDF5 file")

// ErrTruncated is wrapped by Open's error for a file shorter than its superblock says.
var ErrTruncated = errors.New("truncated")

// truncatedEOF is how libhdf5 reports a file shorter than its superblock's end-of-file address.
var truncatedEOF = regexp.MustCompile(`truncated file: eof = (\d+), sblock->base_addr = \d+, stored_eof = (\d+)`)

// minSuperblock is the size of the smallest complete superblock with its root group
// (version 0: 56 bytes and a 40-byte symbol table entry).
const minSuperblock = 96

// openFailure is the error for a file libhdf5 would not open: ErrTruncated with the sizes
// when the file is shorter than its superblock records (or than a superblock), else e.
func openFailure(path string, size int64, e *Error) error {
	if m := truncatedEOF.FindStringSubmatch(e.Stack); m != nil {
		return &truncatedError{fmt.Sprintf("%s: truncated: %s bytes, the superblock records %s", path, m[1], m[2]), e}
	}
	if size < minSuperblock && strings.Contains(e.Stack, "superblock") {
		return &truncatedError{fmt.Sprintf("%s: truncated inside the superblock (%d bytes)", path, size), e}
	}
	return e
}

// truncatedError is ErrTruncated with its message, and the HDF5 error it explains.
type truncatedError struct {
	msg string
	e   *Error
}

func (t *truncatedError) Error() string   { return t.msg }
func (t *truncatedError) Unwrap() []error { return []error{ErrTruncated, t.e} }

// File is an HDF5 file opened read-only.
type File struct {
	path string
	rw   bool
	f    *hdf5.File // nil once closed; GUARDED_BY(mu)

	lists []writtenList // mapping lists CreateVirtual wrote, not yet checked; under the HDF5 lock

	sync syncState // FlushSync's (journal.go)

	releaseMu sync.Mutex  // taken after the HDF5 lock (CreateVirtual, Close)
	release   *time.Timer // releaseLater's; GUARDED_BY(releaseMu)
}

// releaseDelay is how long after libhdf5 created a virtual dataset's mappings (lists
// CreateVirtual does not write itself) the memory it took goes back to the system, unless
// another is created meanwhile. Creating one copies its mapping list several times (about 23 KiB a mapping at the peak: 230 MB for
// 10,000 mappings), and libhdf5's free lists and glibc keep what is freed: commits in a
// row reuse it (a commit at 10k chunks took 250-390 ms releasing it each time, 150-210 ms
// reusing glibc's pages), and an idle mount gives it back.
const releaseDelay = time.Second

// releaseLater schedules releaseMemory releaseDelay from now, replacing a schedule not yet
// run.
func (f *File) releaseLater() {
	f.releaseMu.Lock()
	defer f.releaseMu.Unlock()
	if f.release == nil {
		f.release = time.AfterFunc(releaseDelay, releaseMemory)
		return
	}
	f.release.Reset(releaseDelay)
}

// releaseMemory empties libhdf5's free lists and hands the pages malloc holds free back
// to the system.
func releaseMemory() {
	lock()
	defer unlock()
	C.vh5_release_memory()
}

// Writable reports whether the file was opened with OpenRW.
func (f *File) Writable() bool { return f.rw }

// Open opens path read-only.
func Open(path string) (*File, error) { return open(path, false, false) }

// OpenSource opens path read-only as Open does, through the journal driver, which lets a
// copy of it (CopyTo) take large mapping lists as stored (Copy.Virtual).
func OpenSource(path string) (*File, error) { return open(path, false, true) }

// OpenRW opens path for reading and writing. libhdf5 takes an exclusive lock on the file
// (unless HDF5_USE_FILE_LOCKING=FALSE) for as long as it is open.
func OpenRW(path string) (*File, error) { return open(path, true, true) }

func open(path string, rw, journal bool) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	lock()
	defer unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	// A journal first: a sync interrupted while guarded (GuardSync) left the file marked,
	// not HDF5, until its recovery.
	if !rw {
		if pending, err := C.vh5j_pending(cpath); pending != 0 {
			if pending < 0 {
				return nil, &Error{Op: "check for a journal of", Path: path, Err: err}
			}
			return nil, journalError(path, ErrInterruptedCommit)
		}
	} else if _, err := recoverLocked(path, cpath, false); err != nil {
		return nil, err
	}
	if !hdf5.IsHDF5(path) {
		stackMessage()
		if GuardMarked(path) {
			return nil, journalError(path, ErrGuardWithoutJournal)
		}
		return nil, fmt.Errorf("%s: %w", path, ErrNotHDF5)
	}
	if !rw {
		if journal {
			id := C.vh5j_open(cpath, 0)
			if id < 0 {
				return nil, openFailure(path, st.Size(), fail("open file", path, nil).(*Error))
			}
			return &File{path: path, f: gonumFile(id)}, nil
		}
		f, err := hdf5.OpenFile(path, hdf5.F_ACC_RDONLY)
		if err != nil {
			return nil, openFailure(path, st.Size(), fail("open file", path, nil).(*Error))
		}
		return &File{path: path, f: f}, nil
	}
	// Read-write (an interrupted commit completed above): write through the journal driver
	// (vh5j_sync.c), so that no crash can leave the file torn.
	id := C.vh5j_open(cpath, 1)
	if id < 0 {
		return nil, openFailure(path, st.Size(), fail("open file", path, nil).(*Error))
	}
	// Crash tests kill the process at a chosen system call of its syncs (tests/synckill_test.go).
	if n, err := strconv.ParseUint(os.Getenv(SyncKillEnv), 10, 64); err == nil {
		C.vh5j_kill_at(id, C.ulong(n))
	}
	return &File{path: path, f: gonumFile(id), rw: true}, nil
}

// SyncKillEnv names the environment variable that makes a process kill itself (SIGKILL)
// just before the N-th system call of a read-write file's syncs that writes, fsyncs,
// creates or removes a file: for crash tests, which place a kill at every moment of a sync.
const SyncKillEnv = "VH5FS_TEST_SYNC_KILL"

// Path is the file's path as given to Open.
func (f *File) Path() string { return f.path }

// Close closes the file; it is safe to call more than once.
func (f *File) Close() error {
	f.sync.mu.Lock() // a FlushSync in progress finishes first
	defer f.sync.mu.Unlock()
	lock()
	defer unlock()
	if f.f == nil {
		return nil
	}
	// A stopped file's last writes are dropped, so that libhdf5 lets go of it; the close
	// still reports the stop.
	stopped := C.vh5j_abandon(C.hid_t(f.f.ID()))
	err := f.f.Close()
	f.f = nil
	f.releaseMu.Lock()
	if f.release != nil && f.release.Stop() {
		C.vh5_release_memory() // now, rather than later
	}
	f.releaseMu.Unlock()
	switch {
	case err != nil:
		return fail("close file", f.path, nil)
	case stopped != 0:
		return &Error{Op: "close file", Path: f.path, Err: fmt.Errorf("%w (%v)", ErrStopped, syscall.Errno(stopped))}
	}
	return nil
}

// openFiles is the number of files libhdf5 holds open in this process.
func openFiles() int {
	lock()
	defer unlock()
	return int(C.H5Fget_obj_count(C.hid_t(C.H5F_OBJ_ALL), C.H5F_OBJ_FILE))
}

func (f *File) id() (C.hid_t, error) {
	if f.f == nil {
		return -1, &Error{Op: "use", Path: f.path, Err: os.ErrClosed}
	}
	return C.hid_t(f.f.ID()), nil
}

// Kind is the kind of an HDF5 object.
type Kind int

// Object kinds.
const (
	KindMissing Kind = iota
	KindGroup
	KindDataset
	KindOther  // named datatypes, soft or external links, ...
	KindBroken // a hard link to an object whose header cannot be read (Members only)
)

func (k Kind) String() string {
	return [...]string{"missing", "group", "dataset", "other", "broken"}[k]
}

// Member is one link in a group.
type Member struct {
	Name string
	Kind Kind
}

// Kind returns the kind of the object at path, Missing if no such link exists.
func (f *File) Kind(path string) (Kind, error) {
	lock()
	defer unlock()
	return f.kindLocked(path)
}

func (f *File) kindLocked(path string) (Kind, error) {
	id, err := f.id()
	if err != nil {
		return KindMissing, err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	switch t := C.vh5_kind(id, cpath); t {
	case -2:
		return KindMissing, nil
	case -1:
		return KindMissing, fail("look up", path, nil)
	case C.H5O_TYPE_GROUP:
		return KindGroup, nil
	case C.H5O_TYPE_DATASET:
		return KindDataset, nil
	default:
		return KindOther, nil
	}
}

// Members lists the links of the group at path in name order. Only hard links to groups
// and datasets are reported as such; everything else is Other.
func (f *File) Members(path string) ([]Member, error) {
	lock()
	defer unlock()
	if _, err := f.id(); err != nil {
		return nil, err
	}
	var fg *hdf5.CommonFG
	if path == "/" {
		fg = &f.f.CommonFG
	} else {
		g, err := f.f.OpenGroup(path)
		if err != nil {
			return nil, fail("open group", path, nil)
		}
		defer g.Close()
		fg = &g.CommonFG
	}
	n, err := fg.NumObjects()
	if err != nil {
		return nil, fail("list group", path, nil)
	}
	out := make([]Member, 0, n)
	for i := uint(0); i < n; i++ {
		name, err := fg.ObjectNameByIndex(i)
		if err != nil {
			return nil, fail("list group", path, nil)
		}
		m := Member{Name: name, Kind: KindOther}
		t, terr := fg.ObjectTypeByIndex(i)
		cchild := C.CString(joinPath(path, name))
		hard := C.vh5_link_is_hard(C.hid_t(f.f.ID()), cchild)
		C.free(unsafe.Pointer(cchild))
		switch {
		case hard == 1 && terr != nil:
			m.Kind = KindBroken // the link is there, the object behind it unreadable
		case hard == 1 && t == hdf5.H5G_GROUP:
			m.Kind = KindGroup
		case hard == 1 && t == hdf5.H5G_DATASET:
			m.Kind = KindDataset
		}
		stackMessage() // a dangling link leaves an error behind; it is not ours to report
		out = append(out, m)
	}
	return out, nil
}

func joinPath(dir, name string) string {
	if dir == "/" || dir == "" {
		return "/" + name
	}
	return dir + "/" + name
}

// ObjectAddr is the file address of the object header at path, read without opening the
// object (opening a virtual dataset makes libhdf5 parse all its mappings).
func (f *File) ObjectAddr(path string) (uint64, error) {
	var addr C.haddr_t
	err := f.pathOp("object address", path, func(id C.hid_t, cpath *C.char) C.int {
		return C.vh5_object_addr_by_name(id, cpath, &addr)
	})
	return uint64(addr), err
}
