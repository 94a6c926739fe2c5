//go:build unix

package chunkstore

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

// release records spans as written and, once the range of the file they lie in since the
// last time spans releaseBytes, drops the mapping's page table entries over that range,
// widened to whole folios (a reply still being written maps its pages again).
func (m *fileMap) release(spans []span) {
	m.mu.Lock()
	for _, s := range spans {
		if m.hi == 0 {
			m.lo, m.hi = s.at, s.at+s.n
		}
		m.lo, m.hi = min(m.lo, s.at), max(m.hi, s.at+s.n)
	}
	if m.hi-m.lo < releaseBytes {
		m.mu.Unlock()
		return
	}
	lo, hi := m.lo&^(folioBytes-1), min((m.hi+folioBytes-1)&^(folioBytes-1), int64(len(m.b)))
	m.lo, m.hi = 0, 0
	m.mu.Unlock()
	_ = syscall.Madvise(m.b[lo:hi], syscall.MADV_DONTNEED)
}
