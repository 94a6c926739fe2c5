package inspect

import (
	"errors"
	"math"
	"runtime"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/versions"
)

// bigMap is the number of chunks from which a version's chunk map (12 bytes a chunk as the
// File holds it) is dropped from the File's cache and collected once walked: two versions
// of ten million chunks are then never held at once (240 MB), only one of them and the
// other's slotTable (4 bytes a chunk).
const bigMap = 1 << 20

// slotTable is one version's chunk map of a dataset as comparisons need it: for every
// chunk of its grid, in C order, the raw_data slot it is stored in or none. A slot is kept
// as 1 + its row / the chunk's rows on axis 0 in 4 bytes (0: not stored), or, once a row
// does not fit that, as 1 + the row in 8.
type slotTable struct {
	raw    string  // the raw_data every slot is in
	grid   []int64 // chunks per axis
	unit   int64   // rows of a slot on axis 0
	small  []uint32
	large  []int64 // replaces small once a row does not fit it
	stored int
}

func newSlotTable(raw string, shape, chunks []int64) *slotTable {
	grid := make([]int64, len(shape))
	n := int64(1)
	for i := range shape {
		grid[i] = ceilDiv(shape[i], chunks[i])
		n *= grid[i]
	}
	return &slotTable{raw: raw, grid: grid, unit: max(chunks[0], 1), small: make([]uint32, n)}
}

// index is the C-order position of grid index g in t's grid; false when g is outside it.
func (t *slotTable) index(g []int64) (int64, bool) {
	if len(g) != len(t.grid) {
		return 0, false
	}
	var k int64
	for i, x := range g {
		if x < 0 || x >= t.grid[i] {
			return 0, false
		}
		k = k*t.grid[i] + x
	}
	return k, true
}

func (t *slotTable) set(k, row int64) {
	if t.large == nil {
		if row%t.unit == 0 && row/t.unit < math.MaxUint32 {
			if t.small[k] == 0 {
				t.stored++
			}
			t.small[k] = uint32(row/t.unit) + 1
			return
		}
		t.large = make([]int64, len(t.small))
		for i, s := range t.small {
			if s != 0 {
				t.large[i] = int64(s-1)*t.unit + 1
			}
		}
		t.small = nil
	}
	if t.large[k] == 0 {
		t.stored++
	}
	t.large[k] = row + 1
}

// row is the raw_data row of the chunk at position k; false when it is not stored.
func (t *slotTable) row(k int64) (int64, bool) {
	if t.large != nil {
		return t.large[k] - 1, t.large[k] != 0
	}
	return int64(t.small[k]-1) * t.unit, t.small[k] != 0
}

// slotsOf is d's slotTable; nil (and no error) for datasets whose mappings are not one
// chunk-aligned block per chunk, or that have no raw_data or chunk grid.
func slotsOf(f *versions.File, d *versions.Dataset) (*slotTable, error) {
	if d.RawData == "" || d.Chunks == nil {
		return nil, nil
	}
	t := newSlotTable(d.RawData, d.Shape, d.Chunks)
	ok, err := d.EachBlock(func(grid []int64, row int64) error {
		if k, in := t.index(grid); in {
			t.set(k, row)
		}
		return nil
	})
	if err != nil || ok {
		return t, err
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
	grid := make([]int64, len(d.Shape))
	for i, mp := range maps {
		if i == 0 {
			t.raw = mp.SrcDataset
		}
		if mp.SrcDataset != t.raw { // one raw_data per table
			return nil, nil
		}
		for j := range grid {
			c := d.Chunks[j]
			if mp.VStart[j]%c != 0 || mp.SrcStart[0]%d.Chunks[0] != 0 || (j > 0 && mp.SrcStart[j] != 0) {
				return nil, nil
			}
			grid[j] = mp.VStart[j] / c
		}
		if k, in := t.index(grid); in {
			t.set(k, mp.SrcStart[0]) // a chunk mapped twice reads from the later mapping
		}
	}
	return t, nil
}

// slotWalk is a walk of a dataset's stored chunks in grid order, calling fn with each
// one's grid index (reused between calls), raw_data and row.
type slotWalk func(fn func(grid []int64, raw string, row int64) error) error

// walkSlots is d's slotWalk: along its chunk map where it has one (nothing is kept), else
// along its slotTable; nil when it has neither.
func walkSlots(f *versions.File, d *versions.Dataset) (slotWalk, error) {
	if d.RawData == "" || d.Chunks == nil {
		return nil, nil
	}
	probe := errors.New("probe")
	if ok, err := d.EachBlock(func([]int64, int64) error { return probe }); ok {
		if err != nil && !errors.Is(err, probe) {
			return nil, err
		}
		return func(fn func(grid []int64, raw string, row int64) error) error {
			_, err := d.EachBlock(func(grid []int64, row int64) error { return fn(grid, d.RawData, row) })
			return err
		}, nil
	}
	t, err := slotsOf(f, d)
	if t == nil || err != nil {
		return nil, err
	}
	return func(fn func(grid []int64, raw string, row int64) error) error {
		grid := make([]int64, len(t.grid))
		n := int64(len(t.small) + len(t.large))
		for k := int64(0); k < n; k++ {
			if row, stored := t.row(k); stored {
				if err := fn(grid, t.raw, row); err != nil {
					return err
				}
			}
			for i := len(grid) - 1; i >= 0; i-- {
				if grid[i]++; grid[i] < t.grid[i] {
					break
				}
				grid[i] = 0
			}
		}
		return nil
	}, nil
}

// release drops version's datasets from f's cache and collects them when the dataset's
// chunk map (of chunks chunks) is big (see bigMap), so that the next version's is not
// loaded beside it. The caller no longer refers to the dataset, else it stays.
func release(f *versions.File, version string, chunks int64) {
	if chunks < bigMap {
		return
	}
	f.Forget(version)
	runtime.GC() // now, not once the heap has doubled: the next map reuses its pages
}

// gridChunks is the number of chunks in the grid of shape; 0 without chunks.
func gridChunks(shape, chunks []int64) int64 {
	if chunks == nil || len(chunks) != len(shape) {
		return 0
	}
	n := int64(1)
	for i := range shape {
		n *= ceilDiv(shape[i], chunks[i])
	}
	return n
}
