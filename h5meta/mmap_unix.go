//go:build unix

package h5meta

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MapFile returns a reader of the first size bytes of file that copies from a read-only
// mapping of them instead of making a system call per read, for callers about to make
// thousands of small reads (listing 10,000 versions reads each one's object header and
// attributes). The mapping is unmapped when the reader is garbage. A read of a page the
// file no longer has (it was cut short meanwhile) is an error, not a crash. If the file
// cannot be mapped, MapFile returns file itself.
func MapFile(file *os.File, size int64) io.ReaderAt {
	if size <= 0 || int64(int(size)) != size {
		return file
	}
	region, err := mmapRange(file, 0, int(size))
	if err != nil {
		return file
	}
	m := &mappedFile{region}
	runtime.AddCleanup(m, func(r []byte) { _ = syscall.Munmap(r) }, region)
	return m
}

// mappedFile is MapFile's reader.
type mappedFile struct{ data []byte }

func (m *mappedFile) ReadAt(p []byte, off int64) (n int, err error) {
	if off < 0 {
		return 0, errors.New("h5meta: read at a negative offset")
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("the file changed while it was read (fault at %#x)", faultAddr(r))
		}
	}()
	n = copy(p, m.data[off:])
	runtime.KeepAlive(m)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// mapObject returns the n bytes at addr, mapped from the file when it is an open file
// (mapped true) and read otherwise. The mapping lives as long as owner: it is unmapped
// when owner is garbage, so nothing may keep a slice of it beyond owner's life. Reading a
// mapping of a file that shrinks raises SIGBUS: readers guard (MappingList.guard).
func (f *File) mapObject(owner *MappingList, addr, n uint64, what string) (p []byte, mapped bool, err error) {
	// n is at most a collection's size, which heapSize bounds by maxRead.
	abs := addr + f.base
	if n == 0 || abs < addr || abs > uint64(f.size) || n > uint64(f.size)-abs {
		p, err = f.read(addr, int(n), what) // read reports a range beyond the file
		return p, false, err
	}
	conn, ok := f.r.(syscall.Conn)
	if fr, isRanger := f.r.(FileRanger); isRanger {
		if file := fr.FileOf(int64(abs), int64(n)); file != nil {
			defer file.Close() // the mapping outlives the descriptor
			conn, ok = file, true
		}
	}
	if !ok {
		p, err = f.read(addr, int(n), what)
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

// release lets the pages of a mapped list before its byte off go from memory (they are
// the file's: a later read faults them in again from the page cache).
func (l *MappingList) release(off int) {
	if !l.mapped || off <= 0 || off > len(l.obj) {
		return
	}
	page := uintptr(os.Getpagesize())
	base := uintptr(unsafe.Pointer(unsafe.SliceData(l.obj)))
	first := (base + page - 1) &^ (page - 1) // the first whole page of obj
	end := (base + uintptr(off)) &^ (page - 1)
	if end <= first {
		return
	}
	_ = unix.Madvise(l.obj[first-base:end-base:end-base], unix.MADV_DONTNEED)
}
