package commit

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// TimestampLayout is versioned-hdf5's canonical timestamp (always UTC).
const TimestampLayout = "2006-01-02 15:04:05.000000-0700"

// nameLayout gives default version names: unique to the microsecond, sortable by time,
// free of characters a shell or a path would trip on.
const nameLayout = "20060102T150405.000000Z"

// ErrExists is returned when the requested version name is taken.
var ErrExists = errors.New("version already exists")

// Committer writes new versions into one file. Commits are serialised; each appends only
// what it changed (new chunks, hash rows, one version group).
type Committer struct {
	f   *versions.File
	now func() time.Time

	mu      sync.Mutex        // serialises commits; taken before versions.File's locks
	indexes map[string]*index // data group -> hash index; GUARDED_BY(mu)
	next    string            // name for the next commit (SetNextName); GUARDED_BY(mu)

	sinkMu sync.Mutex            // a leaf: held only to look up sinks
	sinks  map[string]*groupSink // data group -> its sinks' slots (sink.go); GUARDED_BY(sinkMu)
}

// New returns a Committer for f, which must have been opened with versions.OpenRW.
func New(f *versions.File) (*Committer, error) {
	if !f.Writable() {
		return nil, fmt.Errorf("commit: %s is open read-only", f.Path())
	}
	if !f.Versioned() {
		return nil, fmt.Errorf("commit: %s is not a versioned-hdf5 file", f.Path())
	}
	return &Committer{f: f, now: time.Now, indexes: map[string]*index{}, sinks: map[string]*groupSink{}}, nil
}

// Close releases the hash tables it holds open.
func (c *Committer) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ix := range c.indexes {
		ix.close()
	}
	c.indexes = map[string]*index{}
}

// SetNextName names the next commit (once); "" restores default names. A name a version
// already has is refused (ErrExists), so that no commit fails on it later.
func (c *Committer) SetNextName(name string) error {
	if name != "" {
		if err := c.free(name); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next = name
	return nil
}

// NextName is the name the next commit will take if set with SetNextName, else "".
func (c *Committer) NextName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || name == versions.FirstVersion || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("commit: %q is not a valid version name", name)
	}
	return nil
}

// Change is one dataset's staged changes on top of a version.
type Change struct {
	Base    string        // the version the changes were made on
	Dataset string        // the dataset's path inside the version, e.g. "grp/ds"
	Array   *staged.Array // the staged changes; re-pointed at the new version on success
	// SkipUnchanged makes no version when the staged data equals the base version's
	// (e.g. bytes rewritten with what they held); Result.Name is then the base.
	SkipUnchanged bool
	// FollowHead commits on top of the current version instead of Base when another commit
	// moved it past Base without changing Dataset (same stored chunks in both, see
	// versions.Dataset.SameStored): the new version then carries the head's other datasets.
	// When the head did change Dataset, the commit makes a sibling off Base, as without
	// FollowHead, and logs a warning naming both versions.
	FollowHead bool
}

// Result describes a commit.
type Result struct {
	Name     string // the new version
	Base     string // its prev_version: Change.Base, or the head a FollowHead change went on
	Skipped  bool   // SkipUnchanged applied: nothing was written
	Written  int    // chunks appended to raw_data
	Ahead    int    // of which a Sink wrote before the commit (found in place)
	Reused   int    // chunks deduplicated against existing slots or each other
	Unmapped int    // staged chunks equal to the fill value, left unmapped
	Bytes    int64  // bytes of raw chunk data appended (before filters)
	Elapsed  time.Duration
	// Where the time went: planning and hashing, raw_data writes, hash_table rows and
	// largest_index, the version group (tree copy and virtual dataset), flush and fsync.
	Plan, Data, Table, Group, Sync time.Duration
}

