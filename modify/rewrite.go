package modify

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/txn"
	"github.com/vh5fs/vh5fs/versions"
)

// writer appends the new chunks of every version to the new raw_data, deduplicated.
type writer struct {
	m        *modification
	raw      *h5.Dataset
	chunks   []int64 // the new chunk shape
	size     int     // the new element size
	chunkLen int     // bytes of a whole new chunk
	enc      func([]byte) ([]byte, error)
	slots    map[[32]byte]int64 // digest -> slot
	rows     []byte             // hash_table rows, hashtable.RowBytes each, in slot order
	pending  []pendingChunk     // new chunks not written yet, in slot order
	extent   int64              // raw_data's extent, in slots
	// memo maps a band's source (sources.key) to the new slots of its chunks.
	memo map[[32]byte][]int64 // GUARDED_BY(mu)
	mu   sync.Mutex           // guards memo and res.Read between the cutters and the deduplicator
	res  *Result
	done int64
}

type pendingChunk struct {
	slot int64
	data []byte   // the whole chunk, padding holding the fill value
	strs []string // of a string dataset instead: the whole chunk, padding ""
}

// band is one row of new chunks of a version, cut and hashed.
type band struct {
	slots   []int64 // from the memo: nothing to read or hash
	key     [32]byte
	keyed   bool
	data    [][]byte   // each chunk, whole
	strs    [][]string // of a string dataset instead: each chunk, whole
	digests [][32]byte
	trimmed [][]int64
}

func workers() int { return runtime.GOMAXPROCS(0) }

// failHook, set by tests, makes the run fail where it returns an error.
var failHook func(step string) error

// run rewrites the dataset in one transaction (package txn): the body builds the new data
// group and every version's new virtual dataset under scratch, where no reader reaches
// them; the publish swaps them in. A failure before the sync leaves the file as it was.
func (m *modification) run(res *Result, progress func(done, total int64)) error {
	h := m.f.HDF5()
	if k, err := h.Kind(scratch); err != nil {
		return err
	} else if k != h5.KindMissing {
		return fmt.Errorf("%s exists (left by an interrupted modify_metadata?): remove it first", scratch)
	}
	var vds []string
	var raw *h5.Dataset
	err := txn.Run(h, txn.Change{
		Body: func() (err error) {
			vds, raw, err = m.build(res, progress)
			return err
		},
		Publish: func() error { return m.swap(vds) },
		InPlace: true, // the swap relinks every version's dataset
	})
	// The new raw_data stays open through the swap and is closed before a failure is
	// cancelled (so no Undo here): with it closed before the swap, or after the cancel,
	// the race detector's exit crashed in TestFailureHalfway (libhdf5 state at exit).
	if raw != nil {
		raw.Close()
	}
	if err != nil { // nothing written here reaches the file at its close
		if cerr := h.Cancel(); cerr != nil {
			err = fmt.Errorf("%w; then: %v", err, cerr)
		}
	}
	return err
}

// build writes the new data group under scratch and each version's new virtual dataset
// beside it, returning their paths in m.Versions' order.
func (m *modification) build(res *Result, progress func(done, total int64)) (vds []string, raw *h5.Dataset, err error) {
	h := m.f.HDF5()
	group := scratch + "/data"
	if m.strings {
		err = h.CreateStringDataGroup(group, m.New, m.utf8)
	} else {
		err = h.CreateDataGroup(group, m.New)
	}
	if err != nil {
		return nil, nil, err
	}
	if raw, err = h.OpenDataset(versions.RawDataIn(group)); err != nil {
		return nil, nil, err
	}
	w := &writer{
		m: m, raw: raw, chunks: m.New.Chunks, size: m.to.size,
		chunkLen: m.to.size * int(chunkplan.Elements(m.New.Chunks)),
		enc:      nil,
		slots:    map[[32]byte]int64{},
		memo:     map[[32]byte][]int64{},
		res:      res,
	}
	if !m.strings { // strings go through libhdf5's own pipeline (WriteStrings)
		w.enc = commit.PipelineEncoder(raw.Info().Filters, m.to.size)
	}
	var total int64
	for _, shape := range m.shapes {
		total += bands(shape, w.chunks)
	}
	report := func() {
		if progress != nil {
			progress(w.done, total)
		}
	}
	final := versions.DataGroupOf(m.Dataset)
	src := raw.SourceAs(versions.RawDataIn(final))
	vds = make([]string, len(m.Versions))
	for i, v := range m.Versions {
		// The old version's objects are untouched until the publish: loading them now
		// reads what they held at the start.
		d, err := m.f.Dataset(versions.InVersion(v, m.Dataset))
		if err != nil {
			return nil, raw, fmt.Errorf("version %s: %w", v, err)
		}
		slots, err := w.version(d, report)
		if err != nil {
			return nil, raw, fmt.Errorf("version %s: %w", v, err)
		}
		vds[i] = scratch + "/vds" + strconv.Itoa(i)
		if err := w.virtual(src, d, vds[i], slots); err != nil {
			return nil, raw, fmt.Errorf("version %s: %w", v, err)
		}
		m.f.Forget(v)
	}
	if err := w.finish(versions.HashTableIn(group)); err != nil {
		return nil, raw, err
	}
	res.Slots = int64(len(w.rows) / hashtable.RowBytes)
	return vds, raw, nil
}

