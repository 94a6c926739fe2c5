package inspect

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

func manifestVersion(m *fixture.Manifest, name string) (fixture.Version, bool) {
	for _, v := range m.Versions {
		if v.Name == name {
			return v, true
		}
	}
	return fixture.Version{}, false
}

// TestHistory walks prev_version from the current version of every reference file and
// compares the chain with the manifest's.
func TestHistory(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			var want []string
			for name := m.CurrentVersion; name != versions.FirstVersion; {
				mv, ok := manifestVersion(m, name)
				require.True(t, ok, name)
				want = append(want, name)
				name = mv.PrevVersion
			}
			got, err := History(f, m.CurrentVersion)
			require.NoError(t, err)
			var names []string
			for _, v := range got {
				names = append(names, v.Name)
			}
			require.Equal(t, want, names)
			require.Empty(t, got[len(got)-1].PrevVersion)
		})
	}
	f, err := versions.Open(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	got, err := History(f, "v2")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "v1", got[0].PrevVersion)
	_, err = History(f, "nope")
	require.ErrorIs(t, err, versions.ErrNotFound)
}

// TestChangedDatasets: between a version and its parent, a dataset of a versioned-hdf5
// file changed its chunk map exactly when its shape or data changed (versioned-hdf5
// deduplicates chunks by hash), so the manifests' shapes and digests are the oracle.
func TestChangedDatasets(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			for _, mv := range m.Versions {
				parent, hasParent := manifestVersion(m, mv.PrevVersion)
				var want []DatasetChange
				for p, d := range mv.Datasets {
					pd, ok := parent.Datasets[p]
					switch {
					case !hasParent || !ok:
						want = append(want, DatasetChange{p, Added})
					case !sameManifestData(d, pd):
						want = append(want, DatasetChange{p, Modified})
					}
				}
				for p := range parent.Datasets {
					if _, ok := mv.Datasets[p]; !ok {
						want = append(want, DatasetChange{p, Removed})
					}
				}
				slices.SortFunc(want, func(a, b DatasetChange) int {
					return map[bool]int{true: -1, false: 1}[a.Path < b.Path]
				})
				from := mv.PrevVersion
				if !hasParent {
					from = ""
				}
				got, err := ChangedDatasets(f, from, mv.Name)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s vs %s", mv.Name, from)
			}
		})
	}
}

func sameManifestData(a, b fixture.Dataset) bool {
	if !slices.Equal(a.Shape, b.Shape) || a.DType != b.DType {
		return false
	}
	if a.SHA256 != nil && b.SHA256 != nil {
		return *a.SHA256 == *b.SHA256
	}
	return string(a.Values) == string(b.Values)
}

