// Package inspect answers the command line's questions about a file's history: walking
// prev_version (log), which datasets changed between two versions, and which chunks and
// elements differ (diff), decided from the chunk maps and hash tables package versions
// reads, reading data only where those cannot tell; and which HDF5 attributes of the
// groups and datasets two versions share changed (AttrChanges), so that a version that
// changes only metadata does not read as no change. Nothing here is on a mount's path.
package inspect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
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

func sameMap(f *versions.File, v1, v2, rel string) (bool, error) {
	d1, err := f.VersionDataset(v1, rel)
	if err != nil {
		return false, err
	}
	d2, err := f.VersionDataset(v2, rel)
	if err != nil {
		return false, err
	}
	if !slices.Equal(d1.Shape, d2.Shape) || d1.Type.DType != d2.Type.DType {
		return false, nil
	}
	m1, err := slotMap(f, d1)
	if err != nil {
		return false, err
	}
	m2, err := slotMap(f, d2)
	if err != nil {
		return false, err
	}
	if m1 == nil || m2 == nil { // no chunk map: fall back to the bytes
		return sameBytes(d1, d2)
	}
	if len(m1) != len(m2) {
		return false, nil
	}
	for k, s := range m1 {
		if t, ok := m2[k]; !ok || t != s {
			return false, nil
		}
	}
	return true, nil
}

// slot names a stored chunk: raw_data path and row offset.
type slot struct {
	raw string
	off int64
}

