package chunkstore

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/filters"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
)

// Source is one raw_data dataset, as the store reads its slots.
type Source struct {
	Path     string      // raw_data's HDF5 path: the key of its slot index and cached chunks
	Raw      *h5.Dataset // libhdf5's handle: its address, and what the fast path cannot read
	Filters  []h5.Filter
	ElemSize int
	Chunks   []int64 // raw_data's chunk shape
}

// Chunked is a dataset whose bytes are chunks of one raw_data: its chunk map (grid index
// -> slot) over the store. It is also the chunkmap.ChunkSource of write handles.
type Chunked struct {
	s     *Store
	src   Source
	m     *chunkmap.Map
	name  string  // the dataset's HDF5 path, for errors
	shape []int64 // the dataset's
	size  int64   // the dataset's bytes
	ahead aheadState
	// maxPieces bounds the pieces one pass of Read plans (see window); 0 is
	// defaultMaxPieces (tests set fewer).
	maxPieces int
}

// Chunked serves the dataset name of the given shape and size in bytes, whose chunk map is
// m, from raw_data src. m must not change afterwards.
func (s *Store) Chunked(name string, src Source, m *chunkmap.Map, shape []int64, size int64) *Chunked {
	return &Chunked{s: s, src: src, m: m, name: name, shape: shape, size: size}
}

