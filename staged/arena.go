package staged

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arena hands out the store's chunk buffers from memory mapped outside the Go heap and
// advised to use transparent huge pages: a 2 MiB page fault instead of 512 of 4 KiB for
// every 2 MiB of staged chunks (where page faults are dear, in a virtual machine, a
// fresh 4 KiB page cost 20-50 µs here: copying 256 MiB into new Go buffers took 0.6 s).
// Buffers go back to a free list of their size and are handed out again; the arena
// maps at most limit bytes (beyond, the store falls back to the Go heap), and gives its
// pages back to the kernel when the store holds nothing (after a commit: Store.idle).
type arena struct {
	mu      sync.Mutex
	limit   int64
	regions [][]byte         // mapped; GUARDED_BY(mu)
	mapped  int64            // GUARDED_BY(mu)
	free    map[int][][]byte // buffer size -> free buffers; GUARDED_BY(mu)
	rest    map[int][]byte   // buffer size -> the uncarved rest of its last region; GUARDED_BY(mu)
	inUse   int              // buffers handed out; GUARDED_BY(mu)
	touched bool             // a buffer was handed out since the pages were last given back
}

// arenaRegion is the size regions are mapped in: a multiple of the huge page size.
const arenaRegion = 4 << 20

func newArena(limit int64) *arena {
	return &arena{limit: limit, free: map[int][][]byte{}, rest: map[int][]byte{}}
}

// get returns a buffer of n bytes (contents undefined), or nil if the arena is full.
func (m *arena) get(n int) []byte {
	if m == nil || n <= 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fl := m.free[n]; len(fl) > 0 {
		b := fl[len(fl)-1]
		m.free[n] = fl[:len(fl)-1]
		m.inUse++
		m.touched = true
		return b
	}
	if len(m.rest[n]) < n {
		size := (int64(n) + arenaRegion - 1) / arenaRegion * arenaRegion
		if m.mapped+size > m.limit {
			return nil
		}
		r, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil
		}
		adviseHugePages(r)
		m.regions = append(m.regions, r)
		m.mapped += size
		m.rest[n] = r
	}
	r := m.rest[n]
	b := r[:n:n]
	m.rest[n] = r[n:]
	m.inUse++
	m.touched = true
	return b
}

// put takes back b if it is the arena's, reporting whether it was.
func (m *arena) put(b []byte) bool {
	if m == nil || cap(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.regions {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(r)))
		if p >= lo && p < lo+uintptr(len(r)) {
			m.free[len(b)] = append(m.free[len(b)], b[:len(b):len(b)])
			m.inUse--
			return true
		}
	}
	return false
}

// trim gives the arena's pages beyond its first arenaKeep bytes back to the kernel if no
// buffer is in use (nothing is staged: after a commit); the next buffers there fault them
// in again, a huge page at a time.
func (m *arena) trim() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inUse > 0 || !m.touched {
		return
	}
	var kept int64
	for _, r := range m.regions {
		if kept < arenaKeep { // what small writes use stays: they fault nothing in
			kept += int64(len(r))
			continue
		}
		_ = unix.Madvise(r, unix.MADV_DONTNEED) // contents are undefined anyway
	}
	m.touched = false
}

// arenaKeep is what trim leaves mapped and resident.
const arenaKeep = 8 << 20

// close unmaps the arena if no buffer of it is in use (else the mapping stays until the
// process ends: an array may still hold one).
func (m *arena) close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inUse > 0 {
		return
	}
	for _, r := range m.regions {
		_ = unix.Munmap(r)
	}
	m.regions, m.mapped = nil, 0
	m.free, m.rest = map[int][][]byte{}, map[int][]byte{}
}