// newChunk is a chunk the commit appends.
type newChunk struct {
	data    []byte              // nil for a spilled staged chunk, read from arr
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

// Commit writes ch as a new version whose prev_version is ch.Base (or the current
// version, see Change.FollowHead) and makes it current.
// The new version holds the base's whole tree: unchanged datasets and groups are carried
// over with their attributes. It returns once the file is flushed and fsynced. On success
// ch.Array points at the new version's chunks and is clean.
//
// Order of writes (crash safety): chunks and hash rows are appended first and
// largest_index is written last among them (spec section 4); then the version group is
// created with committed=False, filled, its new virtual dataset checked (h5's
// CheckMappingLists), and flagged committed=True; current_version moves last. A commit cut
// short leaves either nothing visible or an uncommitted group, which readers ignore.
func (c *Committer) Commit(ch Change) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.now()
	head := ""
	if ch.FollowHead {
		var err error
		if ch.Base, head, err = c.head(ch); err != nil {
			return Result{}, fmt.Errorf("commit %s on %s: %w", ch.Dataset, ch.Base, err)
		}
	}
	res, err := c.commit(ch, start)
	if err != nil {
		return Result{}, fmt.Errorf("commit %s on %s: %w", ch.Dataset, ch.Base, err)
	}
	res.Base = ch.Base
	res.Elapsed = time.Since(start)
	if res.Skipped {
		slog.Debug("nothing to commit: same data as the base", "base", ch.Base, "dataset", ch.Dataset)
		return res, nil
	}
	if head != "" {
		slog.Warn("the current version does not hold this dataset as the base does: committed a sibling off the base",
			"version", res.Name, "base", ch.Base, "current", head, "dataset", ch.Dataset)
	}
	slog.Info("committed", "version", res.Name, "base", ch.Base, "dataset", ch.Dataset,
		"written", res.Written, "ahead", res.Ahead, "reused", res.Reused, "unmapped", res.Unmapped, "bytes", res.Bytes, "elapsed", res.Elapsed,
		"plan", res.Plan, "data", res.Data, "table", res.Table, "group", res.Group, "sync", res.Sync)
	return res, nil
}

// head is the base a FollowHead change commits on: the current version if it holds
// ch.Dataset as ch.Base does, else ch.Base. conflict names the current version when it
// changed the dataset (or does not have it), which makes the commit a sibling of it.
func (c *Committer) head(ch Change) (base, conflict string, err error) {
	cur, err := c.f.CurrentVersion()
	if err != nil {
		return "", "", fmt.Errorf("reading the current version: %w", err)
	}
	if cur == "" || cur == ch.Base {
		return ch.Base, "", nil
	}
	if _, ok, err := c.f.Version(cur); err != nil {
		return "", "", fmt.Errorf("current version %q: %w", cur, err)
	} else if !ok {
		return ch.Base, cur, nil // a current_version naming no committed version: nothing to follow
	}
	from, err := c.f.Dataset(versions.VersionsGroup + "/" + ch.Base + "/" + ch.Dataset)
	if err != nil {
		return "", "", err
	}
	path := versions.VersionsGroup + "/" + cur + "/" + ch.Dataset
	if k, err := c.f.HDF5().Kind(path); err != nil {
		return "", "", err
	} else if k != h5.KindDataset {
		return ch.Base, cur, nil
	}
	at, err := c.f.Dataset(path)
	if err != nil {
		return "", "", err
	}
	if !from.SameStored(at) {
		return ch.Base, cur, nil
	}
	return cur, "", nil
}

