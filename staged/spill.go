package staged

import (
	"fmt"
	"log/slog"
)

// UseStore makes the array keep its staged chunks in s, under s's memory budget; spilled
// chunks are read back when a read, a write or the commit needs them. Call it before the
// first write.
func (a *Array) UseStore(s *Store) {
	a.store = s
	for i := 2; i < len(a.slabs); i++ {
		if a.slabs[i].buf != nil {
			a.held(int32(i))
		}
	}
}

// Store is the store the array keeps its staged chunks in (nil: plain memory).
func (a *Array) Store() *Store { return a.store }

// gone: staged slab i was dropped (neither in memory, nor spilled, nor sunk).
func (a *Array) gone(i int32) bool {
	s := &a.slabs[i]
	return s.buf == nil && s.spillOff == 0 && s.sunk == 0
}

// offMemory: staged slab i is not in memory but can be read back (spilled or sunk).
func (a *Array) offMemory(i int32) bool { return a.isSpilled(i) || a.isSunk(i) }

// isSpilled: staged slab i is in the spill file (or was, until a commit released it).
func (a *Array) isSpilled(i int32) bool { return a.slabs[i].spillOff != 0 }

// spillSlot is spilled staged slab i's offset in the spill file, and whether a commit
// released its bytes (ReleaseSpilled).
func (a *Array) spillSlot(i int32) (off int64, released bool) {
	if o := a.slabs[i].spillOff; o < 0 {
		return -o - 1, true
	}
	return a.slabs[i].spillOff - 1, false
}

// held records that staged slab i now holds memory (a new or re-loaded chunk).
func (a *Array) held(i int32) {
	if a.store == nil {
		return
	}
	a.store.resident.Add(int64(len(a.slabs[i].buf)))
	a.resident = append(a.resident, i)
}

// newBuffer is a chunk buffer for a new staged chunk (contents undefined).
func (a *Array) newBuffer() []byte {
	if a.store == nil {
		return make([]byte, a.ChunkBytes())
	}
	return a.store.buffer(a.ChunkBytes())
}

// dropSlab frees staged slab i, in memory, spilled or sunk.
func (a *Array) dropSlab(i int32) {
	a.forgetDigest(i)
	a.setHoles(i, nil)
	s := &a.slabs[i]
	if a.store != nil {
		if s.buf != nil {
			a.store.resident.Add(-int64(len(s.buf)))
			a.store.release(s.buf)
		} else if a.isSpilled(i) {
			off, _ := a.spillSlot(i)
			a.store.freeSlot(off, int64(a.ChunkBytes()))
		} else if a.isSunk(i) {
			a.forgetSunk(i)
		}
	}
	*s = stagedSlab{grid: s.grid[:0]}
}

// makeRoom evicts the array's oldest resident staged chunks, except those in keep, until
// extra more bytes fit the store's budget or nothing is left to evict: to the sink while
// they follow the staging order (see Sink), else to the spill file. An eviction that fails
// leaves that chunk in memory, as it was, and returns the error: no staged byte is lost.
// Within the budget too, chunks the sink takes go to it once they are old (sinkOld).
func (a *Array) makeRoom(extra int64, keep map[int32]bool) error {
	if a.store == nil {
		return nil
	}
	a.sinkOld(keep)
	if !a.store.over(extra) {
		return nil
	}
	var kept []int32
	for len(a.resident) > 0 && a.store.over(extra) {
		i := a.resident[0]
		a.resident = a.resident[1:]
		if int(i) >= len(a.slabs) || a.slabs[i].buf == nil || a.isSpilled(i) {
			continue // dropped or spilled since it was queued
		}
		if keep[i] {
			kept = append(kept, i)
			continue
		}
		if err := a.settle(i); err != nil { // what leaves memory is the whole chunk
			a.resident = append(append(kept, i), a.resident...)
			return err
		}
		a.waitDigest(i)     // its buffer goes back to the pool: no worker may still read it
		if len(kept) == 0 { // a kept chunk staged before it would break the order
			sunk, err := a.sinkChunk(i)
			if err != nil {
				slog.Warn("staged: storing a chunk ahead of its commit failed; spilling it instead", "err", err)
			}
			if sunk {
				continue
			}
		}
		a.sinkStop = true
		s := &a.slabs[i]
		off, err := a.store.spill(s.buf)
		if err != nil {
			a.resident = append(append(kept, i), a.resident...)
			return err
		}
		s.spillOff = off + 1
		a.store.resident.Add(-int64(len(s.buf)))
		a.store.release(s.buf)
		s.buf = nil
	}
	a.resident = append(kept, a.resident...)
	return nil
}

// loadSpilled reads spilled staged slab i into a new buffer.
func (a *Array) loadSpilled(i int32, buf []byte) ([]byte, error) {
	if a.isSunk(i) {
		return a.loadSunk(i, buf)
	}
	if buf == nil {
		buf = make([]byte, a.ChunkBytes())
	}
	off, released := a.spillSlot(i)
	if released {
		return nil, fmt.Errorf("staged slab %d: its spilled bytes went to a commit that did not complete", i)
	}
	if err := a.store.load(buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReleaseSpilled gives up the spill file's copy of sc, a spilled chunk StagedChunks listed
// that a commit has just written to the HDF5 file: its pages are freed at once (a hole is
// punched), so that the commit's own writes reuse that memory rather than touching new
// pages, and they are never written back to disk. The chunk must not be read again: the
// commit re-points it (MapBase) or, if the commit fails, reads of it fail (EIO). It
// touches only sc's slab, so it may run while other chunks are read (StagedData).
func (a *Array) ReleaseSpilled(sc StagedChunk) {
	i := sc.slab
	if a.store == nil || int(i) >= len(a.slabs) || a.slabs[i].buf != nil || !a.isSpilled(i) {
		return
	}
	off, released := a.spillSlot(i)
	if released {
		return
	}
	a.store.discard(off, int64(a.ChunkBytes()))
	a.slabs[i].spillOff = -off - 1
}

// faultIn brings spilled staged slab i back into memory for an update in place; its slot
// is freed. The caller made room first.
func (a *Array) faultIn(i int32) error {
	if a.isSunk(i) {
		buf, err := a.loadSunk(i, a.store.buffer(a.ChunkBytes()))
		if err != nil {
			return err
		}
		a.forgetSunk(i)
		a.slabs[i].buf = buf
		a.held(i)
		return nil
	}
	if !a.isSpilled(i) {
		return nil
	}
	buf, err := a.loadSpilled(i, a.store.buffer(a.ChunkBytes()))
	if err != nil {
		return fmt.Errorf("staged slab %d: %w", i, err)
	}
	off, _ := a.spillSlot(i)
	a.store.freeSlot(off, int64(a.ChunkBytes()))
	a.slabs[i].spillOff = 0
	a.slabs[i].buf = buf
	a.held(i)
	return nil
}

// Discard drops every staged chunk, giving its memory and spill slot back to the store:
// for an array that is done with (a closed handle whose changes could not be committed).
// The array must not be used afterwards.
func (a *Array) Discard() {
	for i := 2; i < len(a.slabs); i++ {
		a.dropSlab(int32(i))
	}
	a.slabs = a.slabs[:2]
	a.resident = nil
	a.freeSlabs = nil
	clear(a.ChunkMap().Slabs) // every chunk on the full slab: nothing is staged
	a.nStaged = 0
}
