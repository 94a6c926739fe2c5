package commit

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// newChunk is a chunk the commit appends.
type newChunk struct {
	data    []byte              // nil for a spilled staged chunk, read from arr
	strs    []string            // a string chunk's trimmed values (planStrings), else nil
	spilled *staged.StagedChunk // that chunk
	arr     *staged.Array
	trimmed []int64
	row     int64
	digest  [32]byte
	encoded []byte // the whole chunk as stored, encoded when it was written, or nil
	// release: once written, the spilled chunk's copy in the spill file is given up
	// (staged.Array.ReleaseSpilled), freeing its pages for the commit's own writes.
	release bool
	inPlace bool // a Sink wrote it at row already
}

// bytes returns the chunk's bytes, read into buf (ChunkBytes long) if it is spilled.
func (nc *newChunk) bytes(buf []byte) ([]byte, error) {
	if nc.data != nil {
		return nc.data, nil
	}
	return nc.arr.StagedData(*nc.spilled, buf)
}

// apply points the staged array at the chunks the plan maps and drops its staged data.
func (p *plan) apply(arr *staged.Array) error {
	for _, m := range p.remap {
		var err error
		if m.full {
			err = arr.MapFull(m.grid)
		} else {
			err = arr.MapBase(m.grid, m.row)
		}
		if err != nil {
			return fmt.Errorf("re-pointing the staged array: %w", err)
		}
	}
	arr.MarkClean()
	return nil
}

// sameAs reports whether the plan maps exactly what the base dataset maps.
func (p *plan) sameAs(ds *versions.Dataset, shape []int64) bool {
	grids, rows := p.chunkMap(ds.Chunks)
	return ds.SameChunks(shape, grids, rows)
}

