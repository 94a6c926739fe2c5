package inspect

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestSlotTable: rows that are whole slots are kept in 4 bytes; the first that is not
// moves every entry to 8 bytes without losing one; grid indices outside the grid have no
// place.
func TestSlotTable(t *testing.T) {
	type set struct {
		grid []int64
		row  int64
	}
	tests := []struct {
		name          string
		shape, chunks []int64
		sets          []set
		large         bool
		outside       [][]int64
	}{
		{name: "1-d whole slots", shape: []int64{10}, chunks: []int64{4},
			sets: []set{{[]int64{0}, 8}, {[]int64{2}, 0}}, outside: [][]int64{{3}, {-1}}},
		{name: "2-d, a chunk mapped twice", shape: []int64{5, 7}, chunks: []int64{2, 3},
			sets: []set{{[]int64{0, 0}, 4}, {[]int64{2, 2}, 2}, {[]int64{0, 0}, 6}}, outside: [][]int64{{3, 0}, {0, 3}, {0}}},
		{name: "a row that is not a whole slot", shape: []int64{9}, chunks: []int64{3},
			sets: []set{{[]int64{0}, 3}, {[]int64{1}, 4}, {[]int64{2}, 9}}, large: true},
		{name: "a slot beyond 4 bytes", shape: []int64{4}, chunks: []int64{1},
			sets: []set{{[]int64{1}, 7}, {[]int64{3}, math.MaxUint32 + 5}}, large: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := newSlotTable("/raw", tt.shape, tt.chunks)
			want := map[int64]int64{}
			for _, s := range tt.sets {
				k, in := tab.index(s.grid)
				require.True(t, in, "%v", s.grid)
				tab.set(k, s.row)
				want[k] = s.row
			}
			require.Equal(t, tt.large, tab.large != nil)
			require.Equal(t, len(want), tab.stored)
			for k := range gridChunks(tt.shape, tt.chunks) {
				row, stored := tab.row(k)
				w, ok := want[k]
				require.Equal(t, ok, stored, "place %d", k)
				if ok {
					require.Equal(t, w, row, "place %d", k)
				}
			}
			for _, g := range tt.outside {
				_, in := tab.index(g)
				require.False(t, in, "%v", g)
			}
		})
	}
}

// blockSlots is a dataset's chunk map as the list Blocks makes: grid index -> row.
func blockSlots(t *testing.T, d *versions.Dataset) (map[string]int64, bool) {
	blocks, ok := d.Blocks()
	if !ok {
		return nil, false
	}
	m := map[string]int64{}
	for _, b := range blocks {
		m[fmt.Sprint(b.Grid)] = b.Row
	}
	return m, true
}

