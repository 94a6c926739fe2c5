// Package chunkstore reads a versioned dataset's bytes from the HDF5 file's stored chunks:
// it owns the file's raw descriptor (opened read-only) and its mapping, the slot index of
// each raw_data (where a chunk is stored, read from the file's bytes by h5meta), the
// decoded-chunk cache, the background read-ahead of filtered datasets, and the lock over
// the file's bytes that a commit's sync takes while it rewrites them. A read of a dataset
// (Chunked.Read) is answered with one Reply: bytes copied into the caller's buffer, one
// range of the file (to splice), slices of the file's mapping, or slices of cached decoded
// chunks.
//
// The fast path. libhdf5 is one global lock and its chunk and mapping queries grow with the
// square of their number, so the store reads raw_data's chunk index straight from the
// file's bytes (package h5meta), and reads chunks by their file offset, decoding them in Go
// (package filters) on as many cores as a read touches chunks. Whatever h5meta or filters
// does not support goes through libhdf5 instead (Source.Raw), so the fast path never
// changes what is read.
//
// What a dataset is — its chunk map (grid index -> raw_data slot), shape and dtype — is
// package versions'; the store knows a dataset only as a Source and a chunkmap.Map.
//
// Lock ordering: versions.File.mu, then Store.writeMu (shared by readers of the file's
// bytes, exclusive while a commit's sync applies its journal: ApplyLock), then the HDF5
// lock (package h5). The store's other locks (the index map's, the cache's, the mapping's,
// a dataset's read-ahead state) are leaves: nothing is taken while one is held. The whole
// order is docs/ARCHITECTURE.md's table.
package chunkstore

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vh5fs/vh5fs/h5meta"
)

// Store is the chunk store of one HDF5 file.
type Store struct {
	raw     *os.File      // the file's bytes (read-only)
	fmap    *fileMap      // raw's bytes at open, mapped (nil if they could not be)
	writeMu sync.RWMutex  // held by a commit's apply (ApplyLock); readers of raw's metadata take it shared
	gen     atomic.Uint64 // bumped by each apply and Reset: slot indexes made before are stale
	writing atomic.Bool   // an apply holds writeMu
	chunks  *chunkCache
	ahead   chan struct{} // slots for background read-ahead decodes
	scratch sync.Pool     // *[]byte: inflated chunks on their way to unshuffle

	idxMu   sync.Mutex           // a leaf lock
	indexes map[string]*rawIndex // raw_data path -> slot index; GUARDED_BY(idxMu)
}

// Open opens the bytes of the HDF5 file at path read-only, and maps them.
func Open(path string) (*Store, error) {
	raw, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chunk store: %w", err)
	}
	return &Store{
		raw: raw, fmap: mapFile(raw), chunks: newChunkCache(chunkCacheBytes),
		ahead: make(chan struct{}, runtime.GOMAXPROCS(0)), indexes: map[string]*rawIndex{},
	}, nil
}

// Close closes the descriptor; replies still holding slices of the mapping keep it mapped.
func (s *Store) Close() error { return s.raw.Close() }

// File is the descriptor of the file's bytes, for reading what is not a chunk (the
// superblock's SWMR state, the file's identity).
func (s *Store) File() *os.File { return s.raw }

// Fd is the descriptor located Replies refer to.
func (s *Store) Fd() uintptr { return s.raw.Fd() }

// Gen counts the changes of the file's bytes seen so far (commits' applies, Resets):
// anything read from the bytes at one gen holds until Gen moves on.
func (s *Store) Gen() uint64 { return s.gen.Load() }

// Writing reports whether a commit's apply is rewriting the bytes now.
func (s *Store) Writing() bool { return s.writing.Load() }

// RLockBytes holds the file's bytes unchanged (no apply runs) until RUnlockBytes.
func (s *Store) RLockBytes() { s.writeMu.RLock() }

// TryRLockBytes is RLockBytes unless an apply runs now; then it returns false and the
// caller asks libhdf5 instead, whose state between two calls is consistent.
func (s *Store) TryRLockBytes() bool { return s.writeMu.TryRLock() }

// RUnlockBytes ends RLockBytes or a successful TryRLockBytes.
func (s *Store) RUnlockBytes() { s.writeMu.RUnlock() }

// Meta opens the file's bytes for h5meta at their current size. Callers hold the bytes
// (RLockBytes): while a commit applies, libhdf5 may be rewriting metadata on disk.
func (s *Store) Meta() (*h5meta.File, error) {
	st, err := s.raw.Stat()
	if err != nil {
		return nil, err
	}
	return h5meta.Open(s.raw, st.Size())
}

// MappedMeta is Meta through a mapping of the file, for thousands of small reads (a long
// version list) rather than one pread each. Callers hold the bytes.
func (s *Store) MappedMeta() (*h5meta.File, error) {
	st, err := s.raw.Stat()
	if err != nil {
		return nil, err
	}
	return h5meta.Open(h5meta.MapFile(s.raw, st.Size()), st.Size())
}

// Reset forgets every slot index and decoded chunk (a live file reopened: slots may have
// been rewritten by its writer).
func (s *Store) Reset() {
	s.idxMu.Lock()
	s.indexes = map[string]*rawIndex{}
	s.gen.Add(1)
	s.idxMu.Unlock()
	s.chunks.reset()
}

// ApplyLock is what a commit's sync holds while it writes over the file's durable bytes
// (h5.File.SetApplyLock).
func (s *Store) ApplyLock() sync.Locker { return bytesLock{s} }

// bytesLock is ApplyLock's lock. The apply is the only moment the file's durable bytes
// change, since the journal driver holds every other write over them until then and new
// chunks and metadata go past their end. Readers of metadata from the bytes take writeMu
// shared, so they see the old state or the new one whole, and keep their fast path for the
// rest of the commit; the gen bump makes slot indexes built before stale. Lock ordering:
// the h5.File's sync lock, then writeMu.
//
// Whatever would read metadata from the bytes while writeMu is held asks libhdf5 instead
// (TryRLock), whose state between two calls is consistent, so not even the apply makes
// readers of other versions wait.
type bytesLock struct{ s *Store }

func (l bytesLock) Lock() {
	l.s.writeMu.Lock()
	l.s.gen.Add(1) // slot indexes made before may read nodes the apply rewrites
	l.s.writing.Store(true)
}

func (l bytesLock) Unlock() {
	l.s.writing.Store(false)
	l.s.writeMu.Unlock()
}
