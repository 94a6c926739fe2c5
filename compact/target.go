package compact

// Where a compaction reads and writes. Everything that can be told about the paths is
// checked before the copy (which can take minutes), and each refusal names the path at
// fault: a missing directory of -o's OUT is not the input file's problem. The file a
// compaction replaces gets a new inode, so whoever has the old one open goes on with it:
// the replaced file is asked about its holders (Options.InUse) before the copy and again
// under its exclusive lock, and is checked unchanged before the rename.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/durable"
	"github.com/vh5fs/vh5fs/stagedir"
)

// target is a compaction's source and destination, resolved and checked.
type target struct {
	file    string      // the file compacted, symbolic links resolved
	st      os.FileInfo // its status when the compaction began
	out     string      // the file written: file itself in place, else Out resolved
	inPlace bool
	// replaced is the status of the file the rename replaces when the compaction began
	// (file in place, an existing Out with Force); nil when Out is new.
	replaced os.FileInfo
}

// resolve follows symbolic links of path and out (a link stays a link, its target is
// replaced) and refuses what compact cannot do without surprise: a file with several
// hard links in place (only one name would get the new file), an existing out without
// force, an out that is a directory or lies in none, a directory it cannot write in.
func resolve(path, out string, force bool) (target, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return target{}, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return target{}, err
	}
	if !st.Mode().IsRegular() {
		return target{}, fmt.Errorf("%s: not a regular file", path)
	}
	t := target{file: real, st: st}
	if out != "" {
		if err := t.resolveOut(path, out, force); err != nil {
			return target{}, err
		}
	}
	if t.out == "" { // in place
		t.out, t.inPlace, t.replaced = real, true, st
		if n := links(st); n > 1 {
			return target{}, fmt.Errorf("%s: has %d hard links, and compacting replaces the file with a new one, which "+
				"the other names would not get: remove the other links first, or compact to another file (-o OUT)", path, n)
		}
	}
	dir := filepath.Dir(t.out)
	if err := writableDir(dir); err != nil {
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			dir = abs
		}
		if t.inPlace {
			return target{}, fmt.Errorf("%s: directory %s %v: compact writes the new file beside the old one (%s) "+
				"and renames it over; -o OUT writes it elsewhere", path, dir, err, filepath.Base(tmpName(t.out)))
		}
		return target{}, fmt.Errorf("-o %s: directory %s %v", out, dir, err)
	}
	return t, nil
}

// resolveOut sets t.out (and t.replaced) for -o out, or leaves t.out "" when out names
// the file itself.
func (t *target) resolveOut(path, out string, force bool) error {
	dst := out
	if lst, err := os.Lstat(out); err == nil && lst.Mode()&os.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(out)
		if err != nil {
			to, _ := os.Readlink(out)
			return fmt.Errorf("-o %s: a symbolic link to %s, which cannot be followed: %v", out, to, unwrapPath(err))
		}
		dst = real
	}
	ost, err := os.Stat(dst)
	switch {
	case err == nil && os.SameFile(ost, t.st):
		return nil // the file itself: in place
	case err == nil && ost.IsDir():
		return fmt.Errorf("-o %s: is a directory: name the file to write (-o %s)", out, filepath.Join(out, filepath.Base(path)))
	case err == nil && !ost.Mode().IsRegular():
		return fmt.Errorf("-o %s: exists and is not a regular file", out)
	case err == nil && !force:
		return fmt.Errorf("-o %s: exists: add --force to replace it", out)
	case err == nil:
		if n := links(ost); n > 1 {
			return fmt.Errorf("-o %s: has %d hard links, and the copy replaces it with a new file, which the other "+
				"names would not get: remove the other links first, or write to another name", out, n)
		}
		t.out, t.replaced = dst, ost
		return besideOut(out, dst)
	}
	dir := filepath.Dir(dst)
	dst2, derr := os.Stat(dir)
	switch {
	case errors.Is(derr, os.ErrNotExist):
		return fmt.Errorf("-o %s: no such directory %s", out, dir)
	case derr != nil:
		return fmt.Errorf("-o %s: directory %s: %v", out, dir, unwrapPath(derr))
	case !dst2.IsDir():
		return fmt.Errorf("-o %s: %s is not a directory", out, dir)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("-o %s: %v", out, unwrapPath(err))
	}
	t.out = dst
	return besideOut(out, dst)
}

