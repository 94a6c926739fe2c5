// Package inspect answers the command line's questions about a file's history: walking
// prev_version (log), which datasets changed between two versions, and which chunks and
// elements differ (diff), decided from the chunk maps and hash tables package versions
// reads, reading data only where those cannot tell; and which HDF5 attributes of the
// groups and datasets two versions share changed (AttrChanges), so that a version that
// changes only metadata does not read as no change. Nothing here is on a mount's path.
//
// Memory: a dataset of ten million chunks must compare in 256 MiB. Chunk maps are walked in
// grid order (versions.Dataset.EachBlock), never listed or keyed by strings; what one
// version's walk must leave for the other's is flat (slotTable: 4 bytes a chunk; counts
// per raw_data slot), and the chunks that differ are runs of places in the grid. A chunk
// map of a million chunks or more is dropped from the File's cache and collected before
// another version's is loaded (release), so one is held at a time; DiffElements reads the
// differing chunks in batches, from one version and then the other (variable-length
// strings, whose texts package versions holds whole, both texts side by side).
package inspect

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"path"
	"slices"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

// History follows prev_version from the committed version start back to the root and
// returns the versions newest first (start included). The walk stops at
// __first_version__, at a parent that is not a committed version (a dangling parent: the
// last version returned keeps its PrevVersion), or at a cycle.
func History(f *versions.File, start string) ([]versions.Version, error) {
	v, ok, err := f.Version(start)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("version %s: %w", start, versions.ErrNotFound)
	}
	seen := map[string]bool{}
	var out []versions.Version
	for ok && !seen[v.Name] {
		seen[v.Name] = true
		out = append(out, v)
		if v.PrevVersion == "" {
			break
		}
		if v, ok, err = f.Version(v.PrevVersion); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Change kinds of DatasetChange.
const (
	Added    = "added"
	Removed  = "removed"
	Modified = "modified"
)

// DatasetChange is one dataset that differs between two versions.
type DatasetChange struct {
	Path string // relative to the version
	Kind string // Added, Removed or Modified
}

// ChangedDatasets compares the datasets of two versions by their chunk maps: a dataset
// is modified if its shape or its chunk -> raw_data slot map differs; datasets only in
// one version are added or removed. from == "" compares against the empty root
// (__first_version__), so every dataset of to is added. The result is sorted by path.
func ChangedDatasets(f *versions.File, from, to string) ([]DatasetChange, error) {
	var a []string
	var err error
	if from != "" {
		if a, err = f.DatasetPaths(from); err != nil {
			return nil, err
		}
	}
	b, err := f.DatasetPaths(to)
	if err != nil {
		return nil, err
	}
	inA := map[string]bool{}
	for _, p := range a {
		inA[p] = true
	}
	var out []DatasetChange
	for _, p := range b {
		if !inA[p] {
			out = append(out, DatasetChange{p, Added})
			continue
		}
		delete(inA, p)
		same, err := sameMap(f, from, to, p)
		if err != nil {
			return nil, err
		}
		if !same {
			out = append(out, DatasetChange{p, Modified})
		}
	}
	for p := range inA {
		out = append(out, DatasetChange{p, Removed})
	}
	slices.SortFunc(out, func(x, y DatasetChange) int { return strings.Compare(x.Path, y.Path) })
	return out, nil
}

// sameMap compares the chunk maps of rel in v1 and v2 by walking v2's in grid order
// against v1's slotTable; v1's map is let go before v2's is loaded (see release).
func sameMap(f *versions.File, v1, v2, rel string) (bool, error) {
	d1, err := f.VersionDataset(v1, rel)
	if err != nil {
		return false, err
	}
	shape, dtype := d1.Shape, d1.Type.DType
	t1, err := slotsOf(f, d1)
	if err != nil {
		return false, err
	}
	if t1 != nil {
		n := gridChunks(d1.Shape, d1.Chunks)
		d1 = nil
		release(f, v1, n)
	}
	d2, err := f.VersionDataset(v2, rel)
	if err != nil {
		return false, err
	}
	if !slices.Equal(shape, d2.Shape) || dtype != d2.Type.DType {
		return false, nil
	}
	if t1 == nil { // no chunk map: fall back to the bytes
		return sameBytes(d1, d2)
	}
	walk2, err := walkSlots(f, d2)
	if err != nil {
		return false, err
	}
	if walk2 == nil { // v2 has no chunk map: v1's dataset again, for its bytes
		if d1, err = f.VersionDataset(v1, rel); err != nil {
			return false, err
		}
		return sameBytes(d1, d2)
	}
	differ := errors.New("differ")
	n2 := 0
	err = walk2(func(grid []int64, raw string, row int64) error {
		n2++
		k, in := t1.index(grid)
		if !in || raw != t1.raw {
			return differ
		}
		if r1, stored := t1.row(k); !stored || r1 != row {
			return differ
		}
		return nil
	})
	switch {
	case errors.Is(err, differ):
		return false, nil
	case err != nil:
		return false, err
	}
	return n2 == t1.stored, nil
}

// ChunkStats counts a version's dataset chunks: total in its grid, stored (mapped to a
// raw_data slot) and shared with the parent version (stored in a slot the parent's
// dataset of the same path also uses). ok is false when the dataset has no chunk map.
// The version's map and the parent's are walked one after the other, with a count of
// chunks per slot in between.
func ChunkStats(f *versions.File, version, rel string) (total, stored, shared int, ok bool, err error) {
	d, err := f.VersionDataset(version, rel)
	if err != nil {
		return 0, 0, 0, false, err
	}
	walk, err := walkSlots(f, d)
	if err != nil || walk == nil {
		return 0, 0, 0, false, err
	}
	var raw string
	var per slotCounts
	err = walk(func(_ []int64, r string, row int64) error {
		raw = r
		stored++
		per.add(row, d.Chunks[0])
		return nil
	})
	if err != nil {
		return 0, 0, 0, false, err
	}
	total = int(gridChunks(d.Shape, d.Chunks))
	v, _, err := f.Version(version)
	if err != nil || v.PrevVersion == "" {
		return total, stored, 0, true, err
	}
	n := gridChunks(d.Shape, d.Chunks)
	d, walk = nil, nil
	release(f, version, n)
	pd, err := f.VersionDataset(v.PrevVersion, rel)
	if errors.Is(err, versions.ErrNotFound) {
		return total, stored, 0, true, nil
	} else if err != nil {
		return 0, 0, 0, false, err
	}
	walkP, err := walkSlots(f, pd)
	if err != nil || walkP == nil {
		return total, stored, 0, true, err
	}
	err = walkP(func(_ []int64, r string, row int64) error {
		if r == raw {
			shared += per.take(row) // once per slot, however many parent chunks use it
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, false, err
	}
	return total, stored, shared, true, nil
}

// slotCounts counts chunks per raw_data row: in a flat slice by slot (row / unit) while
// rows are whole slots, in a map for the others.
type slotCounts struct {
	unit int64
	flat []uint32
	odd  map[int64]int
}

func (c *slotCounts) add(row, unit int64) {
	c.unit = max(unit, 1)
	if row%c.unit != 0 {
		if c.odd == nil {
			c.odd = map[int64]int{}
		}
		c.odd[row]++
		return
	}
	i := row / c.unit
	if i >= int64(len(c.flat)) {
		c.flat = slices.Grow(c.flat, int(i+1)-len(c.flat))[:i+1]
	}
	c.flat[i]++
}

// take returns the count of row and forgets it.
func (c *slotCounts) take(row int64) int {
	if c.unit == 0 {
		return 0
	}
	if row%c.unit != 0 {
		n := c.odd[row]
		delete(c.odd, row)
		return n
	}
	i := row / c.unit
	if i >= int64(len(c.flat)) {
		return 0
	}
	n := int(c.flat[i])
	c.flat[i] = 0
	return n
}

// ChunkChange is one chunk that differs between two versions of a dataset.
type ChunkChange struct {
	Grid []int64 // grid index
	// Start and Stop bound the elements the chunk covers (half-open, per axis): in the
	// newer version, or in the older one for removed chunks.
	Start, Stop []int64
	Kind        string // Added (only in v2's grid), Removed (only in v1's), Modified
}

// DatasetDiff is the chunk-level comparison of one dataset between two versions.
type DatasetDiff struct {
	Path           string
	Kind           string // "", Added, Removed or Modified
	Shape1, Shape2 []int64
	Chunks         []int64
	Total          int // chunks in the union of both grids
	// The chunks that differ (Changes), as runs [from, to) of places in the C order of the
	// union grid (gmax chunks per axis): 16 bytes a run, not a ChunkChange a chunk; whole
	// when the dataset differs as a whole, not chunk by chunk.
	runs  []int64
	gmax  []int64
	whole bool
	// How the unchanged/changed chunks were decided: same slot, equal or different
	// hash-table digests, or by reading the data.
	SameSlot, SameDigest, DiffDigest, ReadData int
}

// NumChanged is the number of chunks that differ.
func (dd *DatasetDiff) NumChanged() int {
	n := 0
	if dd.whole {
		n++
	}
	for i := 0; i < len(dd.runs); i += 2 {
		n += int(dd.runs[i+1] - dd.runs[i])
	}
	return n
}

// Changes yields the chunks that differ, in grid order: the whole dataset (Grid nil) when
// it is not compared chunk by chunk.
func (dd *DatasetDiff) Changes() iter.Seq[ChunkChange] { return dd.changesIn(0, dd.NumChanged()) }

// changesIn yields the changes Changes yields, from the from-th to before the to-th.
func (dd *DatasetDiff) changesIn(from, to int) iter.Seq[ChunkChange] {
	return func(yield func(ChunkChange) bool) {
		if dd.whole {
			if from == 0 && to > 0 {
				yield(ChunkChange{Grid: nil, Start: make([]int64, len(dd.Shape2)), Stop: slices.Clone(dd.Shape2), Kind: Modified})
			}
			return
		}
		n := len(dd.gmax)
		seen := 0 // changes in the runs before run i
		for i := 0; i < len(dd.runs) && seen < to; i += 2 {
			lo, hi := dd.runs[i], dd.runs[i+1]
			first := lo + int64(max(from-seen, 0))
			seen += int(hi - lo)
			hi -= int64(max(seen-to, 0))
			for k := first; k < hi; k++ {
				ch := ChunkChange{Grid: make([]int64, n), Start: make([]int64, n), Kind: Modified}
				stop1, stop2 := make([]int64, n), make([]int64, n)
				in1, in2 := true, true
				for j, rest := n-1, k; j >= 0; j-- {
					ch.Grid[j] = rest % dd.gmax[j]
					rest /= dd.gmax[j]
					ch.Start[j] = ch.Grid[j] * dd.Chunks[j]
					stop1[j] = min(ch.Start[j]+dd.Chunks[j], dd.Shape1[j])
					stop2[j] = min(ch.Start[j]+dd.Chunks[j], dd.Shape2[j])
					in1 = in1 && stop1[j] > ch.Start[j]
					in2 = in2 && stop2[j] > ch.Start[j]
				}
				ch.Stop = stop2
				switch {
				case in1 && !in2:
					ch.Kind, ch.Stop = Removed, stop1
				case !in1 && in2:
					ch.Kind = Added
				}
				if !yield(ch) {
					return
				}
			}
		}
	}
}

// changed records that the chunk at place k of the union grid differs; places come in
// increasing order.
func (dd *DatasetDiff) changed(k int64) {
	if n := len(dd.runs); n > 0 && dd.runs[n-1] == k {
		dd.runs[n-1]++
		return
	}
	dd.runs = append(dd.runs, k, k+1)
}

// DiffDataset compares dataset rel between versions v1 and v2 chunk by chunk. A chunk
// differs when its extent differs or its contents do; contents are decided from the
// chunk maps: the same raw_data slot holds the same data, different slots whose
// hash-table digests are equal hold the same data, different digests mean different data;
// only chunks that cannot be decided that way (one side unmapped, no usable digest) are
// read and compared.
func DiffDataset(f *versions.File, v1, v2, rel string) (DatasetDiff, error) {
	dd := DatasetDiff{Path: rel}
	old, err := loadOld(f, v1, rel)
	if err != nil {
		return dd, err
	}
	found1, shape1, chunks1, dtype1, raw1, fill1, strings1 := old.found, old.shape, old.chunks, old.dtype, old.raw, old.fill, old.strings
	t1, t1Err, d1 := old.t, old.tErr, old.d
	// v1's dataset again, when data must be read from it.
	load1 := func() (*versions.Dataset, error) {
		if d1 == nil {
			var err error
			d1, err = f.VersionDataset(v1, rel)
			return d1, err
		}
		return d1, nil
	}
	d2, err := f.VersionDataset(v2, rel)
	if err != nil && !errors.Is(err, versions.ErrNotFound) {
		return dd, err
	}
	switch {
	case !found1 && d2 == nil:
		return dd, fmt.Errorf("%s: %w in %s or %s", rel, versions.ErrNotFound, v1, v2)
	case !found1:
		dd.Kind, dd.Shape2, dd.Chunks = Added, d2.Shape, d2.Chunks
		return dd, nil
	case d2 == nil:
		dd.Kind, dd.Shape1, dd.Chunks = Removed, shape1, chunks1
		return dd, nil
	}
	dd.Shape1, dd.Shape2, dd.Chunks = shape1, d2.Shape, d2.Chunks
	if dtype1 != d2.Type.DType || len(shape1) != len(d2.Shape) || !slices.Equal(chunks1, d2.Chunks) || chunks1 == nil {
		// Not comparable chunk by chunk: the whole dataset differs unless its bytes are equal.
		same := false
		if dtype1 == d2.Type.DType && slices.Equal(shape1, d2.Shape) {
			if d1, err = load1(); err != nil {
				return dd, err
			}
			if same, err = sameBytes(d1, d2); err != nil {
				return dd, err
			}
		}
		if !same {
			dd.Kind = Modified
			dd.whole = true
		}
		return dd, nil
	}
	if t1Err != nil {
		return dd, t1Err
	}
	var dig1, dig2 map[int64]digestRow
	if !strings1 {
		dig1 = digests(f, raw1)
		dig2 = dig1
		if d2.RawData != raw1 {
			dig2 = digests(f, d2.RawData)
		}
	}
	chunks := chunks1
	n := len(chunks)
	gmax := make([]int64, n)
	for i := range gmax {
		gmax[i] = max(ceilDiv(shape1[i], chunks[i]), ceilDiv(d2.Shape[i], chunks[i]))
	}
	// The union grid is walked in C order, and v2's stored chunks in their grid's C order,
	// which is the same order: each of v2's chunks meets its place in the walk.
	w := unionWalk{grid: make([]int64, n), gmax: gmax, done: slices.Contains(gmax, 0)}
	dd.gmax = gmax
	start, stop1, stop2 := make([]int64, n), make([]int64, n), make([]int64, n)
	walk2, err := walkSlots(f, d2)
	if err != nil {
		return dd, err
	}
	has2 := walk2 != nil // v2 has a chunk map
	visit := func(mapped2 bool, rawB string, rowB int64) error {
		grid := w.grid
		dd.Total++
		in1, in2 := true, true
		for i, g := range grid {
			start[i] = g * chunks[i]
			stop1[i] = min(start[i]+chunks[i], shape1[i])
			stop2[i] = min(start[i]+chunks[i], d2.Shape[i])
			in1 = in1 && stop1[i] > start[i]
			in2 = in2 && stop2[i] > start[i]
		}
		kind := "" // Changes makes the ChunkChange again from the place
		switch {
		case in1 && !in2:
			kind = Removed
		case !in1 && in2:
			kind = Added
		case in1 && in2 && !slices.Equal(stop1, stop2):
			kind = Modified
		case in1 && in2:
			var rowA int64
			mapped1 := false
			if t1 != nil {
				k, _ := t1.index(grid)
				rowA, mapped1 = t1.row(k)
			}
			same, err := func() (bool, error) {
				switch {
				case t1 != nil && has2 && mapped1 && mapped2 && t1.raw == rawB && rowA == rowB:
					dd.SameSlot++
					return true, nil
				case t1 != nil && has2 && !mapped1 && !mapped2 && bytes.Equal(fill1, d2.Fill):
					dd.SameSlot++ // both unmapped: fill
					return true, nil
				case mapped1 && mapped2 && dig1 != nil && dig2 != nil:
					r1, h1 := dig1[rowA]
					r2, h2 := dig2[rowB]
					ext := stop1[0] - start[0]
					if h1 && h2 && r1.rows == ext && r2.rows == ext {
						if r1.sum == r2.sum {
							dd.SameDigest++
							return true, nil
						}
						dd.DiffDigest++
						return false, nil
					}
				}
				dd.ReadData++
				d1, err := load1()
				if err != nil {
					return false, err
				}
				return sameBox(d1, d2, start, stop1)
			}()
			if err != nil {
				return err
			}
			if !same {
				kind = Modified
			}
		}
		if kind != "" {
			dd.changed(w.k)
		}
		w.next()
		return nil
	}
	if has2 {
		err = walk2(func(g []int64, raw string, row int64) error {
			for !w.done && slices.Compare(w.grid, g) < 0 {
				if err := visit(false, "", 0); err != nil {
					return err
				}
			}
			if w.done || !slices.Equal(w.grid, g) {
				return nil // not in the union grid: cannot be
			}
			return visit(true, raw, row)
		})
	}
	if err != nil {
		return dd, err
	}
	for !w.done {
		if err := visit(false, "", 0); err != nil {
			return dd, err
		}
	}
	if len(dd.runs) > 0 || !slices.Equal(shape1, d2.Shape) {
		dd.Kind = Modified
	}
	return dd, nil
}

// oldSide is what DiffDataset keeps of the older version's dataset: its chunk map is let
// go once its slotTable is made (see release).
type oldSide struct {
	found         bool
	shape, chunks []int64
	dtype, raw    string
	fill          []byte
	strings       bool
	t             *slotTable
	tErr          error             // reported only if the datasets are compared chunk by chunk
	d             *versions.Dataset // nil once let go
}

// loadOld loads version v's dataset rel for DiffDataset. In a function of its own, so that
// nothing of its frame refers to the dataset when it is collected.
func loadOld(f *versions.File, v, rel string) (oldSide, error) {
	d, err := f.VersionDataset(v, rel)
	if errors.Is(err, versions.ErrNotFound) {
		return oldSide{}, nil
	} else if err != nil {
		return oldSide{}, err
	}
	o := oldSide{found: true, shape: d.Shape, chunks: d.Chunks, dtype: d.Type.DType, raw: d.RawData, fill: d.Fill, strings: d.Strings, d: d}
	if d.Chunks != nil {
		if o.t, o.tErr = slotsOf(f, d); o.t != nil {
			n := gridChunks(d.Shape, d.Chunks)
			o.d, d = nil, nil
			release(f, v, n)
		}
	}
	return o, nil
}

// unionWalk steps through a grid of gmax chunks per axis in C order.
type unionWalk struct {
	grid, gmax []int64
	k          int64 // the place of grid in C order
	done       bool
}

func (w *unionWalk) next() {
	w.k++
	for i := len(w.grid) - 1; i >= 0; i-- {
		if w.grid[i]++; w.grid[i] < w.gmax[i] {
			return
		}
		w.grid[i] = 0
	}
	w.done = true
}

// DiffVersions compares every dataset of v1 and v2 (or only rel, when given).
func DiffVersions(f *versions.File, v1, v2, rel string) ([]DatasetDiff, error) {
	var paths []string
	if rel != "" {
		paths = []string{strings.Trim(rel, "/")}
	} else {
		a, err := f.DatasetPaths(v1)
		if err != nil {
			return nil, err
		}
		b, err := f.DatasetPaths(v2)
		if err != nil {
			return nil, err
		}
		paths = append(a, b...)
		slices.Sort(paths)
		paths = slices.Compact(paths)
	}
	out := make([]DatasetDiff, 0, len(paths))
	for _, p := range paths {
		dd, err := DiffDataset(f, v1, v2, p)
		if err != nil {
			return nil, err
		}
		out = append(out, dd)
	}
	return out, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// digestRow is one hash_table row: the slot's digest and its rows on axis 0.
type digestRow struct {
	sum  [32]byte
	rows int64
}

// digests reads the hash table of the data group of raw_data raw, by slot row; nil when it has
// none vh5fs can use (then chunks are compared by their data).
func digests(f *versions.File, raw string) map[int64]digestRow {
	if raw == "" {
		return nil
	}
	tp := versions.HashTableIn(path.Dir(raw))
	if k, err := f.HDF5().Kind(tp); err != nil || k != h5.KindDataset {
		return nil
	}
	ht, err := f.HDF5().OpenDataset(tp)
	if err != nil {
		return nil
	}
	defer ht.Close()
	if hashtable.CheckTable(ht) != nil {
		return nil
	}
	n := ht.Info().Shape[0]
	if l, ok, err := hashtable.Largest(f.HDF5(), tp); err == nil && ok && l <= n {
		n = l
	}
	if n == 0 {
		return nil
	}
	out := make(map[int64]digestRow, n)
	if err := hashtable.Scan(ht, n, func(_ int64, r hashtable.Row) error {
		out[r.Start] = digestRow{sum: r.Digest, rows: r.Stop - r.Start}
		return nil
	}); err != nil {
		return nil
	}
	return out
}

// sameBytes compares two whole datasets by their bytes.
func sameBytes(d1, d2 *versions.Dataset) (bool, error) {
	if d1.Size() != d2.Size() {
		return false, nil
	}
	const step = 1 << 20
	b1, b2 := make([]byte, min(step, d1.Size())), make([]byte, min(step, d1.Size()))
	for off := int64(0); off < d1.Size(); off += step {
		n1, err := d1.ReadAt(b1, off)
		if err != nil {
			return false, err
		}
		n2, err := d2.ReadAt(b2, off)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(b1[:n1], b2[:n2]) {
			return false, nil
		}
	}
	return true, nil
}

// sameBox compares the elements [start, stop) of two datasets of the same shape there.
func sameBox(d1, d2 *versions.Dataset, start, stop []int64) (bool, error) {
	r1, err := boxRows(d1, start, stop)
	if err != nil {
		return false, err
	}
	r2, err := boxRows(d2, start, stop)
	if err != nil {
		return false, err
	}
	if len(r1) != len(r2) {
		return false, nil
	}
	for i := range r1 {
		if !bytes.Equal(r1[i], r2[i]) {
			return false, nil
		}
	}
	return true, nil
}

// boxRows reads the box [start, stop) of d as runs along the last axis: bytes for
// fixed-size elements, newline-terminated JSON strings for variable-length strings.
func boxRows(d *versions.Dataset, start, stop []int64) ([][]byte, error) {
	n := len(start)
	if n == 0 {
		b := make([]byte, d.Size())
		_, err := d.ReadAt(b, 0)
		return [][]byte{b}, err
	}
	var lines *lineIndex
	if d.Strings {
		var err error
		if lines, err = linesOf(d); err != nil {
			return nil, err
		}
	}
	strides := make([]int64, n)
	s := int64(1)
	for i := n - 1; i >= 0; i-- {
		strides[i] = s
		s *= d.Shape[i]
	}
	var out [][]byte
	err := eachRow(start, stop, func(row []int64, lo, hi int64) error {
		flat := lo
		for i := range n - 1 {
			flat += row[i] * strides[i]
		}
		if d.Strings { // a row's elements are consecutive lines
			from, to := lines.offset(flat), lines.offset(flat+hi-lo)
			b := make([]byte, to-from)
			if _, err := d.ReadAt(b, from); err != nil {
				return err
			}
			out = append(out, b)
			return nil
		}
		b := make([]byte, (hi-lo)*int64(d.Type.Size))
		if _, err := d.ReadAt(b, flat*int64(d.Type.Size)); err != nil {
			return err
		}
		out = append(out, b)
		return nil
	})
	return out, err
}
