package staged

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// Store is where the staged chunks of the arrays that use it keep their bytes: in memory up
// to a budget shared by all of them, and beyond it in a spill file of chunk-sized slots.
// The spill file is read and written with pread/pwrite, never mapped: the kernel holds its
// pages as page cache it can write back and evict, and they are not the daemon's memory.
//
// An array over the budget spills its own oldest resident chunks, within its own mutating
// calls (so no lock is needed against its readers); memory beyond the budget is therefore
// at most what one call of each array stages.
//
// The file is an O_TMPFILE (no name, gone at close or crash) where the filesystem supports
// it, else a file unlinked as soon as it is created; OpenStore removes such files a crash
// left between creation and unlink.
type Store struct {
	budget   int64
	dirs     []string     // where the spill file may go, in order of preference
	prefix   string       // name prefix of named spill files
	resident atomic.Int64 // staged bytes in memory: chunks and their encodings
	encoded  atomic.Int64 // of which encodings (SetEncoder)

	mu    sync.Mutex
	file  *os.File          // GUARDED_BY(mu); nil until the first spill
	end   int64             // bytes of file in use or on free lists; GUARDED_BY(mu)
	free  map[int64][]int64 // slot size -> free slot offsets; GUARDED_BY(mu)
	used  int64             // slots in use; GUARDED_BY(mu)
	pool  sync.Map          // chunk size -> *sync.Pool of buffers beyond the arena's
	arena *arena            // chunk buffers in huge pages (nil: no budget, the Go heap)

	digest  Digester      // set once, before use (SetDigester); nil: no digests at write time
	workers chan struct{} // bounds the digests computed at once
}

// spillSuffix marks a named spill file (before its unlink).
const spillSuffix = ".vh5fs-spill"

// OpenStore returns a store with a memory budget of budget bytes (0: everything spills at
// once; negative: no budget, nothing spills) whose spill file goes beside file (the
// HDF5 file being written, so that spilled chunks are on its disk) or, if that directory
// does not take it, in $TMPDIR. Spill files a crash left beside file are removed.
func OpenStore(file string, budget int64) *Store {
	dir := filepath.Dir(file)
	s := &Store{
		budget: budget,
		dirs:   []string{dir, os.TempDir()},
		prefix: "." + filepath.Base(file) + ".",
		free:   map[int64][]int64{},
	}
	if budget >= 0 {
		s.arena = newArena(budget + arenaSlack)
	}
	for _, d := range s.dirs {
		matches, _ := filepath.Glob(filepath.Join(d, s.prefix+"*"+spillSuffix))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
	return s
}

// Budget is the memory budget in bytes (negative: none).
func (s *Store) Budget() int64 { return s.budget }

// Resident is the number of staged bytes held in memory now.
func (s *Store) Resident() int64 { return s.resident.Load() }

// over reports whether holding extra more bytes would exceed the budget.
func (s *Store) over(extra int64) bool {
	return s.budget >= 0 && s.resident.Load()+extra > s.budget
}

// Close closes the spill file (which removes it) and unmaps the chunk buffers: no array
// of the store may be used afterwards.
func (s *Store) Close() error {
	s.arena.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		return nil
	}
	err := s.file.Close()
	s.file = nil
	s.end, s.used = 0, 0
	s.free = map[int64][]int64{}
	return err
}

// arenaSlack is what the arena maps beyond the budget: the chunks that the calls in
// flight bring in before older ones spill.
const arenaSlack = 32 << 20

// buffer returns a buffer of n bytes (contents undefined), reusing freed ones.
func (s *Store) buffer(n int) []byte {
	if b := s.arena.get(n); b != nil {
		return b
	}
	if p, ok := s.pool.Load(n); ok {
		if b, ok := p.(*sync.Pool).Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, n)
}

// release hands back a buffer that no slab references any more.
func (s *Store) release(b []byte) {
	if s.arena.put(b) {
		s.idle()
		return
	}
	p, _ := s.pool.LoadOrStore(len(b), &sync.Pool{})
	p.(*sync.Pool).Put(&b)
}

// spill writes b to a free slot and returns its offset. On error nothing is allocated.
func (s *Store) spill(b []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file == nil {
		f, err := s.create()
		if err != nil {
			return 0, err
		}
		s.file = f
	}
	n := int64(len(b))
	off, reuse := int64(0), false
	if fl := s.free[n]; len(fl) > 0 {
		off, reuse = fl[len(fl)-1], true
	} else {
		off = s.end
	}
	if _, err := s.file.WriteAt(b, off); err != nil {
		return 0, fmt.Errorf("staged: spilling a chunk of %d bytes to %s: %w", n, s.file.Name(), err)
	}
	if reuse {
		s.free[n] = s.free[n][:len(s.free[n])-1]
	} else {
		s.end += n
	}
	s.used++
	return off, nil
}

// load reads the slot at off into b.
func (s *Store) load(b []byte, off int64) error {
	s.mu.Lock()
	f := s.file
	s.mu.Unlock()
	if f == nil {
		return fmt.Errorf("staged: reading spilled chunk at %d: no spill file", off)
	}
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("staged: reading spilled chunk at %d from %s: %w", off, f.Name(), err)
	}
	return nil
}

// discard frees the pages of the slot of n bytes at off (a hole punched in the spill
// file; the slot stays in use until freeSlot). It is best effort: a filesystem that
// punches no holes keeps the pages until the file is truncated.
func (s *Store) discard(off, n int64) {
	s.mu.Lock()
	f := s.file
	s.mu.Unlock()
	if f != nil {
		punchHole(f.Fd(), off, n)
	}
}

// freeSlot returns a slot of n bytes to the free list; when no slot is in use any more
// the file is truncated, giving its disk space back (after a commit).
func (s *Store) freeSlot(off, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if s.used > 0 {
		s.free[n] = append(s.free[n], off)
		return
	}
	s.free = map[int64][]int64{}
	s.end = 0
	if s.file != nil {
		_ = s.file.Truncate(0)
	}
	s.arena.trim() // the arena's lock is taken after s.mu, never before
}

// idle gives the arena's pages back when nothing is staged: no chunk buffer in use and no
// spill slot (a store of budget 0 spills every chunk at once: its buffers are all back
// between two writes, with everything still staged).
func (s *Store) idle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == 0 {
		s.arena.trim()
	}
}

// create opens a new spill file in the first directory that takes one.
func (s *Store) create() (*os.File, error) {
	var errs []error
	for _, d := range s.dirs {
		if f, err := openTmpfile(d); err == nil {
			return f, nil
		}
		f, err2 := os.CreateTemp(d, s.prefix+"*"+spillSuffix)
		if err2 == nil {
			if err := os.Remove(f.Name()); err != nil {
				f.Close()
				errs = append(errs, err)
				continue
			}
			return f, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", d, err2))
	}
	return nil, fmt.Errorf("staged: no directory takes a spill file (%s): %w", strings.Join(s.dirs, ", "), errors.Join(errs...))
}

// Spill writes b to a free slot of the spill file and returns its offset: for a Sink
// that must give up the place it holds a chunk in (Load reads it back, Free frees it).
func (s *Store) Spill(b []byte) (int64, error) { return s.spill(b) }

// Load reads the slot at off, which Spill returned, into b.
func (s *Store) Load(b []byte, off int64) error { return s.load(b, off) }

// Free gives back the slot of n bytes at off, which Spill returned.
func (s *Store) Free(off, n int64) { s.freeSlot(off, n) }
