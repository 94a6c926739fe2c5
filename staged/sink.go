package staged

import (
	"fmt"
	"log/slog"
	"slices"
)

// A Sink stores the chunks an array evicts under its store's budget where the array's
// commit will put them (commit.Sink: the raw_data slots past the hash table's end), in
// place of the spill file: the commit then finds them written, and a change far larger
// than the budget costs one write of each chunk, not three. The sink expects the commit
// to append new chunks in staging order, which it does for chunks written in the order of
// their slots (a commit appends in versioned-hdf5's order, commit's appendOrder; chunks it
// does not find in place it writes again). The array offers the sink only a prefix of
// the staging order: chunks of
// full shape with their digests, evicted oldest first; anything else (an edge chunk, a
// chunk still held by a write, a sunk chunk written again or dropped) ends the prefix,
// and the rest of the change spills to the file until the next commit.
type Sink interface {
	// Put stores a full-shape chunk: data, its encoding stored (nil: none made) and its
	// digest. ok false: the sink does not take it, and the array spills it.
	Put(data, stored []byte, sum [32]byte) (ref int64, ok bool, err error)
	// Load reads the chunk of ref into buf (ChunkBytes long).
	Load(ref int64, buf []byte) error
	// Forget tells the sink the array no longer needs the chunk of ref.
	Forget(ref int64)
}

// UseSink makes the array evict its staged chunks to s where it can (see Sink), with the
// spill file of its store for the rest. Call it after UseStore, before the first write.
func (a *Array) UseSink(s Sink) { a.sink = s }

// isSunk: staged slab i is held by the sink.
func (a *Array) isSunk(i int32) bool { return a.slabs[i].sunk != 0 }

// sinkRef is sunk slab i's reference.
func (a *Array) sinkRef(i int32) int64 { return a.slabs[i].sunk - 1 }

// forgetSunk hands sunk slab i back to the sink. A sunk chunk leaving the staging order
// (dropped, or loaded back to be written again) shifts the commit's slots for the chunks
// after it: nothing more is sunk until the next commit.
func (a *Array) forgetSunk(i int32) {
	a.sink.Forget(a.sinkRef(i))
	a.slabs[i].sunk = 0
	a.sinkStop = true
}

// sinkChunk offers staged slab i, the oldest resident one, to the sink, which on success
// holds it instead of memory; false: the caller spills it to the file or keeps it.
func (a *Array) sinkChunk(i int32) (bool, error) {
	if a.sink == nil || a.sinkStop || a.store == nil || a.store.digest == nil {
		return false, nil
	}
	// Only chunks of full shape go, as the commit would write them directly. A chunk
	// written whole has its digest (made at write time); one written piecewise is
	// digested (and encoded) now, as the commit would.
	s := &a.slabs[i]
	if len(s.grid) == 0 { // staged by a resize, which records no grid index: not offered
		return false, nil
	}
	l := a.Layout().Trimmed(s.grid)
	if !slices.Equal(l, a.Layout().Chunks()) {
		return false, nil // an edge chunk: the commit writes its trimmed box through libhdf5
	}
	a.waitDigest(i)
	j := s.job
	if j == nil || !slices.Equal(j.trimmed, l) {
		a.forgetDigest(i)
		j = &digestJob{done: make(chan struct{}), trimmed: l, sum: a.store.digest(s.buf, a.Layout().Chunks(), l, a.ItemSize())}
		close(j.done)
		s.job = j
	}
	ref, ok, err := a.sink.Put(s.buf, j.encoded, j.sum)
	if err != nil || !ok {
		return false, err
	}
	if n := int64(len(j.encoded)); n > 0 { // stored: the commit need not write it again
		a.store.resident.Add(-n)
		a.store.encoded.Add(-n)
		j.encoded = nil
	}
	s.sunk = ref + 1
	a.store.resident.Add(-int64(len(s.buf)))
	a.store.release(s.buf)
	s.buf = nil
	return true, nil
}

// sinkAge is how many bytes of chunks staged after a chunk make it old: the sink takes it
// then, budget or not, while its bytes are still in the CPU's caches: copied into the page
// cache later, from memory, they made a 1 GiB dd's writes slower (docs/BENCHMARKS.md).
const sinkAge = 4 << 20

// sinkOld gives the sink the array's oldest resident chunks, except those in keep, that
// sinkAge bytes of later chunks have followed, while the sink takes them in staging
// order. It never waits for a digest, and never spills: a chunk not ready for the sink
// (still being digested, written in part, an edge chunk, the sink declining) stays
// resident, and so do the chunks after it; the budget decides about those (makeRoom).
func (a *Array) sinkOld(keep map[int32]bool) {
	age := uint64(max(1, sinkAge/a.ChunkBytes()))
	for len(a.resident) > 0 && a.sink != nil && !a.sinkStop {
		i := a.resident[0]
		if int(i) >= len(a.slabs) || a.slabs[i].buf == nil || a.isSpilled(i) {
			a.resident = a.resident[1:] // dropped, spilled or sunk since it was queued
			continue
		}
		if a.nextSeq-a.slabs[i].seq <= age || keep[i] || a.slabs[i].holes != nil {
			return
		}
		if j := a.slabs[i].job; j != nil {
			select {
			case <-j.done:
			default:
				return
			}
		}
		sunk, err := a.sinkChunk(i)
		if err != nil {
			slog.Warn("staged: storing a chunk ahead of its commit failed; the chunks after it wait for the budget", "err", err)
			a.sinkStop = true
		}
		if !sunk {
			return
		}
		a.resident = a.resident[1:]
	}
}

// loadSunk reads sunk slab i into buf (nil: a new buffer).
func (a *Array) loadSunk(i int32, buf []byte) ([]byte, error) {
	if buf == nil {
		buf = make([]byte, a.ChunkBytes())
	}
	if err := a.sink.Load(a.sinkRef(i), buf); err != nil {
		return nil, fmt.Errorf("staged slab %d: %w", i, err)
	}
	return buf, nil
}

// SunkRef is the sink's reference for a chunk StagedChunks listed, if the sink holds it.
func (a *Array) SunkRef(sc StagedChunk) (ref int64, ok bool) {
	if int(sc.slab) >= len(a.slabs) || !a.isSunk(sc.slab) {
		return 0, false
	}
	return a.sinkRef(sc.slab), true
}
