package main

// Who holds a file's lock. libhdf5 flocks every file it opens (shared read-only, exclusive
// read-write) with LOCK_NB, so an open that meets a conflicting lock fails at once; its
// error stack says "errno = 11" at best and nothing at all through the journal driver.
// /proc/locks names the holder without taking a lock (a probe lock, however brief, could
// itself fail another process's open). An operation that replaces the file needs more:
// every process with the file open, locked or not (HDF5_USE_FILE_LOCKING=FALSE, a SWMR
// writer, which drops its lock once started), which /proc/PID/fd and /proc/PID/maps tell.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockHolder is a process holding a lock on the file, or (otherHolders) having it open.
type lockHolder struct {
	pid       int
	exclusive bool   // a WRITE lock (libhdf5's read-write open)
	writing   bool   // open for writing: a WRITE lock, a descriptor or a shared mapping
	comm      string // the process's name
	mountedAt string // the mount point it serves, when it is a vh5fs mount
}

// conflictingHolder returns a process other than this one whose lock on path conflicts
// with the open asked for (exclusive: read-write), preferring a vh5fs mount.
func conflictingHolder(path string, exclusive bool) (lockHolder, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return lockHolder{}, false
	}
	holders, err := lockHolders(uint64(st.Dev), st.Ino)
	if err != nil {
		return lockHolder{}, false
	}
	var found []lockHolder
	for _, h := range holders {
		if h.pid == os.Getpid() || !(exclusive || h.exclusive) {
			continue
		}
		h.comm = strings.TrimSpace(readProc(h.pid, "comm"))
		h.mountedAt = vh5fsMountpoint(h.pid)
		if h.mountedAt != "" {
			return h, true
		}
		found = append(found, h)
	}
	if len(found) == 0 {
		return lockHolder{}, false
	}
	return found[0], true
}

// otherHolders lists the processes other than this one that have the file at path open
// (those this process may look into: all, for root), in pid order, named: the holders
// of its locks, and those with a descriptor or mapping of it.
func otherHolders(path string) []lockHolder {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil
	}
	dev, ino := uint64(st.Dev), st.Ino
	byPid := map[int]*lockHolder{}
	add := func(h lockHolder) {
		if h.pid == os.Getpid() {
			return
		}
		if old, ok := byPid[h.pid]; ok {
			old.exclusive = old.exclusive || h.exclusive
			old.writing = old.writing || h.writing
			return
		}
		byPid[h.pid] = &h
	}
	locks, _ := lockHolders(dev, ino)
	for _, h := range locks {
		h.writing = h.exclusive
		add(h)
	}
	if abs, err := filepath.Abs(path); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		for _, h := range openers(abs, dev, ino) {
			add(h)
		}
	}
	hs := make([]lockHolder, 0, len(byPid))
	for _, h := range byPid {
		h.comm = strings.TrimSpace(readProc(h.pid, "comm"))
		h.mountedAt = vh5fsMountpoint(h.pid)
		hs = append(hs, *h)
	}
	slices.SortFunc(hs, func(a, b lockHolder) int { return a.pid - b.pid })
	return hs
}

// openers lists the processes with a descriptor or a mapping of the file (dev, ino) whose
// resolved path is abs. A descriptor's link is compared by name before it is stat'ed (a
// stat of another file through /proc/PID/fd could wait on a hung FUSE server); a
// mapping's line gives the device and inode.
func openers(abs string, dev, ino uint64) []lockHolder {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mapDev := fmt.Sprintf("%02x:%02x", unix.Major(dev), unix.Minor(dev))
	var hs []lockHolder
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		h := lockHolder{pid: pid}
		found := false
		fdDir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, _ := os.ReadDir(fdDir)
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err != nil || link != abs {
				continue
			}
			var fst unix.Stat_t
			if unix.Stat(filepath.Join(fdDir, fd.Name()), &fst) != nil || uint64(fst.Dev) != dev || fst.Ino != ino {
				continue
			}
			found = true
			h.writing = h.writing || fdWriting(pid, fd.Name())
		}
		for _, line := range strings.Split(readProc(pid, "maps"), "\n") {
			// "7f2c..-7f2c.. rw-s 00000000 fe:00 9979057  /data/a.h5"
			f := strings.Fields(line)
			if len(f) < 6 || f[3] != mapDev || f[4] != strconv.FormatUint(ino, 10) {
				continue
			}
			found = true
			h.writing = h.writing || (strings.Contains(f[1], "w") && strings.Contains(f[1], "s"))
		}
		if found {
			hs = append(hs, h)
		}
	}
	return hs
}

// fdWriting reports whether pid's descriptor fd was opened for writing (its fdinfo flags).
func fdWriting(pid int, fd string) bool {
	for _, line := range strings.Split(readProc(pid, "fdinfo/"+fd), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_ACCMODE != unix.O_RDONLY
		}
	}
	return false
}

