package main

// Who holds a file's lock. libhdf5 flocks every file it opens (shared read-only, exclusive
// read-write) with LOCK_NB, so an open that meets a conflicting lock fails at once; its
// error stack says "errno = 11" at best and nothing at all through the journal driver.
// /proc/locks names the holder without taking a lock (a probe lock, however brief, could
// itself fail another process's open).

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockHolder is a process holding a lock on the file.
type lockHolder struct {
	pid       int
	exclusive bool   // a WRITE lock (libhdf5's read-write open)
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
