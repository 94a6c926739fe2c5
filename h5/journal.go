package h5

// #include "vh5.h"
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// JournalSuffix names a file's redo journal: FILE.vh5fs-journal, beside it while a commit is
// between its commit point and its end (vh5j_sync.c).
const JournalSuffix = ".vh5fs-journal"

// legacySuffix is the undo journal earlier versions of vh5fs left after a power loss.
const legacySuffix = ".vh5fs-undo"

// ErrInterruptedCommit is returned by Open (read-only) for a file beside which a commit left
// its journal: until recovery the file may hold part of that commit's writes.
var ErrInterruptedCommit = errors.New("a commit was interrupted while writing (its journal FILE" + JournalSuffix +
	" is beside the file): run 'vh5fs fsck --repair FILE' (or mount it read-write) to complete it")

// ErrGuardWithoutJournal is returned by Open for a file that a guarded sync (GuardSync)
// left marked, whose journal is gone: the file holds part of a change that cannot be
// completed.
var ErrGuardWithoutJournal = errors.New("a vh5fs change was interrupted while it was being written in place, and its journal FILE" +
	JournalSuffix + ", which alone can complete it, is gone; the file was left marked as not HDF5 so that no program reads it half changed")

// guardMark is what a guarded sync writes over the file's HDF5 signature while it applies
// (guard_mark in vh5j_sync.c).
const guardMark = "\x89VH5JNL\n"

// GuardMarked reports whether the file at path holds the mark of a guarded sync
// (GuardSync) where libhdf5 looks for the signature (0, 512, 1024, ...).
func GuardMarked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false
	}
	b := make([]byte, len(guardMark))
	for off := int64(0); off+int64(len(b)) <= st.Size(); off = max(512, 2*off) {
		if _, err := f.ReadAt(b, off); err == nil && string(b) == guardMark {
			return true
		}
	}
	return false
}

// ErrJournalConflict is returned by Recover and OpenRW when a journal's commit cannot be
// completed because another program wrote to the file since (or replaced it): nothing was
// written, and the journal stays until the user decides.
var ErrJournalConflict = errors.New("the file changed since a vh5fs commit was interrupted (another program wrote to it, " +
	"or replaced it), so the commit recorded in its journal FILE" + JournalSuffix + " was not completed and the file " +
	"was left as it is: 'vh5fs fsck --repair --discard-journal FILE' drops the journal and that commit with it")

// ErrLegacyJournal is returned by OpenRW for a file beside which an earlier vh5fs left its
// undo journal: only an explicit repair rolls it back.
var ErrLegacyJournal = errors.New("an earlier vh5fs's commit was interrupted (its undo journal FILE" + legacySuffix +
	" is beside the file): run 'vh5fs fsck --repair FILE' to roll that commit back")

// ErrStopped wraps every write to a file whose journal driver stopped after an I/O error:
// nothing more is written until the file is opened again (which recovers it).
var ErrStopped = errors.New("an earlier write to the file failed; nothing more is written to it until it is recovered " +
	"(unmount and mount again, or 'vh5fs fsck --repair FILE')")

// Recovery is what Recover did.
type Recovery int

// Recover's outcomes.
const (
	RecoveryNone       Recovery = iota // no journal
	RecoveryIncomplete                 // a journal cut short before its commit point: removed, file untouched
	RecoveryReplayed                   // the commit was completed from its journal
	RecoveryApplied                    // the commit had been completed; its journal was removed
	RecoveryRolledBack                 // an earlier vh5fs's undo journal was rolled back
)

func (r Recovery) String() string {
	return [...]string{
		"no interrupted commit",
		"removed the journal of a commit that was interrupted before its commit point (the file was not changed)",
		"completed a commit that was interrupted after its commit point",
		"removed the journal of a commit that had completed",
		"rolled back a commit that an earlier vh5fs interrupted",
	}[r]
}

// Recover finishes a commit that was interrupted (the process killed, the machine stopped)
// from the journal it left beside path, rolling it forward, and reports what it did. A
// journal whose file changed since is left alone: ErrJournalConflict. An undo journal of an
// earlier vh5fs is rolled back. OpenRW recovers the same way, except for the latter.
func Recover(path string) (Recovery, error) {
	return recoverJournal(path, true)
}

// DiscardJournal removes path's journal without acting on it, and reports whether there
// was one: the commit it records is dropped.
func DiscardJournal(path string) (bool, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	rc, err := C.vh5j_discard(cpath)
	if rc < 0 {
		return false, &Error{Op: "remove the journal of", Path: path, Err: err}
	}
	return rc == 1, nil
}