// checkAlone returns nil when no other process has file open, else one line naming each
// (pid and name, a vh5fs mount by its mount point) and how to let go of it; effect says
// what the caller's operation would do to them.
func checkAlone(file, effect string) error {
	hs := otherHolders(file)
	if len(hs) == 0 {
		return nil
	}
	names := make([]string, len(hs))
	var umounts []string
	others := false
	for i, h := range hs {
		names[i] = h.String()
		if h.mountedAt != "" {
			umounts = append(umounts, "umount "+h.mountedAt)
		} else {
			others = true
		}
	}
	var fix string
	switch {
	case len(umounts) == 0:
		fix = "close it there first"
	case others:
		fix = "unmount (" + strings.Join(umounts, "; ") + ") and close it in the others first"
	default:
		fix = "unmount first (" + strings.Join(umounts, "; ") + ")"
	}
	who := "another process"
	if len(hs) > 1 {
		who = fmt.Sprintf("%d other processes", len(hs))
	}
	return fmt.Errorf("%s: open in %s: %s; %s: %s", file, who, strings.Join(names, ", "), effect, fix)
}

// String names the holder for a message: "the read-only vh5fs mount at /mnt (pid 12)",
// "python3 (pid 40, open for reading)".
func (h lockHolder) String() string {
	if h.mountedAt != "" {
		mode := "read-only"
		if h.writing {
			mode = "read-write"
		}
		return fmt.Sprintf("the %s vh5fs mount at %s (pid %d)", mode, h.mountedAt, h.pid)
	}
	mode := "reading"
	if h.writing {
		mode = "writing"
	}
	return fmt.Sprintf("%s (pid %d, open for %s)", orUnknown(h.comm), h.pid, mode)
}

// lockHolders lists the locks /proc/locks shows on the inode (waiters left out).
func lockHolders(dev, ino uint64) ([]lockHolder, error) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	var hs []lockHolder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 31228 fe:00:9979562 0 EOF"; waiters have "->" after "1:".
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[5] != want {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil {
			continue
		}
		hs = append(hs, lockHolder{pid: pid, exclusive: fields[3] == "WRITE"})
	}
	return hs, sc.Err()
}

func readProc(pid int, name string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return ""
	}
	return string(b)
}

// vh5fsMountpoint returns the mount point pid serves when it is `vh5fs mount ... MNT` (the
// foreground form, which the fstab form's daemon runs too) and MNT is mounted, else "".
func vh5fsMountpoint(pid int) string {
	args := strings.Split(strings.TrimRight(readProc(pid, "cmdline"), "\x00"), "\x00")
	if len(args) < 4 || args[1] != "mount" || !strings.HasPrefix(filepath.Base(args[0]), "vh5fs") {
		return ""
	}
	mnt := args[len(args)-1]
	if !filepath.IsAbs(mnt) {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil {
			return ""
		}
		mnt = filepath.Join(cwd, mnt)
	}
	if _, ok := mountAt(mnt); !ok {
		return ""
	}
	return mnt
}

// mountEntry is a line of /proc/self/mountinfo.
type mountEntry struct {
	point, fstype, source string
}

// mountAt returns the mount whose mount point is dir (the last one, which is what dir shows).
func mountAt(dir string) (mountEntry, bool) {
	var found mountEntry
	ok := false
	for _, m := range mountTable() {
		if m.point == dir {
			found, ok = m, true
		}
	}
	return found, ok
}

// mountTable lists /proc/self/mountinfo's mounts in its order (nil if it cannot be read).
func mountTable() []mountEntry {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
		pre, post, cut := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !cut || len(fields) < 5 || len(tail) < 2 {
			continue
		}
		ms = append(ms, mountEntry{point: unescapeMountinfo(fields[4]), fstype: tail[0], source: unescapeMountinfo(tail[1])})
	}
	return ms
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for a space, ...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lockConflictMessage says who holds file and what to do, for an open that asked for
// exclusive (read-write) or shared access.
func lockConflictMessage(file string, h lockHolder, exclusive bool) string {
	switch {
	case h.mountedAt != "" && h.exclusive:
		return fmt.Sprintf("%s: in use by the read-write vh5fs mount at %s (pid %d), which holds its lock: "+
			"read through that mount, or unmount it first (umount %s)", file, h.mountedAt, h.pid, h.mountedAt)
	case h.mountedAt != "":
		return fmt.Sprintf("%s: in use by the read-only vh5fs mount at %s (pid %d): a read-write open needs "+
			"the file to itself; unmount that first (umount %s), or mount read-only", file, h.mountedAt, h.pid, h.mountedAt)
	case h.exclusive:
		return fmt.Sprintf("%s: another process holds the file's lock for writing (pid %d, %s): "+
			"wait until it closes the file (an HDF5 SWMR writer can be followed with -o live)", file, h.pid, orUnknown(h.comm))
	}
	return fmt.Sprintf("%s: another process has the file open for reading (pid %d, %s), which a read-write "+
		"open must wait for: close it there first, or mount read-only", file, h.pid, orUnknown(h.comm))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