// Read reads the dataset's bytes [off, off+len(p)), clipped to its size, and answers with
// a Reply of N bytes (0 at or past the end; no io.EOF). With maxRange 0 the bytes are always
// copied into p. With maxRange > 0 the caller can also take bytes straight from the file
// or the cache: an unfiltered range is located, as one range of the file of up to maxRange
// bytes or as slices of the file's mapping; a filtered read whose pieces are whole runs of
// decoded chunks is answered with those. The byte range is planned once for all the routes.
func (c *Chunked) Read(p []byte, off int64, maxRange int) (Reply, error) {
	if off >= c.size || off < 0 {
		return Reply{}, nil
	}
	if maxRange > 0 && len(c.src.Filters) > 0 {
		if vec, ok, err := c.slices(off, len(p)); err != nil {
			return Reply{}, err
		} else if ok {
			n := 0
			for _, v := range vec {
				n += len(v)
			}
			return Reply{N: n, Vec: vec}, nil
		}
	}
	p = p[:min(int64(len(p)), c.size-off)]
	if w := c.window(); len(p) > w {
		// Planned a window at a time and copied: the plan of a read of 1 MiB of one-byte
		// chunks is a million pieces, some 150 MB while it lasts.
		for done := 0; done < len(p); {
			r, err := c.Read(p[done:min(len(p), done+w)], off+int64(done), 0)
			if err != nil {
				return Reply{}, err
			}
			if r.N == 0 {
				break
			}
			done += r.N
		}
		return Reply{N: len(p)}, nil
	}
	var plan *chunkplan.GetItemPlan
	if len(c.src.Filters) == 0 {
		pieces, pl, ok, err := c.piecesOf(off, int64(len(p)))
		if err != nil {
			return Reply{}, err
		}
		if ok {
			if r, ok, err := c.locate(pieces, p, maxRange); ok || err != nil {
				return r, err
			}
		}
		plan = pl
	}
	if plan == nil {
		var err error
		if plan, err = c.m.GetItemPlan(off, int64(len(p))); err != nil {
			return Reply{}, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if err := c.m.ReadPlan(plan, p, c); err != nil {
		return Reply{}, fmt.Errorf("%s: %w", c.name, err)
	}
	c.readAhead(off, off+int64(len(p)))
	return Reply{N: len(p)}, nil
}

// Chunk returns the decoded chunk at raw_data row off through the store's cache: read by
// its file offset and decoded in Go, or read by libhdf5 (filters Go does not decode, or a
// slot h5meta did not find). The chunk is shared: callers must not modify it.
func (c *Chunked) Chunk(off int64) ([]byte, error) {
	return c.s.chunks.getOrLoad(chunkKey{c.src.Path, off}, func() ([]byte, error) {
		size := int64(c.src.ElemSize)
		for _, n := range c.src.Chunks {
			size *= n
		}
		buf, ok, err := c.readSlot(off, int(size))
		if err != nil || ok {
			return buf, err
		}
		rawShape := c.src.Raw.Info().Shape
		start := make([]int64, len(c.src.Chunks))
		count := make([]int64, len(c.src.Chunks))
		start[0] = off
		for i, n := range c.src.Chunks {
			count[i] = max(0, min(n, rawShape[i]-start[i]))
		}
		buf = make([]byte, size)
		err = c.src.Raw.ReadBox(start, count, c.src.Chunks, make([]int64, len(c.src.Chunks)), buf)
		return buf, err
	})
}

// rawIndex is where the slots of one raw_data live in the file.
type rawIndex struct {
	chunks   *h5meta.ChunkIndex // nil: h5meta cannot read this index (libhdf5 then)
	base     int64              // file offset of HDF5 address 0
	gen      uint64             // Store.gen when made
	pipeline []filters.Filter
	decode   bool // every filter of the pipeline decodes in Go
}

// index returns the slot index of the raw_data c reads from, making it on first use and
// again after a commit (gen moved on: libhdf5 may have rewritten the index's nodes). Making
// one reads only the layout; lookups read the nodes they need (h5meta.ChunkIndex).
func (c *Chunked) index() *rawIndex {
	c.s.idxMu.Lock()
	ix := c.s.indexes[c.src.Path]
	c.s.idxMu.Unlock()
	if ix != nil && ix.gen == c.s.gen.Load() {
		return ix
	}
	ix = &rawIndex{}
	for _, fl := range c.src.Filters {
		ix.pipeline = append(ix.pipeline, filters.Filter{ID: fl.ID, Params: fl.Params})
	}
	ix.decode = filters.Supported(ix.pipeline)
	if !c.s.writeMu.TryRLock() {
		return ix // a commit is writing: no index for now (libhdf5 answers), none kept
	}
	ix.gen = c.s.gen.Load() // a commit bumps it holding writeMu: the bytes below are this gen's
	if m, err := c.s.Meta(); err == nil {
		if addr, err := c.src.Raw.Addr(); err == nil {
			if x, err := m.ChunkIndex(addr); err == nil {
				ix.chunks, ix.base = x, m.Base()
			}
		}
	}
	c.s.writeMu.RUnlock()
	c.s.idxMu.Lock()
	c.s.indexes[c.src.Path] = ix
	c.s.idxMu.Unlock()
	return ix
}

// slots returns where the raw_data slots at rows offs are stored and the index used;
// ok is false when h5meta cannot tell for one of them (libhdf5 answers then).
func (c *Chunked) slots(offs ...int64) (cis []h5.ChunkInfo, ix *rawIndex, ok bool) {
	for {
		ix = c.index()
		if ix.chunks == nil {
			return nil, ix, false
		}
		if !c.s.writeMu.TryRLock() {
			return nil, ix, false // a commit is writing: libhdf5 answers
		}
		if ix.gen != c.s.gen.Load() { // a commit came between: its index
			c.s.writeMu.RUnlock()
			continue
		}
		cis, ok = ix.lookup(offs)
		c.s.writeMu.RUnlock()
		return cis, ix, ok
	}
}

// lookup finds the slots at rows offs; call with Store.writeMu held for reading.
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
func (c *Chunked) readSlot(off int64, size int) (data []byte, ok bool, err error) {
	cis, ix, found := c.slots(off)
	if !found || !ix.decode {
		return nil, false, nil
	}
	ci := cis[0]
	stored := make([]byte, ci.Size)
	if _, err := c.s.raw.ReadAt(stored, ci.Offset); err != nil {
		return nil, false, fmt.Errorf("%s: slot at row %d: reading its %d bytes at file offset %d: %w", c.src.Path, off, ci.Size, ci.Offset, err)
	}
	out, err := filters.Decoder{Inflate: h5.Inflate, Scratch: &c.s.scratch}.Decode(stored, ix.pipeline, ci.FilterMask, c.src.ElemSize, size, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%s: slot at row %d: %w", c.src.Path, off, err)
	}
	return out, true, nil
}

// Prefetch loads the chunks at the given slot rows concurrently into the chunk cache, so
// that a read spanning many chunks decodes them on every core.
func (c *Chunked) Prefetch(offs []int64) {
	var todo []int64
	for _, off := range offs {
		if c.s.chunks.get(chunkKey{c.src.Path, off}) == nil {
			todo = append(todo, off)
		}
	}
	if len(todo) < 2 || !c.index().decode {
		return // one chunk, or libhdf5 (one lock): nothing to gain
	}
	var wg sync.WaitGroup
	work := make(chan int64)
	for w := 0; w < min(len(todo), runtime.GOMAXPROCS(0)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range work {
				c.Chunk(off) // errors surface again when the read itself asks
			}
		}()
	}
	for _, off := range todo {
		work <- off
	}
	close(work)
	wg.Wait()
}

// Slots returns where the raw_data slots at rows offs (chunk-aligned) are stored.
func (c *Chunked) Slots(offs []int64) ([]h5.ChunkInfo, error) {
	if cis, _, ok := c.slots(offs...); ok {
		return cis, nil
	}
	// h5meta could not read this index: ask libhdf5.
	coords := make([][]int64, len(offs))
	for i, off := range offs {
		coords[i] = make([]int64, len(c.src.Chunks))
		coords[i][0] = off
	}
	cis, err := c.src.Raw.ChunkInfo(coords)
	if err != nil {
		return nil, fmt.Errorf("%s: slots: %w", c.src.Path, err)
	}
	return cis, nil
}

// Reply is how a read of N bytes was answered, in one of four ways:
//
//   - copied into the caller's buffer (Located false, Vec nil);
//   - located in the file, as one range at FileOff (Located; for splicing from Fd);
//   - Vec, slices of the file's mapping in the read's order (Mapped): they stay mapped as
//     long as the Reply is reachable, so keep it until the slices are written, then call
//     Release;
//   - Vec, slices of decoded chunks of the store's cache (not Mapped), which are never
//     modified, so they stay valid.
type Reply struct {
	N       int
	Located bool
	FileOff int64
	Fd      uintptr // the descriptor FileOff is in (Store.Fd), when Located
	Vec     [][]byte
	keep    *fileMap
	spans   []span // Vec's, in the file
}

// Mapped reports whether Vec holds slices of the file's mapping (Release them when
// written).
func (r Reply) Mapped() bool { return r.keep != nil }

// Release tells the mapping Vec's bytes are written. Their pages are unmapped from the
// process (they stay in the page cache) once replies have spanned releaseBytes of the
// file: a stream of reads would otherwise count every page of the file it touched in the
// mount's resident set.
func (r Reply) Release() {
	if r.keep != nil {
		r.keep.release(r.spans)
	}
}

// defaultMaxPieces is Chunked.maxPieces' default.
const defaultMaxPieces = 1 << 16

// window is the most bytes one pass of Read plans: maxPieces of the smallest piece a read
// can make, a row of a chunk along the last axis.
func (c *Chunked) window() int {
	piece := int64(c.src.ElemSize)
	if n := len(c.src.Chunks); n > 0 {
		piece *= max(c.src.Chunks[n-1], 1)
	}
	return int(min(max(piece, 1)*int64(cmp.Or(c.maxPieces, defaultMaxPieces)), 1<<30))
}

// locate answers a read of an unfiltered dataset, made of pieces (piecesOf), from where
// its bytes are in the file (fileSpans), for a caller that takes ranges of up to maxRange
// bytes: one range when the read is one span (a read inside one chunk, or of chunks stored
// in the order they are read), else slices of the file's mapping (up to maxSlices); else
// the spans are copied into p, from the mapping when there are more than maxSlices, else
// one pread each. ok is false, with nothing read, when fileSpans is (the chunk
// route serves those).
func (c *Chunked) locate(pieces []chunkplan.Run, p []byte, maxRange int) (r Reply, ok bool, err error) {
	spans, ok := c.fileSpans(pieces)
	if !ok {
		return Reply{}, false, nil
	}
	r.N = len(p)
	many := len(spans) > maxSlices // more than a reply's writev takes, or worth a pread each
	if maxRange > 0 || many {
		// Bytes the file no longer has would reach the reader as a short read (splice) or
		// none (writev faults, and so would a copy): the file must still hold them, else
		// the read fails (EIO).
		if err := c.s.holds(spans); err != nil {
			return Reply{}, false, fmt.Errorf("%s: %w", c.name, err)
		}
	}
	if maxRange > 0 && len(spans) == 1 && r.N <= maxRange {
		r.Located, r.FileOff, r.Fd = true, spans[0].at, c.s.Fd()
		return r, true, nil
	}
	if maxRange > 0 || many {
		if vec := c.s.fmap.slices(spans); vec != nil {
			if maxRange > 0 && !many {
				r.Vec, r.keep, r.spans = vec, c.s.fmap, spans
				return r, true, nil
			}
			// A read of 128 KiB of one-byte chunks is 131,072 places: past IOV_MAX for a
			// writev, and a system call each as preads. Copied from the mapping instead.
			err := copyMapped(p, vec, spans)
			c.s.fmap.release(spans)
			if err != nil {
				return Reply{}, false, fmt.Errorf("%s: %w", c.name, err)
			}
			return r, true, nil
		}
	}
	for _, s := range spans {
		if _, err := c.s.raw.ReadAt(p[s.dst:s.dst+s.n], s.at); err != nil {
			return Reply{}, false, fmt.Errorf("%s: reading %d bytes of chunks at file offset %d: %w", c.name, s.n, s.at, err)
		}
	}
	return r, true, nil
}

// copyMapped copies each slice of the file's mapping in vec to p at its span's place; a
// fault (the file was cut short since holds checked it) is an error, not a crash.
func copyMapped(p []byte, vec [][]byte, spans []span) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			err = errors.New("the file changed while it was read")
		}
	}()
	for i, v := range vec {
		copy(p[spans[i].dst:spans[i].dst+spans[i].n], v)
	}
	return nil
}

