//go:build unix

package versions

import (
	"os"
	"runtime"
	"syscall"
)

// mapFile maps the file's bytes as they are at open, read-only, or returns nil if it
// cannot. Replies of unfiltered chunks are written from the mapping (fileMap.slices).
func mapFile(f *os.File) *fileMap {
	st, err := f.Stat()
	if err != nil || st.Size() <= 0 || int64(int(st.Size())) != st.Size() {
		return nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	m := &fileMap{b: b}
	runtime.AddCleanup(m, func(b []byte) { _ = syscall.Munmap(b) }, b)
	return m
}
