package versions

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/vh5fs/vh5fs/filters"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
	"github.com/vh5fs/vh5fs/staged"
)

// The fast path. libhdf5 is one global lock and its chunk and mapping queries grow with the
// square of their number, so vh5fs reads the two structures it needs — a version's
// virtual-dataset mappings and raw_data's chunk index — straight from the file's bytes
// (package h5meta), and reads chunks by their file offset, decoding them in Go (package
// filters) on as many cores as a read touches chunks. Whatever h5meta or filters does not
// support goes through libhdf5 instead, so the fast path never changes what is read.

// rawIndex is where the slots of one raw_data live in the file.
type rawIndex struct {
	chunks   *h5meta.ChunkIndex // nil: h5meta cannot read this index (libhdf5 then)
	base     int64              // file offset of HDF5 address 0
	gen      uint64             // File.gen when made
	pipeline []filters.Filter
	decode   bool // every filter of the pipeline decodes in Go
}

// bytesMeta opens the file's bytes for h5meta at their current size. Callers hold
// writeMu for reading: while a commit runs, libhdf5 may be rewriting metadata on disk.
func (f *File) bytesMeta() (*h5meta.File, error) {
	st, err := f.raw.Stat()
	if err != nil {
		return nil, err
	}
	return h5meta.Open(f.raw, st.Size())
}

// mappings reads a virtual dataset's mappings through h5meta, falling back to libhdf5.
func (f *File) mappings(h *h5.Dataset) ([]h5.Mapping, error) {
	if !f.writeMu.TryRLock() { // a commit is writing: libhdf5 answers (see BeginWrite)
		return h.Mappings()
	}
	defer f.writeMu.RUnlock()
	if m, err := f.bytesMeta(); err == nil {
		if addr, err := h.Addr(); err == nil {
			if maps, err := m.VirtualMappings(addr); err == nil {
				out := make([]h5.Mapping, len(maps))
				for i, x := range maps {
					out[i] = h5.Mapping(x)
				}
				return out, nil
			}
		}
	}
	return h.Mappings()
}

// index returns the slot index of the raw_data d reads from, making it on first use and
// again after a commit (gen moved on: libhdf5 may have rewritten the index's nodes). Making
// one reads only the layout; lookups read the nodes they need (h5meta.ChunkIndex).
func (f *File) index(d *Dataset) *rawIndex {
	f.mu.Lock()
	ix := f.indexes[d.RawData]
	f.mu.Unlock()
	if ix != nil && ix.gen == f.gen.Load() {
		return ix
	}
	ix = &rawIndex{}
	for _, fl := range d.Filters {
		ix.pipeline = append(ix.pipeline, filters.Filter{ID: fl.ID, Params: fl.Params})
	}
	ix.decode = filters.Supported(ix.pipeline)
	if !f.writeMu.TryRLock() {
		return ix // a commit is writing: no index for now (libhdf5 answers), none kept
	}
	ix.gen = f.gen.Load() // a commit bumps it holding writeMu: the bytes below are this gen's
	if m, err := f.bytesMeta(); err == nil {
		if addr, err := d.raw.Addr(); err == nil {
			if x, err := m.ChunkIndex(addr); err == nil {
				ix.chunks, ix.base = x, m.Base()
			}
		}
	}
	f.writeMu.RUnlock()
	f.mu.Lock()
	f.indexes[d.RawData] = ix
	f.mu.Unlock()
	return ix
}

// slots returns where the raw_data slots at rows offs of d are stored and the index used;
// ok is false when h5meta cannot tell for one of them (libhdf5 answers then).
func (f *File) slots(d *Dataset, offs ...int64) (cis []h5.ChunkInfo, ix *rawIndex, ok bool) {
	for {
		ix = f.index(d)
		if ix.chunks == nil {
			return nil, ix, false
		}
		if !f.writeMu.TryRLock() {
			return nil, ix, false // a commit is writing: libhdf5 answers
		}
		if ix.gen != f.gen.Load() { // a commit came between: its index
			f.writeMu.RUnlock()
			continue
		}
		cis, ok = ix.lookup(offs)
		f.writeMu.RUnlock()
		return cis, ix, ok
	}
}

