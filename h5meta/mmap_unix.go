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
	conn, ok := f.r.(syscall.Conn)
	if !ok || n == 0 || abs < addr || abs > uint64(f.size) || n > uint64(f.size)-abs {
		p, err = f.read(addr, int(n), what) // read reports a range beyond the file
		return p, false, err
	}
	start := abs &^ uint64(os.Getpagesize()-1)
	region, err := mmapRange(conn, start, int(abs+n-start))
	if err != nil { // e.g. the process's limit of mappings: read it instead
		p, err = f.read(addr, int(n), what)
		return p, false, err
	}
	runtime.AddCleanup(owner, func(r []byte) { _ = syscall.Munmap(r) }, region)
	return region[abs-start:], true, nil
}

// mmapRange maps length bytes of conn's file at off, read-only.
func mmapRange(conn syscall.Conn, off uint64, length int) (region []byte, err error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	if cerr := rc.Control(func(fd uintptr) {
		region, err = syscall.Mmap(int(fd), int64(off), length, syscall.PROT_READ, syscall.MAP_SHARED)
	}); cerr != nil {
		return nil, cerr
	}
	return region, err
}