func recoverJournal(path string, legacy bool) (Recovery, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	return recoverLocked(path, cpath, legacy)
}

func recoverLocked(path string, cpath *C.char, legacy bool) (Recovery, error) {
	l := C.int(0)
	if legacy {
		l = 1
	}
	rc, err := C.vh5j_recover(cpath, l)
	switch rc {
	case C.VH5J_NONE:
		return RecoveryNone, nil
	case C.VH5J_INCOMPLETE:
		return RecoveryIncomplete, nil
	case C.VH5J_REPLAYED:
		return RecoveryReplayed, nil
	case C.VH5J_APPLIED:
		return RecoveryApplied, nil
	case C.VH5J_ROLLED_BACK:
		return RecoveryRolledBack, nil
	case C.VH5J_CHANGED:
		return RecoveryNone, journalError(path, ErrJournalConflict)
	case C.VH5J_LEGACY:
		return RecoveryNone, journalError(path, ErrLegacyJournal)
	}
	return RecoveryNone, fmt.Errorf("%s: cannot complete the interrupted commit its journal %s records: %w", path, path+JournalSuffix, err)
}

// journalError is err about the file at path, which its message names where it says FILE.
func journalError(path string, err error) error { return &fileError{path, err} }

type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string {
	return e.path + ": " + strings.ReplaceAll(e.err.Error(), "FILE", e.path)
}
func (e *fileError) Unwrap() error { return e.err }

// A sync's steps (vh5j_sync.c), for fault injection in tests.
type syncStep int

const (
	stepTail    syncStep = C.VH5J_TAIL
	stepFsync   syncStep = C.VH5J_FSYNC
	stepJournal syncStep = C.VH5J_JOURNAL
	stepJsync   syncStep = C.VH5J_JSYNC
	stepDirsync syncStep = C.VH5J_DIRSYNC
	stepGuard   syncStep = C.VH5J_GUARD
	stepApply   syncStep = C.VH5J_APPLY
	stepBsync   syncStep = C.VH5J_BSYNC
	stepPublish syncStep = C.VH5J_PUBLISH
	stepAsync   syncStep = C.VH5J_ASYNC
	stepUnguard syncStep = C.VH5J_UNGUARD
	stepRemove  syncStep = C.VH5J_REMOVE
	stepDone    syncStep = C.VH5J_DONE
)

// fault makes a sync fail at step (EIO), or stop there as a killed process would (crash).
type fault struct {
	step  syncStep
	crash bool
}

// syncState orders syncs of one file: they run one at a time, and Close waits for them.
type syncState struct {
	mu        sync.Mutex  // taken before the HDF5 lock; held for a whole FlushSync
	applyLock sync.Locker // taken around the apply step; GUARDED_BY(mu)
	fault     *fault      // for tests; GUARDED_BY(mu)
}