// lookup finds the slots at rows offs; call with File.writeMu held for reading.
func (ix *rawIndex) lookup(offs []int64) ([]h5.ChunkInfo, bool) {
	cs := make([]h5meta.Chunk, len(offs))
	if found, err := ix.chunks.LookupRows(offs, cs); err != nil || !found {
		return nil, false
	}
	out := make([]h5.ChunkInfo, len(offs))
	for i, c := range cs {
		if c.Addr < 0 {
			return nil, false
		}
		out[i] = h5.ChunkInfo{Offset: ix.base + c.Addr, Size: c.Size, FilterMask: c.FilterMask}
	}
	return out, true
}

// readSlot reads and decodes the chunk at slot row off straight from the file; ok is false
// when the fast path cannot serve it (unknown slot, filter not decodable in Go).
func (f *File) readSlot(d *Dataset, off int64, size int) (data []byte, ok bool, err error) {
	cis, ix, found := f.slots(d, off)
	if !found || !ix.decode {
		return nil, false, nil
	}
	ci := cis[0]
	stored := make([]byte, ci.Size)
	if _, err := f.raw.ReadAt(stored, ci.Offset); err != nil {
		return nil, false, fmt.Errorf("%s: slot at row %d: reading its %d bytes at file offset %d: %w", d.RawData, off, ci.Size, ci.Offset, err)
	}
	out, err := filters.Decoder{Inflate: h5.Inflate, Scratch: &f.scratch}.Decode(stored, ix.pipeline, ci.FilterMask, d.Type.Size, size, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%s: slot at row %d: %w", d.RawData, off, err)
	}
	return out, true, nil
}

// Prefetch loads the chunks at the given slot rows concurrently into the chunk cache, so
// that a read spanning many chunks decodes them on every core.
func (s rawSource) Prefetch(offs []int64) {
	d := s.d
	var todo []int64
	for _, off := range offs {
		if d.f.chunks.get(chunkKey{d.RawData, off}) == nil {
			todo = append(todo, off)
		}
	}
	if len(todo) < 2 || !d.f.index(d).decode {
		return // one chunk, or libhdf5 (one lock): nothing to gain
	}
	var wg sync.WaitGroup
	work := make(chan int64)
	for w := 0; w < min(len(todo), runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range work {
				s.Chunk(off) // errors surface again when the read itself asks
			}
		}()
	}
	for _, off := range todo {
		work <- off
	}
	close(work)
	wg.Wait()
}

// slotInfo returns the storage of the raw_data slots the blocks use.
func (f *File) slotInfo(d *Dataset) ([]h5.ChunkInfo, error) {
	offs := make([]int64, len(d.blocks()))
	for i, b := range d.blocks() {
		if b.Row%d.Chunks[0] != 0 {
			return nil, fmt.Errorf("slot at row %d is not chunk-aligned", b.Row)
		}
		offs[i] = b.Row
	}
	if cis, _, ok := f.slots(d, offs...); ok {
		return cis, nil
	}
	// h5meta could not read this index: ask libhdf5.
	coords := make([][]int64, len(offs))
	for i, off := range offs {
		coords[i] = make([]int64, len(d.Chunks))
		coords[i][0] = off
	}
	return d.raw.ChunkInfo(coords)
}

// bytesLock is what a commit's sync holds while it writes over the file's durable bytes
// (h5.File.SetApplyLock): the only moment they change, since the journal driver holds every
// other write over them until then and new chunks and metadata go past their end. Readers
// of metadata from the bytes take writeMu shared, so they see the old state or the new
// one whole, and keep their fast path for the rest of the commit; the gen bump makes slot
// indexes built before stale. Lock ordering: the h5.File's sync lock, then writeMu.
//
// Whatever would read metadata from the bytes while writeMu is held asks libhdf5 instead
// (TryRLock), whose state between two calls is consistent, so not even the apply makes
// readers of other versions wait.
type bytesLock struct{ f *File }