// TestDiffDataset: chunk-level diffs of basic_1d follow from the manifest's values; those of
// every other file from a brute-force comparison of each chunk's bytes.
func TestDiffDataset(t *testing.T) {
	f, err := versions.Open(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	m, err := fixture.Load(filepath.Join(fixture.Dir(), "basic_1d.json"))
	require.NoError(t, err)
	values := map[string][]int64{}
	for _, mv := range m.Versions {
		var v []int64
		require.NoError(t, json.Unmarshal(mv.Datasets["x"].Values, &v))
		values[mv.Name] = v
	}
	names := m.VersionNames()
	for _, a := range names {
		for _, b := range names {
			var want []string
			va, vb := values[a], values[b]
			for c := 0; c*4 < max(len(va), len(vb)); c++ {
				ca, cb := va[min(c*4, len(va)):min(c*4+4, len(va))], vb[min(c*4, len(vb)):min(c*4+4, len(vb))]
				switch {
				case len(ca) == 0:
					want = append(want, fmt.Sprintf("%d %s", c, Added))
				case len(cb) == 0:
					want = append(want, fmt.Sprintf("%d %s", c, Removed))
				case !slices.Equal(ca, cb):
					want = append(want, fmt.Sprintf("%d %s", c, Modified))
				}
			}
			dd, err := DiffDataset(f, a, b, "x")
			require.NoError(t, err)
			var got []string
			for ch := range dd.Changes() {
				got = append(got, fmt.Sprintf("%d %s", ch.Grid[0], ch.Kind))
			}
			require.Equal(t, want, got, "%s -> %s", a, b)
			require.Equal(t, a != b, dd.Kind == Modified, "%s -> %s", a, b)
		}
	}
	dd, err := DiffDataset(f, "v3", "v4", "x")
	require.NoError(t, err)
	require.Equal(t, []ChunkChange{
		{Grid: []int64{1}, Start: []int64{4}, Stop: []int64{6}, Kind: Modified},
		{Grid: []int64{2}, Start: []int64{8}, Stop: []int64{12}, Kind: Removed},
		{Grid: []int64{3}, Start: []int64{12}, Stop: []int64{13}, Kind: Removed},
	}, slices.Collect(dd.Changes()))
	require.Equal(t, 1, dd.SameSlot, "chunk 0 keeps its slot")

	for _, name := range []string{"grid_2d_gzip", "nested", "sparse", "strings", "zero_length", "golden_dedup_existing-after"} {
		t.Run(name, func(t *testing.T) {
			m, err := fixture.Load(filepath.Join(fixture.Dir(), name+".json"))
			require.NoError(t, err)
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			names := m.VersionNames()
			for _, a := range names {
				for _, b := range names {
					diffs, err := DiffVersions(f, a, b, "")
					require.NoError(t, err)
					for _, dd := range diffs {
						if dd.Kind == Added || dd.Kind == Removed {
							continue
						}
						want := bruteForceDiff(t, f, a, b, dd.Path)
						var got []string
						for ch := range dd.Changes() {
							got = append(got, fmt.Sprint(ch.Grid, ch.Kind))
						}
						require.Equal(t, want, got, "%s: %s -> %s", dd.Path, a, b)
					}
				}
			}
		})
	}
}

// bruteForceDiff compares every chunk box of two versions of a dataset by reading it.
func bruteForceDiff(t *testing.T, f *versions.File, a, b, rel string) []string {
	d1, err := f.VersionDataset(a, rel)
	require.NoError(t, err)
	d2, err := f.VersionDataset(b, rel)
	require.NoError(t, err)
	n := len(d1.Shape)
	gmax := make([]int64, n)
	for i := range gmax {
		gmax[i] = max(ceilDiv(d1.Shape[i], d1.Chunks[i]), ceilDiv(d2.Shape[i], d1.Chunks[i]))
	}
	var out []string
	if slices.Contains(gmax, 0) {
		return nil
	}
	grid := make([]int64, n)
	for {
		start, s1, s2 := make([]int64, n), make([]int64, n), make([]int64, n)
		in1, in2 := true, true
		for i, g := range grid {
			start[i] = g * d1.Chunks[i]
			s1[i] = min(start[i]+d1.Chunks[i], d1.Shape[i])
			s2[i] = min(start[i]+d1.Chunks[i], d2.Shape[i])
			in1, in2 = in1 && s1[i] > start[i], in2 && s2[i] > start[i]
		}
		switch {
		case in1 && !in2:
			out = append(out, fmt.Sprint(grid, Removed))
		case !in1 && in2:
			out = append(out, fmt.Sprint(grid, Added))
		case in1 && in2:
			r1, err := boxRows(d1, start, s1)
			require.NoError(t, err)
			r2, err := boxRows(d2, start, s2)
			require.NoError(t, err)
			if fmt.Sprint(r1) != fmt.Sprint(r2) {
				out = append(out, fmt.Sprint(grid, Modified))
			}
		}
		i := n - 1
		for ; i >= 0; i-- {
			grid[i]++
			if grid[i] < gmax[i] {
				break
			}
			grid[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

func TestChunkStats(t *testing.T) {
	f, err := versions.Open(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	for _, tc := range []struct {
		version               string
		total, stored, shared int
	}{
		{"v1", 3, 3, 0},
		{"v2", 3, 3, 2}, // chunk 1 rewritten
		{"v4", 2, 2, 1}, // chunk 0 kept, chunk 1 rewritten
	} {
		total, stored, shared, ok, err := ChunkStats(f, tc.version, "x")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []int{tc.total, tc.stored, tc.shared}, []int{total, stored, shared}, tc.version)
	}
}

// TestAttrChanges: attribute changes in files versioned-hdf5 wrote (the goldens' scripts
// say what each version set), and none where nothing was set.
func TestAttrChanges(t *testing.T) {
	for _, c := range []struct {
		file, from, to, rel string
		want                []AttrChange
	}{
		{"golden_stage_multi-after.h5", "r1", "golden", "", []AttrChange{{"volume", "unit", Added, "", `"shares"`}}},
		{"golden_stage_multi-after.h5", "r1", "golden", "prices", nil},
		{"golden_delete_branch-before.h5", "v2", "v3b", "", []AttrChange{{"x", "units", Modified, `"m"`, `"cm"`}}},
		{"golden_delete_branch-before.h5", "v3b", "v2", "x", []AttrChange{{"x", "units", Modified, `"cm"`, `"m"`}}},
		{"golden_delete_branch-before.h5", "v2", "v3a", "", nil},
		// A version's own attributes: v3 sets note, v4 (which does not) lacks it.
		{"golden_delete_middle-before.h5", "v2", "v3", "", []AttrChange{{"", "note", Added, "", `"third"`}}},
		{"golden_delete_middle-before.h5", "v3", "v4", "", nil},
		{"golden_delete_middle-before.h5", "", "v1", "", nil},
	} {
		t.Run(fmt.Sprintf("%s %s-%s %s", c.file, c.from, c.to, c.rel), func(t *testing.T) {
			f, err := versions.Open(filepath.Join(fixture.Dir(), c.file))
			require.NoError(t, err)
			defer f.Close()
			got, err := AttrChanges(f, c.from, c.to, c.rel)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}