// diffFixtures are reference files with several chunks a version: 1-d and 2-d, growing and
// shrinking, sparse, nested, strings, empty.
func diffFixtures(t *testing.T) []*fixture.Manifest {
	var out []*fixture.Manifest
	for _, name := range []string{"basic_1d", "grid_2d_gzip", "nested", "sparse", "strings", "zero_length", "golden_dedup_existing-after"} {
		m, err := fixture.Load(filepath.Join(fixture.Dir(), name+".json"))
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

// TestChunkMapsAgainstBlocks: on reference files of several chunks a version, the walks of the chunk maps in grid
// order give what comparing Blocks' lists gives: ChangedDatasets' verdict for every pair of
// versions, and ChunkStats for every version's datasets.
func TestChunkMapsAgainstBlocks(t *testing.T) {
	for _, m := range diffFixtures(t) {
		t.Run(m.File, func(t *testing.T) {
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			names := m.VersionNames()
			for _, a := range names {
				pa, err := f.DatasetPaths(a)
				require.NoError(t, err)
				for _, p := range pa {
					d, err := f.VersionDataset(a, p)
					require.NoError(t, err)
					m1, ok := blockSlots(t, d)
					if !ok {
						continue
					}
					total, stored, shared, ok, err := ChunkStats(f, a, p)
					require.NoError(t, err)
					require.True(t, ok)
					require.Equal(t, int(gridChunks(d.Shape, d.Chunks)), total, "%s/%s", a, p)
					require.Equal(t, len(m1), stored, "%s/%s", a, p)
					wantShared := 0
					if v, _, err := f.Version(a); err == nil && v.PrevVersion != "" {
						if pd, err := f.VersionDataset(v.PrevVersion, p); err == nil && pd.RawData == d.RawData {
							pm, _ := blockSlots(t, pd)
							rows := map[int64]bool{}
							for _, r := range pm {
								rows[r] = true
							}
							for _, r := range m1 {
								if rows[r] {
									wantShared++
								}
							}
						}
					}
					require.Equal(t, wantShared, shared, "%s/%s", a, p)

					for _, b := range names {
						d2, err := f.VersionDataset(b, p)
						if err != nil {
							continue
						}
						m2, ok := blockSlots(t, d2)
						if !ok {
							continue
						}
						want := slices.Equal(d.Shape, d2.Shape) && d.Type.DType == d2.Type.DType &&
							(len(m1) == 0 && len(m2) == 0 || d.RawData == d2.RawData && fmt.Sprint(m1) == fmt.Sprint(m2))
						got, err := sameMap(f, a, b, p)
						require.NoError(t, err)
						require.Equal(t, want, got, "%s: %s vs %s", p, a, b)
					}
				}
			}
		})
	}
}

// TestChangesIn: the batches DiffElements reads, changesIn(from, to), are the slices of
// Changes, whatever runs they cut, on every diff of diffFixtures.
func TestChangesIn(t *testing.T) {
	for _, m := range diffFixtures(t) {
		t.Run(m.File, func(t *testing.T) {
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			names := m.VersionNames()
			for _, a := range names {
				for _, b := range names {
					diffs, err := DiffVersions(f, a, b, "")
					require.NoError(t, err)
					for _, dd := range diffs {
						all := slices.Collect(dd.Changes())
						require.Len(t, all, dd.NumChanged())
						// Cuts at the ends, inside and between the first runs.
						var cuts []int
						for _, c := range []int{0, 1, 2, 3, len(all) / 3, len(all) / 2, len(all) - 1, len(all)} {
							if c >= 0 && c <= len(all) && !slices.Contains(cuts, c) {
								cuts = append(cuts, c)
							}
						}
						for _, from := range cuts {
							for _, to := range cuts {
								if to < from {
									continue
								}
								got := slices.Collect(dd.changesIn(from, to))
								if to == from {
									require.Empty(t, got)
									continue
								}
								require.Equal(t, all[from:to], got, "%s %s->%s [%d:%d]", dd.Path, a, b, from, to)
							}
						}
					}
				}
			}
		})
	}
}

// TestDatasetDiffRuns: places recorded in order merge into runs, and Changes makes each
// chunk's box and kind from its place: modified inside both shapes, added past the older
// one's, removed past the newer one's.
func TestDatasetDiffRuns(t *testing.T) {
	dd := DatasetDiff{Shape1: []int64{5, 4}, Shape2: []int64{3, 6}, Chunks: []int64{2, 2}, gmax: []int64{3, 3}}
	for _, k := range []int64{0, 1, 2, 5, 7} {
		dd.changed(k)
	}
	require.Equal(t, []int64{0, 3, 5, 6, 7, 8}, dd.runs)
	require.Equal(t, 5, dd.NumChanged())
	require.Equal(t, []ChunkChange{
		{Grid: []int64{0, 0}, Start: []int64{0, 0}, Stop: []int64{2, 2}, Kind: Modified},
		{Grid: []int64{0, 1}, Start: []int64{0, 2}, Stop: []int64{2, 4}, Kind: Modified},
		{Grid: []int64{0, 2}, Start: []int64{0, 4}, Stop: []int64{2, 6}, Kind: Added},
		{Grid: []int64{1, 2}, Start: []int64{2, 4}, Stop: []int64{3, 6}, Kind: Added},
		{Grid: []int64{2, 1}, Start: []int64{4, 2}, Stop: []int64{5, 4}, Kind: Removed},
	}, slices.Collect(dd.Changes()))
}