func (l bytesLock) Lock() {
	l.f.writeMu.Lock()
	l.f.gen.Add(1) // slot indexes made before may read nodes the apply rewrites
	l.f.writing.Store(true)
}

func (l bytesLock) Unlock() {
	l.f.writing.Store(false)
	l.f.writeMu.Unlock()
}

// Fd is the descriptor of the HDF5 file's bytes, opened read-only, that located ranges
// refer to.
func (f *File) Fd() uintptr { return f.raw.Fd() }

// Reply is how ReadOrLocate answered a read of N bytes: copied into the caller's buffer,
// or located in the file, as one range at FileOff (Located; for splicing from File.Fd) or
// as Vec, slices of the file's mapping in the read's order. Vec stays mapped as long as
// the Reply is reachable: keep it until the slices are written, then call Release.
type Reply struct {
	N       int
	Located bool
	FileOff int64
	Vec     [][]byte
	keep    *fileMap
	spans   []span // Vec's, in the file
}

// Release tells the mapping Vec's bytes are written. Their pages are unmapped from the
// process (they stay in the page cache) once replies have spanned releaseBytes of the
// file: a stream of reads would otherwise count every page of the file it touched in the
// mount's resident set.
func (r Reply) Release() {
	if r.keep != nil {
		r.keep.release(r.spans)
	}
}

// locate answers a read of an unfiltered dataset, made of pieces (piecesOf), from where
// its bytes are in the file (fileSpans), for a caller that takes ranges of up to maxRange
// bytes: one range when the read is one span (a read inside one chunk, or of chunks stored
// in the order they are read), else slices of the file's mapping; else the spans are read
// into p, one pread each. ok is false, with nothing read, when fileSpans is (the chunk
// route serves those).
func (d *Dataset) locate(pieces []staged.Run, p []byte, maxRange int) (r Reply, ok bool, err error) {
	spans, ok := d.fileSpans(pieces)
	if !ok {
		return Reply{}, false, nil
	}
	r.N = len(p)
	if maxRange > 0 {
		// Bytes the file no longer has would reach the reader as a short read (splice) or
		// none (writev faults): the file must still hold them, else the read fails (EIO).
		if err := d.f.holds(spans); err != nil {
			return Reply{}, false, fmt.Errorf("%s: %w", d.Path, err)
		}
		if len(spans) == 1 && r.N <= maxRange {
			r.Located, r.FileOff = true, spans[0].at
			return r, true, nil
		}
		if r.Vec = d.f.fmap.slices(spans); r.Vec != nil {
			r.keep, r.spans = d.f.fmap, spans
			return r, true, nil
		}
	}
	for _, s := range spans {
		if _, err := d.f.raw.ReadAt(p[s.dst:s.dst+s.n], s.at); err != nil {
			return Reply{}, false, fmt.Errorf("%s: reading %d bytes of chunks at file offset %d: %w", d.Path, s.n, s.at, err)
		}
	}
	return r, true, nil
}

// holds reports an error unless the file is still long enough for spans (it was cut
// short after it was opened).
func (f *File) holds(spans []span) error {
	var end int64
	for _, s := range spans {
		end = max(end, s.at+s.n)
	}
	st, err := f.raw.Stat()
	if err != nil {
		return fmt.Errorf("stat of the file: %w", err)
	}
	if st.Size() < end {
		return fmt.Errorf("chunks end at file offset %d, but the file now has %d bytes", end, st.Size())
	}
	return nil
}

// span is a run of a read's bytes stored contiguously in the file: at in the file, dst in
// the read.
type span struct{ at, dst, n int64 }