// besideOut refuses an out (resolved: dst) that has what belongs to another file beside
// it: a journal of an interrupted change, which would be recovered onto the copy, or
// saved stages, which record another file's raw_data slots.
func besideOut(out, dst string) error {
	if _, err := os.Lstat(dst + h5.JournalSuffix); err == nil {
		return fmt.Errorf("-o %s: the journal of an interrupted vh5fs change (%s) is beside it: "+
			"run 'vh5fs fsck --repair %s' or remove the journal first", out, dst+h5.JournalSuffix, out)
	}
	if ss, err := stagedir.List(dst); err == nil && len(ss) > 0 {
		return fmt.Errorf("-o %s: stage %s is saved beside it (%s), whose raw_data slots are another file's: "+
			"commit or remove the stages first, or write elsewhere", out, ss[0].Name, stagedir.Of(dst))
	}
	return nil
}

// writableDir reports how dir fails to let the caller create and rename files in it.
func writableDir(dir string) error {
	err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES):
		return fmt.Errorf("is not writable by uid %d", os.Geteuid())
	case errors.Is(err, unix.EROFS):
		return errors.New("is on a read-only filesystem")
	}
	return fmt.Errorf("is not usable: %v", err)
}

// publish gives tmp the compacted file's mode (and owner, where allowed) and renames it
// to t.out, then fsyncs the directory: the commit point. A new out is never created over
// a file that appeared meanwhile; a replaced one is renamed over under its exclusive
// lock (lockReplaced).
func (t target) publish(tmp string, inUse func(string) error) error {
	if err := os.Chmod(tmp, t.st.Mode().Perm()); err != nil {
		return err
	}
	if sys, ok := t.st.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(tmp, int(sys.Uid), int(sys.Gid)); err != nil && !errors.Is(err, os.ErrPermission) {
			return err
		}
	}
	if t.replaced == nil {
		if err := renameNoReplace(tmp, t.out); err != nil {
			return err
		}
		return durable.Sync(filepath.Dir(t.out))
	}
	if inUse != nil {
		if err := inUse(t.out); err != nil {
			return err
		}
	}
	unlock, err := t.lockReplaced(inUse)
	if err != nil {
		return err
	}
	err = os.Rename(tmp, t.out)
	unlock()
	if err != nil {
		return err
	}
	return durable.Sync(filepath.Dir(t.out))
}

// lockReplaced takes the exclusive lock on the file the rename replaces, so that no HDF5
// program (which locks every file it opens) holds or opens it until the rename, and
// checks that it is still the file the compaction began with, unchanged. The lock is held
// for no more than the rename: an HDF5 open meanwhile fails at once.
func (t target) lockReplaced(inUse func(string) error) (unlock func(), err error) {
	f, err := os.Open(t.out)
	if err != nil {
		return nil, err
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil, errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		// Locked, or a filesystem without flock(2), where no HDF5 program locks either.
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		if inUse != nil {
			if err := inUse(t.out); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("%s: another process locked the file while it was being compacted; nothing replaced", t.out)
	default:
		f.Close()
		return nil, fmt.Errorf("%s: locking it for the rename: %w", t.out, err)
	}
	now, err := os.Stat(t.out)
	if err != nil || !unchanged(t.replaced, now) {
		f.Close()
		return nil, fmt.Errorf("%s: changed while it was being compacted (another program wrote, replaced or "+
			"re-linked it): nothing replaced; compact it again", t.out)
	}
	return func() { f.Close() }, nil // closing drops the lock
}

// unchanged reports whether b is the same file as a, with the same contents as far as
// its size and times tell (a write moves the modification time, a chmod, link or
// rename the change time).
func unchanged(a, b os.FileInfo) bool {
	x, ok1 := a.Sys().(*syscall.Stat_t)
	y, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && x.Dev == y.Dev && x.Ino == y.Ino && x.Size == y.Size && x.Nlink == y.Nlink &&
		x.Mtim == y.Mtim && x.Ctim == y.Ctim
}

// renameNoReplace renames tmp to out unless out exists (created since it was checked).
func renameNoReplace(tmp, out string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, out, unix.RENAME_NOREPLACE)
	switch {
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("-o %s: created by another program while compacting; nothing written (--force replaces it)", out)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return os.Rename(tmp, out) // a filesystem without RENAME_NOREPLACE
	}
	return err
}

func links(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Nlink)
	}
	return 1
}

// tmpName is the file a compaction writes beside out before it renames it.
func tmpName(out string) string {
	return filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".vh5fs-compact")
}

// unwrapPath drops an *os.PathError's path, which the message names already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