// slotMap returns a versioned dataset's chunk map keyed by grid index ("1_0"); nil (and no
// error) for datasets whose mappings are not one chunk-aligned block per chunk.
func slotMap(f *versions.File, d *versions.Dataset) (map[string]slot, error) {
	if d.RawData == "" || d.Chunks == nil {
		return nil, nil
	}
	if blocks, ok := d.Blocks(); ok {
		m := make(map[string]slot, len(blocks))
		for _, b := range blocks {
			m[gridKey(b.Grid)] = slot{d.RawData, b.Row}
		}
		return m, nil
	}
	// Strings and the libhdf5 route: read the mappings again.
	h, err := f.HDF5().OpenDataset(d.Path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	maps, err := h.Mappings()
	if err != nil {
		if errors.Is(err, h5.ErrUnsupported) {
			return nil, nil
		}
		return nil, err
	}
	m := make(map[string]slot, len(maps))
	grid := make([]int64, len(d.Shape))
	for _, mp := range maps {
		for i := range grid {
			c := d.Chunks[i]
			if mp.VStart[i]%c != 0 || mp.SrcStart[0]%d.Chunks[0] != 0 || (i > 0 && mp.SrcStart[i] != 0) {
				return nil, nil
			}
			grid[i] = mp.VStart[i] / c
		}
		m[gridKey(grid)] = slot{mp.SrcDataset, mp.SrcStart[0]}
	}
	return m, nil
}

func gridKey(g []int64) string {
	var b []byte
	for i, x := range g {
		if i > 0 {
			b = append(b, '_')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return string(b)
}

// ChunkStats counts a version's dataset chunks: total in its grid, stored (mapped to a
// raw_data slot) and shared with the parent version (stored in a slot the parent's
// dataset of the same path also uses). ok is false when the dataset has no chunk map.
func ChunkStats(f *versions.File, version, rel string) (total, stored, shared int, ok bool, err error) {
	d, err := f.VersionDataset(version, rel)
	if err != nil {
		return 0, 0, 0, false, err
	}
	m, err := slotMap(f, d)
	if err != nil || m == nil {
		return 0, 0, 0, false, err
	}
	total = 1
	for i, s := range d.Shape {
		total *= int((s + d.Chunks[i] - 1) / d.Chunks[i])
	}
	stored = len(m)
	v, _, err := f.Version(version)
	if err != nil || v.PrevVersion == "" {
		return total, stored, 0, true, err
	}
	pd, err := f.VersionDataset(v.PrevVersion, rel)
	if errors.Is(err, versions.ErrNotFound) {
		return total, stored, 0, true, nil
	} else if err != nil {
		return 0, 0, 0, false, err
	}
	pm, err := slotMap(f, pd)
	if err != nil {
		return 0, 0, 0, false, err
	}
	used := map[slot]bool{}
	for _, s := range pm {
		used[s] = true
	}
	for _, s := range m {
		if used[s] {
			shared++
		}
	}
	return total, stored, shared, true, nil
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
	Changed        []ChunkChange
	// How the unchanged/changed chunks were decided: same slot, equal or different
	// hash-table digests, or by reading the data.
	SameSlot, SameDigest, DiffDigest, ReadData int
}

// DiffDataset compares dataset rel between versions v1 and v2 chunk by chunk. A chunk
// differs when its extent differs or its contents do; contents are decided from the
// chunk maps: the same raw_data slot holds the same data, different slots whose
// hash-table digests are equal hold the same data, different digests mean different data;
// only chunks that cannot be decided that way (one side unmapped, no usable digest) are
// read and compared.
func DiffDataset(f *versions.File, v1, v2, rel string) (DatasetDiff, error) {
	dd := DatasetDiff{Path: rel}
	d1, err1 := f.VersionDataset(v1, rel)
	d2, err2 := f.VersionDataset(v2, rel)
	for _, err := range []error{err1, err2} {
		if err != nil && !errors.Is(err, versions.ErrNotFound) {
			return dd, err
		}
	}
	switch {
	case d1 == nil && d2 == nil:
		return dd, fmt.Errorf("%s: %w in %s or %s", rel, versions.ErrNotFound, v1, v2)
	case d1 == nil:
		dd.Kind, dd.Shape2, dd.Chunks = Added, d2.Shape, d2.Chunks
		return dd, nil
	case d2 == nil:
		dd.Kind, dd.Shape1, dd.Chunks = Removed, d1.Shape, d1.Chunks
		return dd, nil
	}
	dd.Shape1, dd.Shape2, dd.Chunks = d1.Shape, d2.Shape, d2.Chunks
	if d1.Type.DType != d2.Type.DType || len(d1.Shape) != len(d2.Shape) || !slices.Equal(d1.Chunks, d2.Chunks) || d1.Chunks == nil {
		// Not comparable chunk by chunk: the whole dataset differs unless its bytes are equal.
		same := false
		if d1.Type.DType == d2.Type.DType && slices.Equal(d1.Shape, d2.Shape) {
			if same, err1 = sameBytes(d1, d2); err1 != nil {
				return dd, err1
			}
		}
		if !same {
			dd.Kind = Modified
			dd.Changed = []ChunkChange{{Grid: nil, Start: make([]int64, len(d2.Shape)), Stop: slices.Clone(d2.Shape), Kind: Modified}}
		}
		return dd, nil
	}
	m1, err := slotMap(f, d1)
	if err != nil {
		return dd, err
	}
	m2, err := slotMap(f, d2)
	if err != nil {
		return dd, err
	}
	var dig1, dig2 map[int64]digestRow
	if !d1.Strings {
		dig1 = digests(f, d1)
		dig2 = dig1
		if d2.RawData != d1.RawData {
			dig2 = digests(f, d2)
		}
	}
	chunks := d1.Chunks
	n := len(chunks)
	grid := make([]int64, n)
	gmax := make([]int64, n)
	for i := range gmax {
		gmax[i] = max(ceilDiv(d1.Shape[i], chunks[i]), ceilDiv(d2.Shape[i], chunks[i]))
	}
	anyZero := slices.Contains(gmax, 0)
	for !anyZero {
		dd.Total++
		start := make([]int64, n)
		stop1, stop2 := make([]int64, n), make([]int64, n)
		in1, in2 := true, true
		for i, g := range grid {
			start[i] = g * chunks[i]
			stop1[i] = min(start[i]+chunks[i], d1.Shape[i])
			stop2[i] = min(start[i]+chunks[i], d2.Shape[i])
			in1 = in1 && stop1[i] > start[i]
			in2 = in2 && stop2[i] > start[i]
		}
		ch := ChunkChange{Grid: slices.Clone(grid), Start: start, Stop: stop2}
		switch {
		case in1 && !in2:
			ch.Kind, ch.Stop = Removed, stop1
		case !in1 && in2:
			ch.Kind = Added
		case in1 && in2 && !slices.Equal(stop1, stop2):
			ch.Kind = Modified
		case in1 && in2:
			key := gridKey(grid)
			s1, ok1 := m1[key]
			s2, ok2 := m2[key]
			same, err := func() (bool, error) {
				switch {
				case m1 != nil && m2 != nil && ok1 && ok2 && s1 == s2:
					dd.SameSlot++
					return true, nil
				case m1 != nil && m2 != nil && !ok1 && !ok2 && bytes.Equal(d1.Fill, d2.Fill):
					dd.SameSlot++ // both unmapped: fill
					return true, nil
				case ok1 && ok2 && dig1 != nil && dig2 != nil:
					r1, h1 := dig1[s1.off]
					r2, h2 := dig2[s2.off]
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
				return sameBox(d1, d2, start, stop1)
			}()
			if err != nil {
				return dd, err
			}
			if !same {
				ch.Kind = Modified
			}
		}
		if ch.Kind != "" {
			dd.Changed = append(dd.Changed, ch)
		}
		// next grid index in C order
		i := n - 1
		for ; i >= 0; i-- {
			grid[i]++
			if grid[i] < gmax[i] {
				break
			}
			grid[i] = 0
		}
		if i < 0 {
			break
		}
	}
	if len(dd.Changed) > 0 || !slices.Equal(d1.Shape, d2.Shape) {
		dd.Kind = Modified
	}
	return dd, nil
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

// digests reads the hash table of a dataset's data group, by slot row; nil when it has
// none vh5fs can use (then chunks are compared by their data).
func digests(f *versions.File, d *versions.Dataset) map[int64]digestRow {
	if d.RawData == "" {
		return nil
	}
	tp := d.DataGroup() + "/hash_table"
	if k, err := f.HDF5().Kind(tp); err != nil || k != h5.KindDataset {
		return nil
	}
	ht, err := f.HDF5().OpenDataset(tp)
	if err != nil {
		return nil
	}
	defer ht.Close()
	info := ht.Info()
	if info.Type.Size != 48 || len(info.Shape) != 1 {
		return nil
	}
	n := info.Shape[0]
	if a, ok, err := f.HDF5().Attr(tp, "largest_index"); err == nil && ok {
		if l, isInt := a.Value.(int64); isInt && l >= 0 && l <= n {
			n = l
		}
	}
	if n == 0 {
		return nil
	}
	buf := make([]byte, 48*n)
	if err := ht.ReadBox([]int64{0}, []int64{n}, []int64{n}, []int64{0}, buf); err != nil {
		return nil
	}
	out := make(map[int64]digestRow, n)
	for i := int64(0); i < n; i++ {
		r := buf[48*i : 48*(i+1)]
		start := int64(binary.LittleEndian.Uint64(r[32:]))
		stop := int64(binary.LittleEndian.Uint64(r[40:]))
		var row digestRow
		copy(row.sum[:], r)
		row.rows = stop - start
		out[start] = row
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
	var lines [][]byte
	if d.Strings {
		text := make([]byte, d.Size())
		if _, err := d.ReadAt(text, 0); err != nil {
			return nil, err
		}
		lines = bytes.SplitAfter(text, []byte("\n"))
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
		if d.Strings {
			var run []byte
			for k := flat; k < flat+hi-lo && k < int64(len(lines)); k++ {
				run = append(run, lines[k]...)
			}
			out = append(out, run)
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
