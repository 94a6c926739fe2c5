package commit

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// Sink is a staged array's staged.Sink: the chunks the array evicts under its store's
// budget are written into raw_data at once, at the slots the array's commit will give
// them, so that the commit finds them there and only writes their hash_table rows. It
// takes chunks in the array's staging order, deciding each as the commit's plan will
// (the fill value: no slot; a digest the hash table or an earlier chunk holds: that slot;
// else the next slot past largest_index). The plan appends in versioned-hdf5's order
// (appendOrder), which is the staging order when the chunks are written in the order of
// their base slots (a sequential overwrite of a version whose slots are in grid order);
// otherwise (e.g. over a version whose chunk 0 an earlier version rewrote, whose slot lies
// after the others') the commit finds those chunks out of place. Those slots are free space until a commit
// takes them (versioned-hdf5 appends at largest_index too): no version, hash row or
// largest_index changes before the commit, and a crash (or another dataset's commit,
// whose sync makes the grown raw_data durable) leaves only rows past largest_index·C0,
// which the format allows and the next commit truncates.
//
// The commit checks every chunk it finds in place (same slot, same digest) and writes
// the rest as before. A commit that would write over slots a sink holds (another array's,
// or this array's out of order) first moves those chunks to the store's spill file.
type Sink struct {
	c    *Committer
	ds   *versions.Dataset
	arr  *staged.Array
	fill [32]byte // the digest of a full chunk of the fill value
}

// NewSink returns the sink of arr, a staged array of ds (a dataset of a version of c's
// file) whose chunks spill to c's store.
func (c *Committer) NewSink(ds *versions.Dataset, arr *staged.Array) *Sink {
	chunks := arr.Chunks()
	fill := hashtable.Hash(fillChunk(ds.Fill, arr.ChunkBytes()), chunks, chunks, arr.ItemSize())
	return &Sink{c: c, ds: ds, arr: arr, fill: fill}
}

// groupSink is the state of the sinks of one data group: one array at a time (the owner)
// holds slots there.
type groupSink struct {
	mu      sync.Mutex // after Committer.mu, before the HDF5 lock
	owner   *Sink
	stopped bool // a commit moved or took the owner's slots: no more until it has none
	next    int64
	extent  int64                // raw_data slots the sink has made room for
	pending map[[32]byte]int64   // new chunks the sink wrote: digest -> raw_data row
	recs    map[int64]*sinkChunk // the owner's chunks, by reference
	nref    int64
	since   int64       // bytes written since the file's writeback was last started
	room    int64       // bytes that may be written before the free space is looked at again
	kicking atomic.Bool // a writeback start is under way
}

// sinkChunk is where one chunk a sink took lives.
type sinkChunk struct {
	row int64 // raw_data row of its slot; -1: the fill value (no slot)
	off int64 // >= 0: moved to the spill file, at off
	sum [32]byte
}

// sinkAhead is how many slots past the last a sink makes room for at once: raw_data's
// extent grows in steps, not per chunk (the commit sets the exact extent).
const sinkAhead = 256

// groupSink is the sinks' state of data group, made on first use; c.sinkMu is held.
func (c *Committer) groupSink(group string) *groupSink {
	g := c.sinks[group]
	if g == nil {
		g = &groupSink{pending: map[[32]byte]int64{}, recs: map[int64]*sinkChunk{}}
		c.sinks[group] = g
	}
	return g
}

// Put implements staged.Sink. It does not wait for a commit in progress: the array
// spills instead.
func (s *Sink) Put(data, stored []byte, sum [32]byte) (int64, bool, error) {
	c := s.c
	if !c.mu.TryLock() {
		return 0, false, nil
	}
	defer c.mu.Unlock()
	ix, err := c.index(s.ds)
	if err != nil {
		return 0, false, err
	}
	g := s.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.recs) == 0 { // a new owner, or the old one after its commit: start afresh
		g.owner, g.stopped, g.next, g.extent = s, false, ix.largest, 0
		clear(g.pending)
	}
	if g.owner != s || g.stopped {
		return 0, false, nil
	}
	raw := s.ds.RawDataset()
	chunks := raw.Info().Chunks
	rec := &sinkChunk{off: -1, sum: sum}
	if sum == s.fill { // the plan's precedence: the fill value, the table, this change
		rec.row = -1
	} else if row, ok := ix.slots[sum]; ok {
		rec.row = row
	} else if row, ok := g.pending[sum]; ok {
		rec.row = row
	} else {
		if !g.haveRoom(c.f.Path(), int64(len(data))) {
			return 0, false, nil
		}
		if len(raw.Info().Filters) > 0 && stored == nil {
			enc := newEncoder(raw.Info().Filters, raw.Info().Type.Size)
			if enc == nil {
				return 0, false, nil // libhdf5 filters these chunks at the commit
			}
			out, owned, err := enc.encode(data)
			if err != nil {
				return 0, false, err
			}
			if owned {
				defer enc.release(out)
			}
			stored = out
		} else if len(raw.Info().Filters) == 0 {
			stored = data
		}
		if g.next+1 > g.extent {
			dims := slices.Clone(chunks)
			dims[0] = (g.next + sinkAhead) * ix.rows
			if err := raw.SetExtent(dims); err != nil {
				return 0, false, fmt.Errorf("making room in %s: %w", raw.Path(), err)
			}
			g.extent = g.next + sinkAhead
		}
		start := make([]int64, len(chunks))
		start[0] = g.next * ix.rows
		if err := raw.WriteChunk(start, 0, stored); err != nil {
			return 0, false, err
		}
		if g.since += int64(len(stored)); g.since >= writebackBytes && g.kicking.CompareAndSwap(false, true) {
			// As a commit does: the kernel writes the pages back as the writes go on,
			// not all at the sync.
			g.since = 0
			go func() {
				defer g.kicking.Store(false)
				if err := c.f.HDF5().StartWriteback(); err != nil {
					slog.Debug("writeback not started", "err", err)
				}
			}()
		}
		rec.row = start[0]
		g.pending[sum] = rec.row
		g.next++
	}
	ref := g.nref
	g.nref++
	g.recs[ref] = rec
	return ref, true, nil
}

