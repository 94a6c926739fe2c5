//go:build unix

package h5meta

import (
	"os"
	"runtime"
	"syscall"
)

// mapObject returns the n bytes at addr, mapped from the file when it is an open file
// (mapped true) and read otherwise. The mapping lives as long as owner: it is unmapped
// when owner is garbage, so nothing may keep a slice of it beyond owner's life. Reading a
// mapping of a file that shrinks raises SIGBUS: readers guard (MappingList.guard).
func (f *File) mapObject(owner *MappingList, addr, n uint64, what string) (p []byte, mapped bool, err error) {
	// n is at most a collection's size, which heapSize bounds by maxRead.
	abs := addr + f.base
	start := abs &^ uint64(os.Getpagesize()-1)
	var region []byte
	var merr error = syscall.EINVAL
	if conn, ok := f.r.(syscall.Conn); ok && n > 0 && abs >= addr && abs <= uint64(f.size) && n <= uint64(f.size)-abs {
		if rc, err := conn.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				region, merr = syscall.Mmap(int(fd), int64(start), int(abs+n-start), syscall.PROT_READ, syscall.MAP_SHARED)
			})
		}
	}
	if merr != nil {
		p, err = f.read(addr, int(n), what)
		return p, false, err
	}
	runtime.AddCleanup(owner, func(r []byte) { _ = syscall.Munmap(r) }, region)
	return region[abs-start:], true, nil
}