// InjectSyncFault makes the next FlushSync fail (EIO) at step, or, with crash, stop before
// it as a killed process would: for tests of recovery. The steps are named as in
// vh5j_sync.c: tail, fsync, journal, jsync, dirsync, apply, async, remove.
func (f *File) InjectSyncFault(step string, crash bool) error {
	for s, name := range steps {
		if name.id == step {
			f.sync.mu.Lock()
			f.sync.fault = &fault{s, crash}
			f.sync.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("h5: no sync step %q", step)
}

// FlushBody flushes HDF5's buffers and marks what was written so far as the body of the
// next FlushSync: the sync makes it durable on the file before anything written from now
// on (a version's committed flag, current_version) reaches the file's old bytes, so that
// no reader, of any program and at any crash, meets a version shown as committed whose
// bytes are not all in place. It costs the sync one more fsync.
func (f *File) FlushBody() error {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	if err := f.flushLocked(id); err != nil || !f.rw {
		return err
	}
	if rc, errno := C.vh5j_mark_publish(id); rc < 0 {
		return &Error{Op: "mark the publish of", Path: f.path, Err: errno}
	}
	return nil
}

// GuardSync makes the next FlushSync a guarded one: from its commit point until its apply
// is durable, the file's HDF5 signature is replaced by a mark (vh5j_sync.c), so that a
// program that does not know the journal finds no HDF5 file rather than one half changed,
// and a crash in between leaves it so until recovery (the next read-write open, or 'vh5fs
// fsck --repair'). For changes whose half-applied state no order of writes keeps readable:
// a deletion's compaction, a rename, a rewrite of a dataset's storage. It costs the sync
// two writes and two fsyncs.
func (f *File) GuardSync() error {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil || !f.rw {
		return err
	}
	if rc, errno := C.vh5j_guard(id); rc < 0 {
		return &Error{Op: "guard the sync of", Path: f.path, Err: errno}
	}
	return nil
}

// SetApplyLock makes FlushSync hold l while it writes the journaled bytes over the file's
// old ones (the body, then, after an fsync without l, the publish), the only moments the
// bytes of the file's durable state change: whoever reads those bytes without libhdf5
// takes l to see each state whole (before the sync, with the body, after it).
func (f *File) SetApplyLock(l sync.Locker) {
	f.sync.mu.Lock()
	f.sync.applyLock = l
	f.sync.mu.Unlock()
}

// StartWriteback asks the kernel to begin writing the file's dirty pages to disk now and
// returns without waiting for them: what a commit appends past the durable end goes to
// the file at once (writes over the durable state are held until the sync, so
// they are not among these pages), and writing it back while the commit goes on leaves
// the sync's fsync less to wait for. Crash safety is unchanged: the kernel may write those
// pages back at any time anyway. The HDF5 lock is held only to find the descriptor.
func (f *File) StartWriteback() error {
	lock()
	id, err := f.id()
	fd, errno := C.int(-1), error(nil)
	if err == nil {
		fd, errno = C.vh5j_dup_fd(id)
	}
	unlock()
	if err != nil {
		return err
	}
	if fd < 0 {
		return &Error{Op: "writeback", Path: f.path, Err: errno}
	}
	defer syscall.Close(int(fd))
	if err := unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return &Error{Op: "writeback", Path: f.path, Err: err}
	}
	return nil
}

// FlushSync flushes HDF5's buffers and makes what was written durable: through the redo
// journal for files opened with OpenRW (see vh5j_sync.c), else with an fsync. The HDF5
// lock is held to flush and to plan the sync, not across its fsyncs: other goroutines read
// the file through libhdf5 meanwhile, seeing the new state. An error before the commit
// point leaves the file on disk at its last commit; any error stops further writes to the
// file (ErrStopped). A journal that cannot be removed once the commit is durable is logged,
// not an error: the next sync replaces it, and recovery finds it applied.
func (f *File) FlushSync() error {
	f.sync.mu.Lock()
	defer f.sync.mu.Unlock()
	s, err := f.beginSync()
	if err != nil || s == nil {
		return err
	}
	defer func() {
		lock()
		C.vh5j_sync_end(s)
		unlock()
	}()
	for {
		step := syncStep(C.vh5j_step_next(s))
		// The body and the publish each change the durable bytes whole under the lock; the
		// fsync between them runs without it (the state after the body is one readers may see).
		locked := (step == stepApply || step == stepPublish) && f.sync.applyLock != nil
		if locked {
			f.sync.applyLock.Lock()
		}
		rc, errno := C.vh5j_step(s)
		if locked {
			f.sync.applyLock.Unlock()
		}
		switch {
		case rc == C.VH5J_DONE:
			return nil
		case rc == -2: // the journal's removal; the commit is durable
			slog.Warn("the commit is durable, but its journal stays until the next sync or recovery",
				"journal", f.path+JournalSuffix, "err", errno)
			return nil
		case rc < 0:
			return f.syncError(step, C.vh5j_committed(s) != 0, errno)
		}
	}
}

// beginSync flushes and plans the sync under the HDF5 lock: nil (and no error) for a file
// not open through the journal driver, which it fsyncs.
func (f *File) beginSync() (*C.vh5j_sync, error) {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return nil, err
	}
	if err := f.flushLocked(id); err != nil {
		return nil, err
	}
	if !f.rw {
		if rc, errno := C.vh5j_fsync(id); rc < 0 {
			return nil, &Error{Op: "fsync", Path: f.path, Err: errno}
		}
		return nil, nil
	}
	s, errno := C.vh5j_sync_begin_file(id)
	if s == nil {
		return nil, f.stopped(errno)
	}
	if ft := f.sync.fault; ft != nil {
		C.vh5j_set_fault(s, C.int(ft.step), boolInt(ft.crash))
	}
	return s, nil
}