// swap moves the built datasets over the old ones and drops scratch.
func (m *modification) swap(vds []string) error {
	h := m.f.HDF5()
	for i, v := range m.Versions {
		p := versions.InVersion(v, m.Dataset)
		if err := h.Unlink(p); err != nil {
			return err
		}
		if err := h.Move(vds[i], p); err != nil {
			return err
		}
		if failHook != nil {
			if err := failHook("swapped " + v); err != nil {
				return err
			}
		}
	}
	final := versions.DataGroupOf(m.Dataset)
	for _, name := range []string{versions.RawData, versions.HashTable} {
		if err := h.Unlink(final + "/" + name); err != nil {
			return err
		}
		if err := h.Move(scratch+"/data/"+name, final+"/"+name); err != nil {
			return err
		}
	}
	return h.Unlink(scratch)
}

// bands is the number of rows of chunks (axis 0) of a dataset of the given shape.
func bands(shape, chunks []int64) int64 {
	if slices.Contains(shape, 0) {
		return 0
	}
	return (shape[0] + chunks[0] - 1) / chunks[0]
}

// grid is the number of chunks of shape along each axis.
func grid(shape, chunks []int64) []int64 {
	g := make([]int64, len(shape))
	for i := range shape {
		g[i] = (shape[i] + chunks[i] - 1) / chunks[i]
	}
	return g
}