// sinkReserve is the free space a sink leaves on the HDF5 file's filesystem: a write
// libhdf5 cannot complete stops the file's driver until the next mount (fail-stop), so
// the sink takes chunks only while the disk has room to spare, and the spill file (which
// fails a write alone, with ENOSPC) takes them after.
const sinkReserve = 64 << 20

// haveRoom reports whether n more bytes fit beside the reserve, looking at the
// filesystem's free space every sinkReserve/4 bytes.
func (g *groupSink) haveRoom(file string, n int64) bool {
	if g.room < n {
		var st unix.Statfs_t
		if err := unix.Statfs(filepath.Dir(file), &st); err != nil {
			return false
		}
		g.room = min(int64(st.Bavail)*st.Bsize-sinkReserve, sinkReserve/4)
		if g.room < n {
			return false
		}
	}
	g.room -= n
	return true
}

// Load implements staged.Sink.
func (s *Sink) Load(ref int64, buf []byte) error {
	g := s.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.recs[ref]
	if rec == nil {
		return fmt.Errorf("commit: sink reference %d is unknown", ref)
	}
	return g.read(s, rec, buf)
}

// read reads rec's chunk into buf. g.mu is held: no commit overwrites its slot meanwhile.
func (g *groupSink) read(s *Sink, rec *sinkChunk, buf []byte) error {
	switch {
	case rec.off >= 0:
		return s.c.store.Load(buf, rec.off)
	case rec.row < 0:
		copy(buf, fillChunk(s.ds.Fill, len(buf)))
		return nil
	}
	raw := s.ds.RawDataset()
	chunks := raw.Info().Chunks
	start := make([]int64, len(chunks))
	start[0] = rec.row
	return raw.ReadBox(start, chunks, chunks, make([]int64, len(chunks)), buf)
}

// Forget implements staged.Sink.
func (s *Sink) Forget(ref int64) {
	g := s.group()
	g.mu.Lock()
	defer g.mu.Unlock()
	rec := g.recs[ref]
	if rec == nil {
		return
	}
	delete(g.recs, ref)
	if rec.off >= 0 {
		s.c.store.Free(rec.off, int64(s.arr.ChunkBytes()))
	}
	if len(g.recs) == 0 {
		g.owner = nil
	}
}

func (s *Sink) group() *groupSink {
	s.c.sinkMu.Lock()
	defer s.c.sinkMu.Unlock()
	return s.c.groupSink(s.ds.DataGroup())
}

// claimSlots prepares raw_data for a commit about to write fresh (new chunks of one
// array, from row ix.largest*rows on): the chunks a sink already wrote at their rows are
// marked in place; every other chunk a sink holds past largest_index moves to its store's
// spill file first, since the commit may write over it; and the sink takes no more chunks
// until its owner has none (they no longer follow the slots the commit leaves).
func (c *Committer) claimSlots(group string, ix *index, fresh []newChunk) error {
	c.sinkMu.Lock()
	g := c.sinks[group]
	c.sinkMu.Unlock()
	if g == nil || len(fresh) == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.recs) == 0 {
		return nil
	}
	owner := g.owner
	inPlace := map[int64][32]byte{} // row -> digest of the chunk found there
	// A chunk is in place if its record still names its slot (a slot past largest_index
	// that a record names is written only by that record's Put, and a commit moves every
	// record it may write over first) and its row and digest are the commit's.
	if owner != nil && fresh[0].arr == owner.arr {
		for i := range fresh {
			nc := &fresh[i]
			if nc.spilled == nil {
				continue
			}
			ref, ok := owner.arr.SunkRef(*nc.spilled)
			if !ok {
				continue
			}
			if rec := g.recs[ref]; rec != nil && rec.off < 0 && rec.row == nc.row && rec.sum == nc.digest {
				nc.inPlace = true
				inPlace[nc.row] = nc.digest
			}
		}
	}
	g.stopped = true
	first := ix.largest * ix.rows
	var buf []byte
	for _, rec := range g.recs {
		if rec.off >= 0 || rec.row < first {
			continue // in the spill file, the fill value, or a committed slot
		}
		if d, ok := inPlace[rec.row]; ok && d == rec.sum {
			continue
		}
		if buf == nil {
			buf = make([]byte, owner.arr.ChunkBytes())
		}
		if err := g.read(owner, rec, buf); err != nil {
			return fmt.Errorf("moving a chunk out of %s's slot %d: %w", group, rec.row/ix.rows, err)
		}
		off, err := owner.c.store.Spill(buf)
		if err != nil {
			return fmt.Errorf("moving a chunk out of %s's slot %d: %w", group, rec.row/ix.rows, err)
		}
		rec.off = off
	}
	return nil
}

var _ staged.Sink = (*Sink)(nil)