// flushLocked writes libhdf5's buffers of file id (f's) through its driver, under the HDF5
// lock: ErrStopped once the driver has stopped.
func (f *File) flushLocked(id C.hid_t) error {
	if errno := C.vh5j_failed(id); errno != 0 {
		return f.stopped(syscall.Errno(errno))
	}
	if C.H5Fflush(id, C.H5F_SCOPE_GLOBAL) < 0 {
		if errno := C.vh5j_failed(id); errno != 0 {
			return f.stopped(syscall.Errno(errno))
		}
		return fail("flush", f.path, nil)
	}
	return nil
}

// syncError is the error of a sync that failed at step: the step, the system call and
// the path it failed on, and what the file holds now.
func (f *File) syncError(step syncStep, committed bool, errno error) error {
	what := "before its commit point: the file on disk is as the last commit left it"
	if committed {
		what = "after its commit point: the commit is recorded in " + f.path + JournalSuffix +
			" and completed when the file is next opened read-write (or by 'vh5fs fsck --repair')"
	}
	st := steps[step]
	target := f.path
	switch st.on {
	case onJournal:
		target += JournalSuffix
	case onDir:
		target = filepath.Dir(target)
	}
	return &Error{Op: "commit to", Path: f.path, Err: syncFailed{fmt.Errorf(
		"its sync failed at its %s step (%s %s: %w), %s; nothing more is written to the file until it is recovered "+
			"(unmount and mount again, or 'vh5fs fsck --repair %s')", st.what, st.call, target, errno, what, f.path)}}
}

// syncFailed is the failure that stops a file's driver: ErrStopped, in its own words.
type syncFailed struct{ error }

func (e syncFailed) Is(target error) bool { return target == ErrStopped }

// Stopped returns ErrStopped (wrapped) once the file's journal driver has stopped, nil
// while it works: a commit asks first, since every object it would create could no longer
// be closed (a close writes) and would stay open until the process ends.
func (f *File) Stopped() error {
	lock()
	defer unlock()
	if f.f == nil {
		return nil
	}
	if errno := C.vh5j_failed(C.hid_t(f.f.ID())); errno != 0 {
		return f.stopped(syscall.Errno(errno))
	}
	return nil
}

func (f *File) stopped(errno error) error {
	return &Error{Op: "write", Path: f.path, Err: fmt.Errorf("%w (%v)", ErrStopped, errno)}
}

// What a step's system calls work on.
const (
	onFile = iota
	onJournal
	onDir
)

// steps names each step: id as InjectSyncFault takes it, what for messages, and the system
// call that may fail in it and on what.
var steps = map[syncStep]struct {
	id, what, call string
	on             int
}{
	stepTail: {"tail", "write", "write", onFile}, stepFsync: {"fsync", "fsync", "fsync", onFile},
	stepJournal: {"journal", "journal write", "create", onJournal}, stepJsync: {"jsync", "journal fsync", "fsync", onJournal},
	stepDirsync: {"dirsync", "directory fsync", "fsync the directory", onDir}, stepApply: {"apply", "apply", "write", onFile},
	stepBsync: {"bsync", "fsync before publishing", "fsync", onFile}, stepPublish: {"publish", "publish", "write", onFile},
	stepAsync: {"async", "final fsync", "fsync", onFile}, stepRemove: {"remove", "journal removal", "remove", onJournal},
	stepGuard: {"guard", "guard", "write", onFile}, stepUnguard: {"unguard", "unguard", "write", onFile},
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// setHoldBudget makes f's journal driver keep at most budget bytes of held writes in
// memory, the rest in its spill file, and, with piece > 0, its syncs stream their bytes
// piece bytes at a time (vh5j_recover.c): for tests.
func (f *File) setHoldBudget(budget, piece int) error {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return err
	}
	if rc, errno := C.vh5j_set_hold_budget(id, C.size_t(budget), C.size_t(piece)); rc < 0 {
		return &Error{Op: "set the hold budget of", Path: f.path, Err: errno}
	}
	return nil
}

// spilled flushes libhdf5's buffers of f and reports how many bytes of held writes its
// journal driver has written to its spill file since the open, and how many it holds in
// memory now: for tests.
func (f *File) spilled() (spilled uint64, held int, err error) {
	lock()
	defer unlock()
	id, err := f.id()
	if err == nil {
		err = f.flushLocked(id)
	}
	if err != nil {
		return 0, 0, err
	}
	var h C.size_t
	s := C.vh5j_spilled(id, &h)
	return uint64(s), int(h), nil
}

// setRecoverPiece makes recovery read and write piece bytes at a time (0: the default):
// for tests.
func setRecoverPiece(piece int) {
	lock()
	defer unlock()
	C.vh5j_set_recover_piece(C.size_t(piece))
}