// holds reports an error unless the file is still long enough for spans (it was cut
// short after it was opened).
func (s *Store) holds(spans []span) error {
	var end int64
	for _, sp := range spans {
		end = max(end, sp.at+sp.n)
	}
	st, err := s.raw.Stat()
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
func (c *Chunked) fileSpans(pieces []chunkplan.Run) ([]span, bool) {
	offs := make([]int64, len(pieces))
	for i, pc := range pieces {
		offs[i] = pc.SlabOffset
	}
	cis, _, ok := c.slots(offs...)
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
// chunk is one run of the dataset's bytes (chunkmap.Map.Runs: 1-D datasets, or chunks as
// wide as the dataset), else from a plan, which it returns too (nil when it made none).
// ok is false when a piece is not on raw_data (fill chunks) or not
// contiguous in both.
func (c *Chunked) piecesOf(off, n int64) (pieces []chunkplan.Run, plan *chunkplan.GetItemPlan, ok bool, err error) {
	if runs, ok := c.m.Runs(off, n); ok {
		for _, r := range runs {
			if r.Slab != chunkplan.BaseSlab {
				return nil, nil, false, nil
			}
		}
		return runs, nil, true, nil
	}
	if plan, err = c.m.GetItemPlan(off, n); err != nil {
		return nil, nil, false, fmt.Errorf("%s: %w", c.name, err)
	}
	pieces, ok = c.planPieces(plan)
	return pieces, plan, ok, nil
}

// planPieces returns a plan's transfers as pieces (piecesOf) in the read's order
// (transfers come in slot order), or false.
func (c *Chunked) planPieces(plan *chunkplan.GetItemPlan) ([]chunkplan.Run, bool) {
	isz := int64(c.src.ElemSize)
	out := make([]chunkplan.Run, 0, len(plan.Transfers))
	for i := range plan.Transfers {
		t := &plan.Transfers[i]
		if t.Slab != chunkplan.BaseSlab {
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
			if k > j && (t.Start[k] != 0 || t.Count[k] != c.src.Chunks[k] || c.src.Chunks[k] != c.shape[k]) {
				return nil, false
			}
			lin = lin*c.src.Chunks[k] + t.Start[k]
			elems *= t.Count[k]
		}
		lo, hi := int64(t.ByteLo), (elems-1)*isz+int64(t.ByteHi)
		out = append(out, chunkplan.Run{Slab: t.Slab, SlabOffset: t.SlabOffset, ChunkOff: lin*isz + lo, DstOff: t.DstOff + lo, N: hi - lo})
	}
	slices.SortFunc(out, func(a, b chunkplan.Run) int { return cmp.Compare(a.DstOff, b.DstOff) })
	return out, true
}

// maxSlices bounds the pieces of a read that slices answers: each is one iovec of the
// reply's writev, and pieces of small chunks gain little over one copy.
const maxSlices = 64

// slices answers a read of up to n bytes at off of a filtered dataset with the bytes of
// its decoded chunks themselves, in order, when each piece of the read is contiguous in its
// chunk and in the read: the FUSE reply is then written from them (writev) rather than
// copied into one buffer first. Cached chunks are never modified, so the slices stay valid.
// ok is false, with nothing read, when the read must be copied.
func (c *Chunked) slices(off int64, n int) (vec [][]byte, ok bool, err error) {
	if c.m == nil || len(c.src.Filters) == 0 || off < 0 || off >= c.size {
		return nil, false, nil
	}
	size := min(int64(n), c.size-off)
	pieces, _, ok, err := c.piecesOf(off, size)
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
	c.Prefetch(offs)
	out := make([][]byte, len(pieces))
	for i, pc := range pieces {
		data, err := c.Chunk(pc.SlabOffset)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", c.name, err)
		}
		if pc.ChunkOff+pc.N > int64(len(data)) {
			return nil, false, fmt.Errorf("%s: slot at row %d: %d bytes decoded, %d needed", c.src.Path, pc.SlabOffset, len(data), pc.ChunkOff+pc.N)
		}
		out[i] = data[pc.ChunkOff : pc.ChunkOff+pc.N]
	}
	c.readAhead(off, off+size)
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
// workers for it while the Store has decoding slots free (GOMAXPROCS in all). Workers follow
// the window as it moves, so that the next requests find their chunks decoded.
func (c *Chunked) readAhead(off, end int64) {
	if len(c.src.Filters) == 0 || !c.index().decode {
		return
	}
	a := &c.ahead
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.lastEnd
	a.lastEnd = end
	if off < prev-readAheadBytes || off > prev+readAheadBytes {
		return // a random read
	}
	window := max(readAheadBytes, 2*int64(c.m.ChunkBytes()))
	if a.next < end || a.next > end+window { // behind the reader, or ahead of another stream
		a.next = end
	}
	a.end = min(end+window, c.size)
	for a.workers < cap(c.s.ahead) && a.next < a.end {
		select {
		case c.s.ahead <- struct{}{}:
			a.workers++
			go c.decodeAhead()
		default:
			return // every slot busy (other datasets' workers)
		}
	}
}

// decodeAhead is one read-ahead worker: it decodes the chunks under the window's next
// chunk-sized step of bytes that are neither cached nor being loaded, until the window is
// done.
func (c *Chunked) decodeAhead() {
	a := &c.ahead
	defer func() { <-c.s.ahead }()
	step := int64(c.m.ChunkBytes())
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
		plan, err := c.m.GetItemPlan(lo, n)
		if err != nil {
			continue
		}
		for _, t := range plan.Transfers {
			if k := (chunkKey{c.src.Path, t.SlabOffset}); t.Slab == chunkplan.BaseSlab && !c.s.chunks.has(k) {
				c.Chunk(t.SlabOffset) // an error shows again when the read itself asks
			}
		}
	}
}