// fileSpans returns where the bytes of a read of an unfiltered dataset, made of pieces
// (piecesOf), are in the file, in the read's order; pieces that follow each other both in
// the file and in the read (chunks stored in the order they are read, as a sequential
// writer leaves them) make one span, so that a 512 KiB read of 4 KiB chunks is one pread
// or splice, not 128. False when a chunk is not found.
func (d *Dataset) fileSpans(pieces []staged.Run) ([]span, bool) {
	offs := make([]int64, len(pieces))
	for i, pc := range pieces {
		offs[i] = pc.SlabOffset
	}
	cis, _, ok := d.f.slots(d, offs...)
	if !ok {
		return nil, false
	}
	var out []span
	for i, pc := range pieces {
		s := span{cis[i].Offset + pc.ChunkOff, pc.DstOff, pc.N}
		if last := len(out) - 1; last >= 0 && s.at == out[last].at+out[last].n && s.dst == out[last].dst+out[last].n {
			out[last].n += s.n
			continue
		}
		out = append(out, s)
	}
	return out, true
}

// piecesOf splits the read [off, off+n) into pieces, each contiguous both in a chunk of
// raw_data and in the read, in the read's order: from the chunk grid alone when every
// chunk is one run of the dataset's bytes (staged.Array.Runs: 1-D datasets, or chunks as
// wide as the dataset), else from a plan, which it returns too (nil when it made none).
// ok is false when a piece is not on raw_data (fill chunks, staged data) or not
// contiguous in both.
func (d *Dataset) piecesOf(off, n int64) (pieces []staged.Run, plan *staged.GetItemPlan, ok bool, err error) {
	if runs, ok := d.arr.Runs(off, n); ok {
		for _, r := range runs {
			if r.Slab != staged.BaseSlab {
				return nil, nil, false, nil
			}
		}
		return runs, nil, true, nil
	}
	if plan, err = d.arr.GetItemPlan(off, n); err != nil {
		return nil, nil, false, fmt.Errorf("%s: %w", d.Path, err)
	}
	pieces, ok = planPieces(d, plan)
	return pieces, plan, ok, nil
}

// planPieces returns a plan's transfers as pieces (piecesOf) in the read's order
// (transfers come in slot order), or false.
func planPieces(d *Dataset, plan *staged.GetItemPlan) ([]staged.Run, bool) {
	isz := int64(d.Type.Size)
	out := make([]staged.Run, 0, len(plan.Transfers))
	for i := range plan.Transfers {
		t := &plan.Transfers[i]
		if t.Slab != staged.BaseSlab {
			return nil, false
		}
		// Single elements on the leading axes, then one run, then whole chunk extents that
		// are also the dataset's on the trailing axes.
		j := 0
		for j < len(t.Count)-1 && t.Count[j] == 1 {
			j++
		}
		var lin, elems int64 = 0, 1
		for k := range t.Count {
			if k > j && (t.Start[k] != 0 || t.Count[k] != d.Chunks[k] || d.Chunks[k] != d.Shape[k]) {
				return nil, false
			}
			lin = lin*d.Chunks[k] + t.Start[k]
			elems *= t.Count[k]
		}
		lo, hi := int64(t.ByteLo), (elems-1)*isz+int64(t.ByteHi)
		out = append(out, staged.Run{Slab: t.Slab, SlabOffset: t.SlabOffset, ChunkOff: lin*isz + lo, DstOff: t.DstOff + lo, N: hi - lo})
	}
	slices.SortFunc(out, func(a, b staged.Run) int { return cmp.Compare(a.DstOff, b.DstOff) })
	return out, true
}

// maxSlices bounds the pieces of a read that ReadSlices answers: each is one iovec of the
// reply's writev, and pieces of small chunks gain little over one copy.
const maxSlices = 64