func (c *Committer) commit(ch Change, now time.Time) (Result, error) {
	f := c.f
	base, ok, err := f.Version(ch.Base)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, fmt.Errorf("base version %q: %w", ch.Base, versions.ErrNotFound)
	}
	name, err := c.pickName(now)
	if err != nil {
		return Result{}, err
	}
	if err := c.checkDataVersion(); err != nil {
		return Result{}, err
	}
	ds, err := f.Dataset(base.Path() + "/" + ch.Dataset)
	if err != nil {
		return Result{}, err
	}
	if !ds.Stageable() {
		return Result{}, fmt.Errorf("%s: %w", ds.Path, versions.ErrUnsupported)
	}
	ix, err := c.index(ds)
	if err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	plan, res, err := c.plan(ds, ch.Array, ix)
	if err != nil {
		return Result{}, err
	}
	res.Plan = time.Since(t0)
	if ch.SkipUnchanged && len(plan.fresh) == 0 && plan.sameAs(ds, ch.Array.Shape()) {
		if err := plan.apply(ch.Array); err != nil {
			return Result{}, err
		}
		return Result{Name: ch.Base, Skipped: true}, nil
	}
	if ch.SkipUnchanged {
		keep, err := plan.sameData(ds, ch.Array)
		if err != nil {
			return Result{}, err
		}
		if keep != nil { // the base's data under another chunk map: keep the base's map
			if err := keep.apply(ch.Array); err != nil {
				return Result{}, err
			}
			return Result{Name: ch.Base, Skipped: true}, nil
		}
	}
	entries, err := c.baseEntries(base)
	if err != nil {
		return Result{}, err
	}
	for i := range entries {
		if entries[i].Path == ch.Dataset {
			entries[i].Array = ch.Array
		}
	}
	unchanged := c.loadUnchanged(base, func(p string) bool { return p == ch.Dataset })
	cd := &changedDataset{ds: ds, ix: ix, plan: plan, arr: ch.Array}
	for i := range plan.fresh {
		plan.fresh[i].release = true
	}
	if err := c.appendChunks(ds, ix, plan.fresh, ch.Array.ChunkBytes(), &res); err != nil {
		return Result{}, err
	}
	if err := c.writeVersion(base, name, now, nil, entries, map[string]*changedDataset{ch.Dataset: cd}, unchanged, &res); err != nil {
		return Result{}, err
	}
	c.next = ""
	// The handle continues on top of the new version.
	if err := c.published(versions.VersionsGroup+"/"+name+"/"+ch.Dataset, cd); err != nil {
		return Result{}, err
	}
	res.Name = name
	return res, nil
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
	base, err := ds.NewStaged()
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
		wasMapped := slab == staged.BaseSlab
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
		if Hash(a, chunks, trimmed, isz) != Hash(b, chunks, trimmed, isz) {
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
		keep.remap = append(keep.remap, remap{grid: slices.Clone(g), row: off, full: slab != staged.BaseSlab})
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

func (c *Committer) pickName(now time.Time) (string, error) {
	if c.next != "" {
		return c.next, c.free(c.next)
	}
	base := now.UTC().Format(nameLayout)
	name := base
	for i := 2; c.exists(name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, nil
}

func (c *Committer) exists(name string) bool {
	k, err := c.f.Kind(versions.VersionsGroup + "/" + name)
	return err != nil || k != h5.KindMissing
}

// checkDataVersion upgrades data_version 1 files (done by the caller's attribute write) but
// refuses those with variable-length string data: their hash tables cannot be trusted.
func (c *Committer) checkDataVersion() error {
	if c.f.DataVersion() == versions.SupportedDataVersion {
		return nil
	}
	vlen, err := c.f.HasVlenStringData()
	if err != nil {
		return err
	}
	if vlen {
		return fmt.Errorf("data_version %d file with variable-length string data: rebuild its hash tables with versioned-hdf5 before committing", c.f.DataVersion())
	}
	return nil
}

func (c *Committer) index(ds *versions.Dataset) (*index, error) {
	group := ds.DataGroup()
	if ix, ok := c.indexes[group]; ok {
		return ix, nil
	}
	ix, err := loadIndex(c.f.HDF5(), group, ds.Chunks[0])
	if err != nil {
		return nil, err
	}
	c.indexes[group] = ix
	return ix, nil
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
		seq           uint64
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
	scs := arr.StagedChunks()
	cands := make([]candidate, 0, len(scs))
	for i := range scs {
		sc := &scs[i]
		cd := candidate{grid: sc.Grid, trimmed: arr.Trimmed(sc.Grid), flat: flatOf(sc.Grid), data: sc.Data, digest: sc.Digest, encoded: sc.Encoded, seq: sc.Seq}
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
	err := arr.Each(func(g []int64, slab int32, off int64) error {
		k++
		if slab != staged.BaseSlab {
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
		cands = append(cands, candidate{grid: slices.Clone(g), trimmed: slices.Clone(now), flat: k, data: b, seq: math.MaxUint64})
		return nil
	})
	if err != nil {
		return p, res, err
	}
	// New chunks are appended in staging order, as versioned-hdf5 appends its staged slabs.
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.seq, b.seq) })
	pending := map[[32]byte]int64{}
	fill := fillChunk(ds.Fill, arr.ChunkBytes())
	// Digests on every core (spilled chunks read back one per worker), then the
	// order-dependent decisions in staging order.
	type digest struct {
		sum  [32]byte
		fill bool // a full-size chunk equal to the fill value
	}
	sums := make([]digest, len(cands))
	bufs := sync.Pool{New: func() any { b := make([]byte, arr.ChunkBytes()); return &b }}
	var fillSum [32]byte // the fill chunk's digest, for chunks digested when written
	for _, cd := range cands {
		if cd.digest != nil {
			fillSum = Hash(fill, chunks, chunks, isz)
			break
		}
	}
	err = parallel(len(cands), func(i int) error {
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
		sums[i].sum = Hash(data, chunks, cd.trimmed, isz)
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
		row, ok := ix.slots[d]
		if !ok {
			row, ok = pending[d]
		}
		if ok {
			res.Reused++
		} else {
			row = (ix.largest + int64(len(p.fresh))) * ix.rows
			pending[d] = row
			p.fresh = append(p.fresh, newChunk{data: cd.data, spilled: cd.spilled, arr: arr, trimmed: cd.trimmed, row: row, digest: d, encoded: cd.encoded})
			res.Written++
			res.Bytes += int64(isz) * staged.Elements(cd.trimmed)
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
		if !ok && slab != staged.BaseSlab {
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

// appendChunks writes the new chunks into raw_data, then their rows into hash_table, then
// largest_index: in that order, so a crash leaves only ignored tails (spec section 4).
func (c *Committer) appendChunks(ds *versions.Dataset, ix *index, fresh []newChunk, chunkBytes int, res *Result) error {
	if len(fresh) == 0 {
		return nil
	}
	// Added to: a tree's commit appends to several datasets.
	t0 := time.Now()
	var data time.Duration
	defer func() { res.Data += data; res.Table += time.Since(t0) - data }()
	raw := ds.RawDataset()
	chunks := ds.Chunks
	n := ix.largest + int64(len(fresh))
	dims := slices.Clone(chunks)
	dims[0] = n * ix.rows
	if err := c.claimSlots(ds.DataGroup(), ix, fresh); err != nil {
		return err
	}
	if err := raw.SetExtent(dims); err != nil {
		return err
	}
	toWrite := make([]newChunk, 0, len(fresh))
	for _, nc := range fresh {
		if nc.inPlace {
			res.Ahead++
		} else {
			toWrite = append(toWrite, nc)
		}
	}
	if err := c.writeChunks(raw, toWrite, chunkBytes); err != nil {
		return err
	}
	data = time.Since(t0)
	rows := make([]byte, len(fresh)*hashRowBytes)
	for i, nc := range fresh {
		r := rows[i*hashRowBytes:]
		copy(r, nc.digest[:])
		binary.LittleEndian.PutUint64(r[32:], uint64(nc.row))
		binary.LittleEndian.PutUint64(r[40:], uint64(nc.row+nc.trimmed[0]))
	}
	if err := ix.table.SetExtent([]int64{n}); err != nil {
		return err
	}
	k := int64(len(fresh))
	if err := ix.table.WriteBox([]int64{ix.largest}, []int64{k}, []int64{k}, []int64{0}, rows); err != nil {
		return err
	}
	if err := c.f.HDF5().SetAttrInt64(ix.path, "largest_index", n); err != nil {
		return err
	}
	for _, nc := range fresh {
		ix.slots[nc.digest] = nc.row
	}
	ix.largest = n
	return nil
}

// writeChunks writes the new chunks into raw_data at their slots, in slot order. Whole
// chunks not encoded when they were written are read back (if spilled) and encoded on
// every core, a bounded window ahead of the writer; whole chunks are stored with direct
// chunk writes; edge chunks, and every chunk of a pipeline the encoder does not run, go
// through libhdf5's filtered write of their trimmed box, which leaves the slot's padding
// as versioned-hdf5's writes leave it.
func (c *Committer) writeChunks(raw *h5.Dataset, fresh []newChunk, chunkBytes int) error {
	chunks := raw.Info().Chunks
	enc := newEncoder(raw.Info().Filters, raw.Info().Type.Size)
	zero := make([]int64, len(chunks))
	loads := sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}
	type stored struct {
		data    []byte  // what to write
		encoded []byte  // the encoder's buffer data is in, if any
		load    *[]byte // the loads buffer holding the chunk, if read back
		direct  bool    // data is the whole chunk as stored: a direct chunk write
	}
	release := func(s stored) {
		if s.encoded != nil {
			enc.release(s.encoded)
		}
		if s.load != nil {
			loads.Put(s.load)
		}
	}
	produce := func(i int) (stored, error) {
		nc := &fresh[i]
		if nc.encoded != nil && enc != nil && slices.Equal(nc.trimmed, chunks) {
			return stored{data: nc.encoded, direct: true}, nil // encoded when it was written
		}
		var s stored
		data := nc.data
		if data == nil {
			s.load = loads.Get().(*[]byte)
			var err error
			if data, err = nc.bytes(*s.load); err != nil {
				release(s)
				return stored{}, err
			}
		}
		s.data = data
		if enc == nil || !slices.Equal(nc.trimmed, chunks) {
			return s, nil
		}
		out, owned, err := enc.encode(data)
		if err != nil {
			release(s)
			return stored{}, err
		}
		s.data, s.direct = out, true
		if owned {
			s.encoded = out
		}
		return s, nil
	}
	consume := func(i int, s stored) error {
		defer release(s)
		nc := &fresh[i]
		start := make([]int64, len(chunks))
		start[0] = nc.row
		var err error
		if s.direct {
			err = raw.WriteChunk(start, 0, s.data)
		} else {
			err = raw.WriteBox(start, nc.trimmed, chunks, zero, s.data)
		}
		if err == nil && nc.release && nc.spilled != nil {
			nc.arr.ReleaseSpilled(*nc.spilled)
		}
		return err
	}
	// The chunks go to the file's page cache past its durable end: have the kernel write
	// them back every writebackBytes, on a goroutine of its own, rather than all at the sync.
	var kick, kicked chan struct{} // made at the first start: a small commit starts none
	defer func() {
		if kick != nil {
			close(kick)
			<-kicked
		}
	}()
	var since int64
	write := consume
	consume = func(i int, s stored) error {
		if since += int64(len(s.data)); since >= writebackBytes {
			since = 0
			if kick == nil {
				kick, kicked = make(chan struct{}, 1), make(chan struct{})
				go func() {
					defer close(kicked)
					for range kick {
						if err := c.f.HDF5().StartWriteback(); err != nil {
							slog.Debug("writeback not started", "err", err)
						}
					}
				}()
			}
			select {
			case kick <- struct{}{}:
			default: // one is pending: it covers these pages too
			}
		}
		return write(i, s)
	}
	return ordered(len(fresh), 4*workers(), produce, consume, release)
}

// writebackBytes is how much a commit writes between two starts of the file's writeback.
const writebackBytes = 16 << 20

// loadUnchanged loads the base version's datasets other than the changed ones whose lists
// copyVirtual would copy (and which a commit could have created: fixed-size elements);
// once the commit's write has begun, datasets can no longer be loaded.
func (c *Committer) loadUnchanged(base versions.Version, changed func(path string) bool) map[string]*versions.Dataset {
	paths, err := c.f.DatasetPaths(base.Name)
	if err != nil {
		return nil // H5Ocopy copies them all
	}
	out := map[string]*versions.Dataset{}
	for _, p := range paths {
		src := base.Path() + "/" + p
		if changed(p) {
			continue
		}
		if copies, err := c.f.HDF5().CopiesMappingList(src); err != nil || !copies {
			continue // H5Ocopy copies it; loading it would only add to that
		}
		if ds, err := c.f.Dataset(src); err == nil && ds.Stageable() {
			out[src] = ds
		}
	}
	return out
}

// copyVirtual copies ds, the version dataset at src, to dst with its mapping list as
// stored (h5's CopyVirtual, attributes aside); false if H5Ocopy must copy it.
func (c *Committer) copyVirtual(ds *versions.Dataset, src, dst string) (bool, error) {
	if ds == nil {
		return false, nil
	}
	return c.f.HDF5().CopyVirtual(dst, src, ds.RawDataset(), ds.Shape, definedFill(ds))
}

func (c *Committer) createVirtual(ds *versions.Dataset, dst string, shape []int64, p *plan) error {
	vs, cs, ss := p.vstart, p.count, p.sstart
	if slices.Contains(shape, 0) {
		vs, cs, ss = nil, nil, nil // a zero-size dataset maps nothing
	}
	return c.f.HDF5().CreateVirtualFlat(dst, ds.RawDataset(), shape, definedFill(ds), vs, cs, ss)
}

// definedFill is the fill value a new version of ds sets: nil if ds's creator set none.
func definedFill(ds *versions.Dataset) []byte {
	if !ds.FillDefined() {
		return nil
	}
	return ds.Fill
}

type attr struct {
	name  string
	value any
}

func setAttrs(h *h5.File, path string, attrs []attr) error {
	for _, a := range attrs {
		var err error
		switch v := a.value.(type) {
		case string:
			err = h.SetAttrString(path, a.name, v)
		case bool:
			err = h.SetAttrBool(path, a.name, v)
		case int64:
			err = h.SetAttrInt64(path, a.name, v)
		default:
			err = fmt.Errorf("attribute %s: unsupported type %T", a.name, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