// version appends the chunks of one version and returns the slot of each chunk of its
// new grid, in C order.
func (w *writer) version(d *versions.Dataset, report func()) ([]int64, error) {
	nb := bands(d.Shape, w.chunks)
	if nb == 0 {
		return nil, nil
	}
	g := grid(d.Shape, w.chunks)
	perBand := chunkplan.Elements(g[1:])
	out := make([]int64, 0, nb*perBand)
	src := newSources(d, w.chunks)
	var vds *h5.Dataset // a string version is read by value through libhdf5
	if w.m.strings {
		var err error
		if vds, err = w.m.f.HDF5().OpenDataset(d.Path); err != nil {
			return nil, err
		}
		defer vds.Close()
	}
	err := commit.Ordered(int(nb), 2*workers(), func(b int) (*band, error) {
		if vds != nil {
			return w.cutStrings(vds, d.Shape, src, int64(b), g)
		}
		return w.cut(d, src, int64(b), g)
	}, func(b int, bd *band) error {
		slots, err := w.dedup(bd)
		if err != nil {
			return err
		}
		out = append(out, slots...)
		w.done++
		report()
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return out, w.flush()
}

// sources knows which raw_data slots a version's band of new chunks reads: the band's
// memo key. nil for a dataset without a chunk map (its bands are always read).
type sources struct {
	shape, oldChunks, newChunks []int64
	blocks                      []versions.Block
	rowStart                    []int // first block of each old chunk row (axis 0), len rows+1
}

func newSources(d *versions.Dataset, newChunks []int64) *sources {
	blocks, ok := d.Blocks()
	if !ok {
		return nil
	}
	rows := (d.Shape[0] + d.Chunks[0] - 1) / d.Chunks[0]
	s := &sources{shape: d.Shape, oldChunks: d.Chunks, newChunks: newChunks, blocks: blocks, rowStart: make([]int, rows+1)}
	k := 0
	for r := int64(0); r <= rows; r++ {
		for k < len(blocks) && blocks[k].Grid[0] < r {
			k++
		}
		s.rowStart[r] = k
	}
	return s
}

// key digests what band b's data follows from: its index, the version's shape and the
// slot of every old chunk it overlaps (unmapped ones are the fill value).
func (s *sources) key(b int64) [32]byte {
	h := sha256.New()
	var buf [8]byte
	put := func(x int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(x))
		h.Write(buf[:])
	}
	put(b)
	for _, x := range s.shape {
		put(x)
	}
	lo := b * s.newChunks[0]
	hi := min(s.shape[0], lo+s.newChunks[0])
	r0, r1 := lo/s.oldChunks[0], (hi-1)/s.oldChunks[0]
	for _, blk := range s.blocks[s.rowStart[r0]:s.rowStart[r1+1]] {
		for _, x := range blk.Grid {
			put(x)
		}
		put(blk.Row)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// cut reads band b of d (axis-0 rows of one new chunk, across every other axis), and
// makes and hashes its chunks in the new dtype; or, when an earlier version had a band
// of the same source, returns that band's slots.
func (w *writer) cut(d *versions.Dataset, src *sources, b int64, g []int64) (*band, error) {
	bd := &band{}
	if src != nil {
		bd.key, bd.keyed = src.key(b), true
		if slots, ok := w.lookup(bd.key); ok {
			bd.slots = slots
			return bd, nil
		}
	}
	shape := d.Shape
	rank := len(shape)
	c := w.chunks
	lo := b * c[0]
	rows := min(shape[0], lo+c[0]) - lo
	rowElems := chunkplan.Elements(shape[1:])
	from := w.m.from.size
	buf := make([]byte, rows*rowElems*int64(from))
	if n, err := d.ReadAt(buf, lo*rowElems*int64(from)); err != nil {
		return nil, err
	} else if n != len(buf) {
		return nil, fmt.Errorf("read %d bytes of rows %d-%d, not %d", n, lo, lo+rows, len(buf))
	}
	w.addRead(int64(len(buf)))
	// band strides (old dtype, elements)
	strides := make([]int64, rank)
	acc := int64(1)
	for i := rank - 1; i >= 0; i-- {
		strides[i] = acc
		if i > 0 {
			acc *= shape[i]
		} else {
			acc *= rows
		}
	}
	cstrides := make([]int64, rank) // chunk strides, elements
	acc = 1
	for i := rank - 1; i >= 0; i-- {
		cstrides[i] = acc
		acc *= c[i]
	}
	n := chunkplan.Elements(g[1:])
	bd.data = make([][]byte, n)
	bd.digests = make([][32]byte, n)
	bd.trimmed = make([][]int64, n)
	idx := make([]int64, rank) // the chunk's grid index, axes 1..
	for k := int64(0); k < n; k++ {
		if k > 0 {
			chunkplan.Next(idx[1:], g[1:])
		}
		L := make([]int64, rank)
		L[0] = rows
		var base int64 // first element of the chunk in the band
		for a := 1; a < rank; a++ {
			L[a] = min(shape[a], (idx[a]+1)*c[a]) - idx[a]*c[a]
			base += idx[a] * c[a] * strides[a]
		}
		chunk := make([]byte, w.chunkLen)
		w.fill(chunk, L)
		// Copy the trimmed corner, one run of the last axis at a time.
		last := L[rank-1]
		pos := make([]int64, rank-1)
		for {
			var off, coff int64
			for a, x := range pos {
				off += x * strides[a]
				coff += x * cstrides[a]
			}
			w.m.conv.run(chunk[coff*int64(w.size):], buf[(base+off)*int64(from):(base+off+last)*int64(from)], int(last))
			if !chunkplan.Next(pos, L[:rank-1]) {
				break
			}
		}
		bd.data[k], bd.trimmed[k] = chunk, L
	}
	// Hash the chunks of a wide band on every core; a narrow one is one of many bands
	// being cut at once.
	err := commit.Parallel(int(n), func(k int) error {
		bd.digests[k] = hashtable.Hash(bd.data[k], c, bd.trimmed[k], w.size)
		return nil
	})
	return bd, err
}

// fill sets every element of chunk outside the trimmed corner L to the new fill value:
// the padding of a slot reads as the fill value, as libhdf5 leaves a chunk written in
// part.
func (w *writer) fill(chunk []byte, L []int64) {
	if slices.Equal(L, w.chunks) {
		return
	}
	fill := w.m.New.Fill
	for i := 0; i < len(chunk); i += len(fill) {
		copy(chunk[i:], fill)
	}
}

func (w *writer) lookup(k [32]byte) ([]int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.memo[k]
	return s, ok
}

func (w *writer) addRead(n int64) {
	w.mu.Lock()
	w.res.Read += n
	w.mu.Unlock()
}

// dedup gives each chunk of a band its slot, in grid order: the slot of an equal chunk
// stored before, else the next one.
func (w *writer) dedup(bd *band) ([]int64, error) {
	if bd.slots != nil {
		w.res.Chunks += int64(len(bd.slots))
		return bd.slots, nil
	}
	slots := make([]int64, len(bd.digests))
	for k, dg := range bd.digests {
		s, ok := w.slots[dg]
		if !ok {
			s = int64(len(w.rows) / hashtable.RowBytes)
			w.slots[dg] = s
			w.rows = hashtable.Row{Digest: dg, Start: s * w.chunks[0], Stop: s*w.chunks[0] + bd.trimmed[k][0]}.Append(w.rows)
			p := pendingChunk{slot: s}
			if bd.strs != nil {
				p.strs = bd.strs[k]
			} else {
				p.data = bd.data[k]
			}
			w.pending = append(w.pending, p)
		}
		slots[k] = s
	}
	w.res.Chunks += int64(len(slots))
	if bd.keyed {
		w.mu.Lock()
		w.memo[bd.key] = slots
		w.mu.Unlock()
	}
	if len(w.pending) >= 4*workers() {
		return slots, w.flush()
	}
	return slots, nil
}

// flush writes the pending chunks: raw_data grown to hold them, each encoded on every
// core and stored whole with a direct chunk write (libhdf5 filters them where the
// encoder does not run the pipeline, e.g. LZF).
func (w *writer) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := w.grow(int64(len(w.rows)/hashtable.RowBytes), false); err != nil {
		return err
	}
	pend := w.pending
	w.pending = nil
	stored := make([][]byte, len(pend))
	if w.enc != nil {
		if err := commit.Parallel(len(pend), func(i int) error {
			var err error
			stored[i], err = w.enc(pend[i].data)
			return err
		}); err != nil {
			return err
		}
	}
	zero := make([]int64, len(w.chunks))
	for i, p := range pend {
		start := make([]int64, len(w.chunks))
		start[0] = p.slot * w.chunks[0]
		var err error
		if p.strs != nil {
			err = w.raw.WriteStrings(start, w.chunks, p.strs)
		} else if w.enc != nil {
			err = w.raw.WriteChunk(start, 0, stored[i])
		} else {
			err = w.raw.WriteBox(start, w.chunks, w.chunks, zero, p.data)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// grow makes raw_data hold n slots: at least n (twice what it held, when that is more:
// each resize costs libhdf5 a walk of its chunk index and memory), exactly n when exact.
func (w *writer) grow(n int64, exact bool) error {
	if n <= w.extent && !exact || n == w.extent {
		return nil
	}
	if !exact {
		n = max(n, 2*w.extent)
	}
	dims := slices.Clone(w.chunks)
	dims[0] = n * w.chunks[0]
	if err := w.raw.SetExtent(dims); err != nil {
		return err
	}
	w.extent = n
	return nil
}

// finish sets raw_data's extent to its slots, then writes the hash_table rows, then
// largest_index.
func (w *writer) finish(table string) error {
	if err := w.flush(); err != nil {
		return err
	}
	n := int64(len(w.rows) / hashtable.RowBytes)
	if err := w.grow(n, true); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	h := w.m.f.HDF5()
	ht, err := h.OpenDataset(table)
	if err != nil {
		return err
	}
	defer ht.Close()
	return hashtable.Write(h, ht, table, 0, w.rows, n, n)
}

// virtual creates the new virtual dataset of version dataset d at path: one mapping per
// chunk of the new grid into its slot, the new fill value, d's attributes with chunks and
// raw_data naming the new storage.
func (w *writer) virtual(src *h5.Dataset, d *versions.Dataset, path string, slots []int64) error {
	h := w.m.f.HDF5()
	shape := d.Shape
	rank := len(shape)
	var vs, cs, ss []int64
	if len(slots) > 0 {
		g := grid(shape, w.chunks)
		idx := make([]int64, rank)
		for k, s := range slots {
			if k > 0 {
				for a := rank - 1; a >= 0; a-- {
					if idx[a]++; idx[a] < g[a] {
						break
					}
					idx[a] = 0
				}
			}
			for a := range rank {
				start := idx[a] * w.chunks[a]
				vs = append(vs, start)
				cs = append(cs, min(shape[a], start+w.chunks[a])-start)
				if a == 0 {
					ss = append(ss, s*w.chunks[0])
				} else {
					ss = append(ss, 0)
				}
			}
		}
	}
	fill := w.m.New.Fill
	if w.m.strings {
		fill = nil // libhdf5's default, "": versioned-hdf5 sets none for strings
	}
	if err := h.CreateVirtualFlat(path, src, shape, fill, vs, cs, ss); err != nil {
		return err
	}
	if err := h.CopyAttrs(d.Path, path); err != nil {
		return err
	}
	if err := h.SetAttrString(path, versions.AttrRawData, src.Path()); err != nil {
		return err
	}
	return h.SetAttrInt64s(path, versions.AttrChunks, w.chunks)
}

// cutStrings is cut for a variable-length string dataset read through vds (the version's
// virtual dataset; unmapped elements read as ""): each chunk holds its strings in C
// order, "" past the shape, and is hashed as versioned-hdf5 hashes object chunks (the
// trimmed elements only).
func (w *writer) cutStrings(vds *h5.Dataset, shape []int64, src *sources, b int64, g []int64) (*band, error) {
	bd := &band{}
	if src != nil {
		bd.key, bd.keyed = src.key(b), true
		if slots, ok := w.lookup(bd.key); ok {
			bd.slots = slots
			return bd, nil
		}
	}
	rank := len(shape)
	c := w.chunks
	lo := b * c[0]
	count := slices.Clone(shape)
	count[0] = min(shape[0], lo+c[0]) - lo
	start := make([]int64, rank)
	start[0] = lo
	vals, err := vds.ReadStrings(start, count)
	if err != nil {
		return nil, err
	}
	var read int64
	for _, v := range vals {
		read += int64(len(v))
	}
	w.addRead(read)
	n := chunkplan.Elements(g[1:])
	bd.strs = make([][]string, n)
	bd.digests = make([][32]byte, n)
	bd.trimmed = make([][]int64, n)
	idx := make([]int64, rank) // the chunk's grid index; axis 0 stays 0 within the band
	whole := chunkplan.Elements(c)
	for k := int64(0); k < n; k++ {
		if k > 0 {
			for a := rank - 1; a >= 1; a-- {
				if idx[a]++; idx[a] < g[a] {
					break
				}
				idx[a] = 0
			}
		}
		L := make([]int64, rank)
		for a := range rank {
			L[a] = min(count[a], (idx[a]+1)*c[a]) - idx[a]*c[a]
		}
		chunk := make([]string, whole)
		trimmed := make([]string, 0, chunkplan.Elements(L))
		pos := make([]int64, rank)
		for {
			var off, coff int64 // in the band read, in the chunk
			for a := range rank {
				off = off*count[a] + idx[a]*c[a] + pos[a]
				coff = coff*c[a] + pos[a]
			}
			chunk[coff] = vals[off]
			trimmed = append(trimmed, vals[off])
			if !chunkplan.Next(pos, L) {
				break
			}
		}
		bd.strs[k], bd.trimmed[k] = chunk, L
		bd.digests[k] = hashtable.HashStrings(trimmed, L)
	}
	return bd, nil
}
