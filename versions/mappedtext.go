package versions

import (
	"fmt"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkplan"
)

// maxRunElems bounds the strings one ReadStrings of renderMapped asks for when it
// coalesces chunks (a single larger chunk is still read whole): libhdf5 allocates them
// all before vh5fs copies them out.
const maxRunElems = 1 << 16

// stringRun is a box of a version's string dataset read from raw_data by one ReadStrings:
// one or more chunks, consecutive on axis 0 both in the version and in raw_data.
type stringRun struct {
	vstart []int64 // where the box starts in the version
	src    int64   // the raw_data row it starts at (other axes start at 0)
	count  []int64 // the box's extent, the same in both
}

// renderMapped renders the text of a version's variable-length string dataset from
// raw_data through m, the chunk map of its mappings (versionedDataset), without libhdf5
// opening the virtual dataset. Elements of unmapped chunks read as "": versioned-hdf5
// gives vlen string datasets no fill value (h5py cannot set one), and libhdf5 reads the
// unset fill of a vlen string as NULL, which ReadStrings reads as "".
func (d *Dataset) renderMapped(m *chunkmap.Map) error {
	n := int64(1)
	for _, s := range d.Shape {
		n *= s
	}
	strs := make([]string, n)
	if n > 0 {
		for _, r := range stringRuns(m) {
			if err := d.readRun(r, strs); err != nil {
				return err
			}
		}
	}
	if err := d.setText(strs); err != nil {
		return fmt.Errorf("%s: %w", d.Path, err)
	}
	d.textMap = m
	return nil
}

// readRun reads run r from raw_data into its place in strs, the version's elements in C
// order.
func (d *Dataset) readRun(r stringRun, strs []string) error {
	start := make([]int64, len(r.count))
	start[0] = r.src
	got, err := d.raw.ReadStrings(start, r.count)
	if err != nil {
		return fmt.Errorf("%s: strings of %s at row %d: %w", d.Path, d.RawData, r.src, err)
	}
	placeBox(strs, d.Shape, r.vstart, r.count, got)
	return nil
}

// stringRuns lists the boxes to read for m's mapped chunks. Chunks are visited with axis
// 0 innermost, so that a chunk following its neighbour on axis 0 in raw_data too (as a
// version's new chunks are appended) joins its run. Only the last chunk on axis 0 can be
// trimmed there, so a run's rows line up in the version and in raw_data.
func stringRuns(m *chunkmap.Map) []stringRun {
	lay := m.Layout()
	grid, chunks := lay.Grid(), lay.Chunks()
	var runs []stringRun
	g := make([]int64, len(grid))
	for {
		cur := -1 // the run the next chunk on axis 0 may join
		for g[0] = 0; g[0] < grid[0]; g[0]++ {
			slab, off := m.Slab(g)
			if slab != chunkplan.BaseSlab {
				cur = -1
				continue
			}
			t := lay.Trimmed(g)
			if cur >= 0 && runs[cur].joins(off, t) {
				runs[cur].count[0] += t[0]
				continue
			}
			v := make([]int64, len(g))
			for i := range g {
				v[i] = g[i] * chunks[i]
			}
			runs = append(runs, stringRun{vstart: v, src: off, count: t})
			cur = len(runs) - 1
		}
		if !chunkplan.Next(g[1:], grid[1:]) {
			return runs
		}
	}
}

// joins reports whether the chunk of extent t at raw_data row off, next on axis 0, extends
// r within maxRunElems.
func (r *stringRun) joins(off int64, t []int64) bool {
	if off != r.src+r.count[0] {
		return false
	}
	n := r.count[0] + t[0]
	for _, c := range t[1:] {
		n *= c
	}
	return n <= maxRunElems
}

// placeBox copies box, the C-order elements of the box at vstart of extent count, into
// dst, the C-order elements of an array of the given shape: one copy per row of the last
// axis.
func placeBox(dst []string, shape, vstart, count []int64, box []string) {
	rank := len(shape)
	row := count[rank-1]
	idx := make([]int64, rank) // the row's index in the box; idx[rank-1] stays 0
	for src := int64(0); src < int64(len(box)); src += row {
		at := int64(0)
		for i, s := range shape {
			at = at*s + vstart[i] + idx[i]
		}
		copy(dst[at:at+row], box[src:src+row])
		for i := rank - 2; i >= 0; i-- {
			if idx[i]++; idx[i] < count[i] {
				break
			}
			idx[i] = 0
		}
	}
}