// ReadSlices answers a read of up to n bytes at off of a filtered dataset with the bytes of
// its decoded chunks themselves, in order, when each piece of the read is contiguous in its
// chunk and in the read: the FUSE reply is then written from them (writev) rather than
// copied into one buffer first. Cached chunks are never modified, so the slices stay valid.
// ok is false, with nothing read, when the read must be copied (ReadOrLocate).
func (d *Dataset) ReadSlices(off int64, n int) (vec [][]byte, ok bool, err error) {
	if d.arr == nil || len(d.Filters) == 0 || off < 0 || off >= d.size {
		return nil, false, nil
	}
	size := min(int64(n), d.size-off)
	pieces, _, ok, err := d.piecesOf(off, size)
	if err != nil || !ok || len(pieces) > maxSlices {
		return nil, false, err
	}
	// The reply is the pieces end to end.
	var end int64
	offs := make([]int64, len(pieces))
	for i, pc := range pieces {
		if pc.DstOff != end {
			return nil, false, nil
		}
		end += pc.N
		offs[i] = pc.SlabOffset
	}
	if end != size {
		return nil, false, nil
	}
	src := rawSource{d}
	src.Prefetch(offs)
	out := make([][]byte, len(pieces))
	for i, pc := range pieces {
		data, err := src.Chunk(pc.SlabOffset)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", d.Path, err)
		}
		if pc.ChunkOff+pc.N > int64(len(data)) {
			return nil, false, fmt.Errorf("%s: slot at row %d: %d bytes decoded, %d needed", d.RawData, pc.SlabOffset, len(data), pc.ChunkOff+pc.N)
		}
		out[i] = data[pc.ChunkOff : pc.ChunkOff+pc.N]
	}
	d.readAhead(off, off+size)
	return out, true, nil
}

// readAheadBytes is how far past a sequential read of a filtered dataset its chunks are
// decoded in the background (at least two chunks): two of the kernel's read-ahead requests
// (fsnode raises them to 512 KiB), so that both cores decode while a request is copied out
// rather than only while it waits for its own chunks.
const readAheadBytes = 1 << 20

// aheadState is where a dataset's background decoding stands: the bytes [next, end) of the
// dataset are still to be decoded, by workers running goroutines.
type aheadState struct {
	mu        sync.Mutex
	next, end int64 // GUARDED_BY(mu)
	workers   int   // GUARDED_BY(mu)
	lastEnd   int64 // where the last read ended; GUARDED_BY(mu)
}

// readAhead moves the window of background decoding past the read [off, end) of a
// filtered dataset when the read continues a sequential reader (it starts near where the
// last read ended: the kernel's read-ahead requests can arrive out of order), and starts
// workers for it while the File has decoding slots free (GOMAXPROCS in all). Workers follow
// the window as it moves, so that the next requests find their chunks decoded.
func (d *Dataset) readAhead(off, end int64) {
	if len(d.Filters) == 0 || !d.f.index(d).decode {
		return
	}
	a := &d.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.lastEnd
	a.lastEnd = end
	if off < prev-readAheadBytes || off > prev+readAheadBytes {
		return // a random read
	}
	window := max(readAheadBytes, 2*int64(d.arr.ChunkBytes()))
	if a.next < end || a.next > end+window { // behind the reader, or ahead of another stream
		a.next = end
	}
	a.end = min(end+window, d.size)
	for a.workers < cap(d.f.ahead) && a.next < a.end {
		select {
		case d.f.ahead <- struct{}{}:
			a.workers++
			go d.decodeAhead()
		default:
			return // every slot busy (other datasets' workers)
		}
	}
}

// decodeAhead is one read-ahead worker: it decodes the chunks under the window's next
// chunk-sized step of bytes that are neither cached nor being loaded, until the window is
// done.
func (d *Dataset) decodeAhead() {
	a := &d.ahead
	defer func() { <-d.f.ahead }()
	step := int64(d.arr.ChunkBytes())
	for {
		a.mu.Lock()
		if a.next >= a.end {
			a.workers--
			a.mu.Unlock()
			return
		}
		lo, n := a.next, min(step, a.end-a.next)
		a.next += n
		a.mu.Unlock()
		plan, err := d.arr.GetItemPlan(lo, n)
		if err != nil {
			continue
		}
		for _, t := range plan.Transfers {
			if k := (chunkKey{d.RawData, t.SlabOffset}); t.Slab == staged.BaseSlab && !d.f.chunks.has(k) {
				rawSource{d}.Chunk(t.SlabOffset) // an error shows again when the read itself asks
			}
		}
	}
}