// sameData reports whether the plan holds the base dataset's data: the same shape and, in
// every chunk the two map differently, the same trimmed contents. If so it returns the
// plan that re-points the staged array at the base's own chunk map, else nil. Equal data
// need not mean an equal chunk map: a chunk equal to the fill value is left unmapped when
// it is full but stored when it is trimmed (versioned-hdf5's rule), so an edge chunk that a
// resize left unmapped is stored once written, even with the fill value it held.
func (p *plan) sameData(ds *versions.Dataset, arr *staged.Array) (*plan, error) {
	if !slices.Equal(arr.Shape(), ds.Shape) {
		return nil, nil
	}
	base, err := ds.WriteBase()
	if err != nil {
		return nil, err
	}
	chunks, isz := arr.Chunks(), arr.ItemSize()
	grids, rows := p.chunkMap(chunks) // in grid order, as Each visits the chunks
	fresh := make(map[int64]*newChunk, len(p.fresh))
	for i := range p.fresh {
		fresh[p.fresh[i].row] = &p.fresh[i]
	}
	fill := fillChunk(ds.Fill, arr.ChunkBytes())
	src := ds.ChunkSource()
	bufA, bufB := make([]byte, arr.ChunkBytes()), make([]byte, arr.ChunkBytes())
	content := func(isMapped bool, row int64, buf []byte) ([]byte, error) {
		switch {
		case !isMapped:
			return fill, nil
		case fresh[row] != nil:
			return fresh[row].bytes(buf)
		}
		return src.Chunk(row)
	}
	errDiffers := errors.New("data differs")
	next := 0
	err = base.Each(func(g []int64, slab int32, off int64) error {
		isMapped := next < len(grids) && slices.Equal(grids[next], g)
		var row int64
		if isMapped {
			row = rows[next]
			next++
		}
		wasMapped := slab == chunkplan.BaseSlab
		if isMapped == wasMapped && (!isMapped || row == off) {
			return nil
		}
		a, err := content(wasMapped, off, bufA)
		if err != nil {
			return err
		}
		b, err := content(isMapped, row, bufB)
		if err != nil {
			return err
		}
		trimmed := arr.Trimmed(g)
		if hashtable.Hash(a, chunks, trimmed, isz) != hashtable.Hash(b, chunks, trimmed, isz) {
			return errDiffers
		}
		return nil
	})
	switch {
	case errors.Is(err, errDiffers):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var keep plan
	err = base.Each(func(g []int64, slab int32, off int64) error {
		keep.remap = append(keep.remap, remap{grid: slices.Clone(g), row: off, full: slab != chunkplan.BaseSlab})
		return nil
	})
	return &keep, err
}

// chunkMap lists the mapped chunks' grid indices and slot rows, in grid order.
func (p *plan) chunkMap(chunks []int64) (grids [][]int64, rows []int64) {
	n := p.mappings()
	flat := make([]int64, len(p.vstart))
	grids, rows = make([][]int64, n), make([]int64, n)
	for i := range n {
		g := flat[i*p.rank : (i+1)*p.rank : (i+1)*p.rank]
		for k := range g {
			g[k] = p.vstart[i*p.rank+k] / chunks[k]
		}
		grids[i], rows[i] = g, p.sstart[i*p.rank]
	}
	return grids, rows
}

type remap struct {
	grid []int64
	row  int64
	full bool
}

// plan is a commit's decisions for one dataset: the new version's mappings, one per
// stored chunk in grid order as versioned-hdf5 creates them (flat: rank coordinates per
// mapping), the chunks to append, and where the staged chunks go.
type plan struct {
	rank                  int
	vstart, count, sstart []int64 // the mappings: virtual start, extent, raw_data start
	fresh                 []newChunk
	remap                 []remap // the staged (and re-hashed) chunks' new places
}

// mappings is the number of mappings.
func (p *plan) mappings() int {
	if p.rank == 0 {
		return 0
	}
	return len(p.vstart) / p.rank
}

// emit adds the mapping of chunk grid g, of extent ext, stored at raw_data row row.
func (p *plan) emit(g, chunks, ext []int64, row int64) {
	for i := range g {
		p.vstart = append(p.vstart, g[i]*chunks[i])
		p.sstart = append(p.sstart, 0)
	}
	p.sstart[len(p.sstart)-p.rank] = row
	p.count = append(p.count, ext...)
}

// extent writes the extent of chunk grid g in a dataset of shape into ext; false if the
// chunk lies outside it.
func extent(ext, shape, chunks, g []int64) bool {
	for i := range g {
		start := g[i] * chunks[i]
		if start >= shape[i] {
			return false
		}
		ext[i] = min(chunks[i], shape[i]-start)
	}
	return true
}

// plan is the CommitPlan: it decides, for every chunk of the staged array, which slot the
// new version maps (or none), hashing only staged and re-materialised chunks. Precedence
// follows versioned-hdf5: a full-size chunk equal to the fill value stays unmapped; then an
// existing slot with the same digest (including slots no version uses any more); then the
// first identical chunk of this commit. Its cost beyond the staged chunks is one pass over
// the chunk grid without allocations: a dataset of many chunks and a few changed ones
// plans in little more than the time to list its mappings.
func (c *Committer) plan(ds *versions.Dataset, arr *staged.Array, ix *index) (plan, Result, error) {
	var res Result
	shape, chunks, isz := arr.Shape(), arr.Chunks(), arr.ItemSize()
	rank := len(chunks)
	p := plan{rank: rank}
	type candidate struct {
		grid, trimmed []int64
		flat          int64               // the chunk's index in C order of the grid
		data          []byte              // nil: spilled
		spilled       *staged.StagedChunk // the chunk, if spilled
		digest        *[32]byte           // made when the chunk was written
		encoded       []byte              // likewise
		origin        staged.Origin       // how it was staged: its place in appendOrder
	}
	// Flat chunk indices in C order of the grid, as Each visits the chunks.
	grid := make([]int64, rank)
	for i := range grid {
		grid[i] = (shape[i] + chunks[i] - 1) / chunks[i]
	}
	flatOf := func(g []int64) int64 {
		var k int64
		for i := range g {
			k = k*grid[i] + g[i]
		}
		return k
	}
	scs, err := arr.StagedChunks()
	if err != nil {
		return p, res, err
	}
	cands := make([]candidate, 0, len(scs))
	for i := range scs {
		sc := &scs[i]
		cd := candidate{grid: sc.Grid, trimmed: arr.Trimmed(sc.Grid), flat: flatOf(sc.Grid), data: sc.Data, digest: sc.Digest, encoded: sc.Encoded, origin: sc.Origin}
		if sc.Data == nil {
			cd.spilled = sc
		}
		cands = append(cands, cd)
	}
	// Base chunks whose extent changed must be re-hashed with their new extent, so that a
	// mapping always covers exactly its slot's hashed extent. (Resize stages these
	// already; this keeps the invariant for any other path.)
	src := ds.ChunkSource()
	now, was := make([]int64, rank), make([]int64, rank)
	k := int64(-1)
	mapped := 0 // base chunks mapped as they are
	err = arr.Each(func(g []int64, slab int32, off int64) error {
		k++
		if slab != chunkplan.BaseSlab {
			return nil // full: unmapped; staged: a candidate
		}
		extent(now, shape, chunks, g)
		if extent(was, ds.Shape, chunks, g) && slices.Equal(now, was) {
			mapped++
			return nil
		}
		b, err := src.Chunk(off)
		if err != nil {
			return err
		}
		// After every operation's chunks, as if a last one re-staged them from the base.
		o := staged.Origin{Op: math.MaxUint64, Slab: chunkplan.BaseSlab, Offset: off}
		cands = append(cands, candidate{grid: slices.Clone(g), trimmed: slices.Clone(now), flat: k, data: b, origin: o})
		return nil
	})
	if err != nil {
		return p, res, err
	}
	// New chunks are appended in versioned-hdf5's order (appendOrder).
	slices.SortFunc(cands, func(a, b candidate) int { return appendOrder(a.origin, a.flat, b.origin, b.flat) })
	pending := map[[32]byte]int64{}
	fill := fillChunk(ds.Fill, arr.ChunkBytes())
	// Digests on every core (spilled chunks read back one per worker), then the
	// order-dependent decisions in appendOrder.
	type digest struct {
		sum  [32]byte
		fill bool // a full-size chunk equal to the fill value
	}
	sums := make([]digest, len(cands))
	bufs := sync.Pool{New: func() any { b := make([]byte, arr.ChunkBytes()); return &b }}
	var fillSum [32]byte // the fill chunk's digest, for chunks digested when written
	for _, cd := range cands {
		if cd.digest != nil {
			fillSum = hashtable.Hash(fill, chunks, chunks, isz)
			break
		}
	}
	err = Parallel(len(cands), func(i int) error {
		cd := cands[i]
		if cd.digest != nil { // equal digests are equal chunks, as for deduplication
			sums[i] = digest{sum: *cd.digest, fill: slices.Equal(cd.trimmed, chunks) && *cd.digest == fillSum}
			return nil
		}
		data := cd.data
		if data == nil {
			b := bufs.Get().(*[]byte)
			defer bufs.Put(b)
			var err error
			if data, err = arr.StagedData(*cd.spilled, *b); err != nil {
				return err
			}
		}
		if slices.Equal(cd.trimmed, chunks) && bytes.Equal(data, fill) {
			sums[i].fill = true
			return nil
		}
		sums[i].sum = hashtable.Hash(data, chunks, cd.trimmed, isz)
		return nil
	})
	if err != nil {
		return p, res, err
	}
	rows := make(map[int64]int64, len(cands)) // flat index -> row, for the chunks mapped anew
	for i, cd := range cands {
		if sums[i].fill {
			res.Unmapped++
			p.remap = append(p.remap, remap{grid: cd.grid, full: true})
			continue
		}
		d := sums[i].sum
		row, isNew := p.slot(ix, pending, d)
		if isNew {
			p.fresh = append(p.fresh, newChunk{data: cd.data, spilled: cd.spilled, arr: arr, trimmed: cd.trimmed, row: row, digest: d, encoded: cd.encoded})
			res.Written++
			res.Bytes += int64(isz) * chunkplan.Elements(cd.trimmed)
		} else {
			res.Reused++
		}
		rows[cd.flat] = row
		p.remap = append(p.remap, remap{grid: cd.grid, row: row})
	}
	// The mappings, in grid order: the base's chunks kept where they are, the others
	// where the decisions put them.
	n := mapped + len(rows)
	p.vstart, p.count, p.sstart = make([]int64, 0, n*rank), make([]int64, 0, n*rank), make([]int64, 0, n*rank)
	k = -1
	err = arr.Each(func(g []int64, slab int32, off int64) error {
		k++
		row, ok := rows[k]
		if !ok && slab != chunkplan.BaseSlab {
			return nil
		}
		if !ok {
			row = off
		}
		if extent(now, shape, chunks, g) {
			p.emit(g, chunks, now, row)
		}
		return nil
	})
	return p, res, err
}

// slot is the raw_data row of a chunk of digest d: an existing slot with that digest
// (including slots no version uses any more), else the first of this commit's new chunks
// with it (pending), else the next new slot, which the caller appends to p.fresh (isNew).
func (p *plan) slot(ix *index, pending map[[32]byte]int64, d [32]byte) (row int64, isNew bool) {
	if row, ok := ix.slots[d]; ok {
		return row, false
	}
	if row, ok := pending[d]; ok {
		return row, false
	}
	row = (ix.largest + int64(len(p.fresh))) * ix.rows
	pending[d] = row
	return row, true
}

// appendOrder compares two chunks of a commit, by their staged.Origin and their flat index
// in C order of the chunk grid: the order in which the commit appends the new ones to
// raw_data and hash_table (and decides between equal ones). It is versioned-hdf5's
// (staged_changes.py): each operation stages the chunks it takes off the full or base slab
// on new staged slabs, and the commit (CommitPlan) appends the survivors slab by slab,
// each slab in its order. An assignment (SetItemPlan) puts the chunks it covers in part on
// one slab and those it covers whole on the next, each sorted as _chunks_in_selection
// sorts them (sort_by_slab): by the slab they came from, the full slab's (the fill value)
// before raw_data's, then by their offset there (their slot), equals in grid order; a
// resize (ResizePlan) stages the edge chunks it reloads from raw_data by slot. So: by
// operation, then the chunks covered in part before the whole ones, then fill before
// raw_data, then by slot, then grid order. A change of writes alone is one operation,
// which the library makes of the same change made as one assignment.
func appendOrder(a staged.Origin, af int64, b staged.Origin, bf int64) int {
	if c := cmp.Compare(a.Op, b.Op); c != 0 {
		return c
	}
	if a.Whole != b.Whole {
		if b.Whole {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Slab, b.Slab); c != 0 {
		return c
	}
	if a.Slab == chunkplan.BaseSlab {
		if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
			return c
		}
	}
	return cmp.Compare(af, bf)
}

func fillChunk(fill []byte, n int) []byte {
	out := make([]byte, n)
	if len(fill) == 0 {
		return out
	}
	for i := 0; i < n; i += len(fill) {
		copy(out[i:], fill)
	}
	return out
}
