package main

// What a read-write mount needs of the file, checked before anything opens it for writing.
// libhdf5's read-write open writes to the file at once, and a commit then needs its
// journal beside the file: a mount that cannot commit would otherwise come up, append to
// the file, and fail every fsync and close with EIO. Each check uses the caller's own
// rights (root's included), as the mount will.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/stagedir"
)

// orReadOnly ends every refusal: the mount that needs none of this.
const orReadOnly = "or mount read-only (-o ro)"

// checkWritable returns nil when a read-write mount of file can commit: its filesystem is
// not mounted read-only, the file opens for writing and takes an exclusive lock, and its
// directory takes the commit's journal (FILE.vh5fs-journal) and the stages directory
// (.FILE.vh5fs-stages). Else it returns one line naming what is missing and the fix. A
// file that cannot be stat'ed, or is not a regular file, is left to the open to report.
func checkWritable(file string) error {
	st, err := os.Stat(file)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	if err := checkReadOnlyFS(file); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return openForWritingError(file, st, err)
	}
	defer f.Close()
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := checkDirWritable(dir); err != nil {
		base := filepath.Base(file)
		return fmt.Errorf("%s: directory %s %v: a read-write mount writes its commit journal (%s) and stages (%s) "+
			"beside the file; make the directory writable, move the file to one that is, %s",
			file, dir, err, base+h5.JournalSuffix, filepath.Base(stagedir.Of(file)), orReadOnly)
	}
	if stages := stagedir.Of(file); dirExists(stages) {
		if err := checkDirWritable(stages); err != nil {
			return fmt.Errorf("%s: stages directory %s %v: a read-write mount keeps its stages there; "+
				"make it writable, %s", file, stages, err, orReadOnly)
		}
	}
	return checkLockable(file, f)
}

// checkReadOnlyFS refuses a file whose filesystem is mounted read-only, naming the mount.
func checkReadOnlyFS(file string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(file, &fs); err != nil || fs.Flags&unix.ST_RDONLY == 0 {
		return nil
	}
	return readOnlyFSError(file)
}

func readOnlyFSError(file string) error {
	where := "its filesystem is"
	if m, ok := mountContaining(file); ok {
		where = fmt.Sprintf("its filesystem (%s, mounted at %s) is", m.fstype, m.point)
	}
	return fmt.Errorf("%s: %s read-only: a read-write mount writes new versions into the file; "+
		"remount the filesystem read-write, %s", file, where, orReadOnly)
}

// openForWritingError explains why file, which exists, does not open for writing.
func openForWritingError(file string, st os.FileInfo, err error) error {
	switch {
	case errors.Is(err, unix.EROFS):
		return readOnlyFSError(file)
	case errors.Is(err, unix.EACCES):
		owner := ""
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner = fmt.Sprintf(", owner uid %d", sys.Uid)
		}
		return fmt.Errorf("%s: not writable by uid %d (mode %04o%s): a read-write mount writes new versions into "+
			"the file; make it writable (chmod, chown), %s", file, os.Geteuid(), st.Mode().Perm(), owner, orReadOnly)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%s: opening it for writing: operation not permitted (immutable or append-only? see lsattr): "+
			"a read-write mount writes new versions into the file; %s", file, orReadOnly)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is the file's, named already
	}
	return fmt.Errorf("%s: opening it for writing: %w", file, err)
}

// checkDirWritable reports how dir fails to let the caller create and remove files in it.
func checkDirWritable(dir string) error {
	err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("not writable by uid %d", os.Geteuid())
	case errors.Is(err, unix.EROFS):
		return errors.New("on a read-only filesystem")
	}
	return fmt.Errorf("not usable: %w", err)
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// checkLockable takes and drops the exclusive lock libhdf5 will take (a flock, which the
// journal driver skips where flock(2) is not implemented at all). The probe is no more
// than the open itself does a moment later, and tells a holder from a filesystem that
// refuses locks. HDF5_USE_FILE_LOCKING=FALSE turns libhdf5's locking off, and the probe.
func checkLockable(file string, f *os.File) error {
	if v := strings.ToUpper(os.Getenv("HDF5_USE_FILE_LOCKING")); v == "FALSE" || v == "0" {
		return nil
	}
	fd := int(f.Fd())
	err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		unix.Flock(fd, unix.LOCK_UN)
		return nil
	case errors.Is(err, unix.ENOSYS):
		return nil
	case errors.Is(err, unix.EWOULDBLOCK):
		if h, ok := conflictingHolder(file, true); ok {
			return errors.New(lockConflictMessage(file, h, true))
		}
		return fmt.Errorf("%s: another process holds a lock on the file: a read-write open needs the file to itself; "+
			"close it there first, %s", file, orReadOnly)
	}
	return fmt.Errorf("%s: cannot be locked (%v): a read-write mount holds the file's exclusive lock so that no "+
		"other HDF5 program writes it meanwhile; move the file to a filesystem that supports flock(2), %s",
		file, err, orReadOnly)
}

// mountContaining returns the mount that path (resolved) lies on: the deepest mount point
// above it, the last mounted there.
func mountContaining(path string) (mountEntry, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return mountEntry{}, false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	var found mountEntry
	ok := false
	for _, m := range mountTable() {
		if !within(abs, m.point) || (ok && len(m.point) < len(found.point)) {
			continue
		}
		found, ok = m, true
	}
	return found, ok
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}
