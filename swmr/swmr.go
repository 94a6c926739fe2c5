// Package swmr holds what a live (SWMR-reader) mount needs besides libhdf5's own SWMR
// reader (package h5, OpenSWMR): the writer's state read straight from the file — the
// superblock's file consistency flags and the flock another process holds — and bounded
// retries with backoff for operations a concurrent write can make fail.
//
// The superblock is decoded by h5meta.ReadSuperblock (one decoder for the whole program).
// What this package uses of it (HDF5 file format specification, "Superblock"): versions 2
// and 3 have a one-byte File Consistency Flags field at byte 11: bit 0 is set while a
// writer has the file open for write access, bit 2 (version 3 only) while it is open for
// SWMR writing; libhdf5 clears them when the writer closes the file (a crashed writer
// leaves them set until h5clear). A SWMR writer does not keep the End of File Address up
// to date, so a SWMR reader (and a copy of the file) must trust the file's length instead;
// libhdf5's SWMR reader does. Versions 0 and 1 have a 4-byte flags field at byte 20 that
// libhdf5 1.10 and later does not use: for those files (versioned-hdf5 writes version 0)
// only the flock tells that a writer has the file open.
package swmr

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5meta"
)

// Superblock file consistency flags (versions 2 and 3).
const (
	FlagWriteAccess = 0x01
	FlagSWMRWrite   = 0x04
)

// ErrNoSuperblock is returned for a file without an HDF5 signature where one may be.
var ErrNoSuperblock = h5meta.ErrNoSuperblock

// Superblock is what vh5fs reads of a file's superblock; h5meta decodes it.
type Superblock = h5meta.Superblock

// ReadSuperblock finds and decodes the superblock of the open file r, whose length is size.
func ReadSuperblock(r io.ReaderAt, size int64) (Superblock, error) {
	return h5meta.ReadSuperblock(r, size)
}

// Writer is the state of the file's writer, as the file shows it.
type Writer string

// Writer states.
const (
	// WriterSWMR: the superblock's SWMR-write flag is set: a SWMR writer has the file open
	// (or crashed and left the flag set).
	WriterSWMR Writer = "swmr-writing"
	// WriterOpen: a writer has the file open without SWMR (write-access flag, or an
	// exclusive flock held by another process, which is how libhdf5 >= 1.10 marks writers
	// of version 0/1 superblocks unless file locking is switched off).
	WriterOpen Writer = "writing"
	// WriterClosed: no writer has the file open.
	WriterClosed Writer = "closed"
)

// State is a file's writer state, read from the file and /proc/locks.
type State struct {
	Superblock
	Length      int64 // the file's length now (a SWMR writer's EOF lags behind it)
	ForeignLock bool  // another process holds an exclusive flock (or POSIX write lock) on it
}

// Writer derives the writer state.
func (s State) Writer() Writer {
	switch {
	case s.Version >= 3 && s.Flags&FlagSWMRWrite != 0:
		return WriterSWMR
	case s.Version >= 2 && s.Flags&FlagWriteAccess != 0, s.ForeignLock:
		return WriterOpen
	}
	return WriterClosed
}

// ReadState reads f's superblock and looks up exclusive locks other processes hold on it.
func ReadState(f *os.File) (State, error) {
	st, err := f.Stat()
	if err != nil {
		return State{}, err
	}
	sb, err := ReadSuperblock(f, st.Size())
	if err != nil {
		return State{}, err
	}
	s := State{Superblock: sb, Length: st.Size()}
	var ust unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &ust); err == nil {
		s.ForeignLock, _ = foreignWriteLock(uint64(ust.Dev), ust.Ino)
	}
	return s, nil
}

// foreignWriteLock reports whether /proc/locks lists a WRITE lock (flock, POSIX or OFD) on
// the inode held by a process other than this one. Looking never takes a lock itself: even
// a shared flock held for a moment would make a writer's open fail (libhdf5 locks with
// LOCK_NB).
func foreignWriteLock(dev, ino uint64) (bool, error) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return false, err
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	self := strconv.Itoa(os.Getpid())
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 31228 fe:00:9979562 0 EOF"; waiters have "->" after "1:".
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" {
			continue
		}
		if fields[3] == "WRITE" && fields[5] == want && fields[4] != self {
			return true, nil
		}
	}
	return false, sc.Err()
}
