package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestCmdDiffStrings: `vh5fs diff` counts changed, added and removed elements of
// variable-length string datasets as it does numeric ones (lines and --json fields), and
// -v shows their value ranges as JSON strings; ordered pairs of versions of the fixtures
// that hold string datasets, the expected answers worked out from the manifests' values.
func TestCmdDiffStrings(t *testing.T) {
	for _, tc := range []struct{ file, ds string }{
		{"strings.h5", "names"},
		{"../latest/strings-default.h5", "names"},
		{"legacy/object_dtype_bad_hashtable_chunk_reuse_unicode.h5", "values"},
		{"legacy/object_dtype_bad_hashtable_chunk_reuse_multi_dim.h5", "values"},
		{"legacy/object_dtype_bad_hashtable_data2.h5", "data_with_bad_hashtable"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			file := fixturePath(tc.file)
			m, err := fixture.Load(strings.TrimSuffix(file, ".h5") + ".json")
			require.NoError(t, err)
			type version struct {
				shape []int64
				vals  []string
			}
			vs := map[string]version{}
			for _, mv := range m.Versions {
				d := mv.Datasets[tc.ds]
				require.True(t, d.IsString(), mv.Name)
				v := version{shape: d.Shape}
				require.NoError(t, json.Unmarshal(d.Values, &v.vals))
				vs[mv.Name] = v
			}
			// Every pair of up to four versions (each pair is three runs of the binary).
			names := m.VersionNames()
			if n := len(names); n > 4 {
				names = []string{names[0], names[n/3], names[2*n/3], names[n-1]}
			}
			changed := 0
			for _, a := range names {
				for _, b := range names {
					x, y := vs[a], vs[b]
					w := wantStringDiff(x.shape, x.vals, y.shape, y.vals)
					shape := func(s []int64) string { return strings.ReplaceAll(fmt.Sprint(s), " ", ",") }
					var line, vline string
					switch {
					case w.changed == 0 && slices.Equal(x.shape, y.shape):
						line = fmt.Sprintf("%s: unchanged, shape %s", tc.ds, shape(y.shape))
						vline = line
					default:
						changed++
						line = fmt.Sprintf("%s: %d of %d elements changed", tc.ds, w.changed, w.compared)
						vline = line
						if w.changed > 0 {
							vline += fmt.Sprintf(" (old %s, new %s)", w.old, w.new)
						}
						if !slices.Equal(x.shape, y.shape) {
							note := func(r string) string {
								if r == "" {
									return ""
								}
								return " (values " + r + ")"
							}
							shapes := fmt.Sprintf("; shape %s -> %s", shape(x.shape), shape(y.shape))
							line += shapes + fmt.Sprintf(", %d added, %d removed", w.added, w.removed)
							vline += shapes + fmt.Sprintf(", %d added%s, %d removed%s", w.added, note(w.addedRange), w.removed, note(w.removedRange))
						}
					}
					out, stderr, code := vh5fsRun(t, "diff", file, a, b, tc.ds)
					require.Equal(t, 0, code, stderr)
					require.Equal(t, line+"\n", out, "%s %s", a, b)

					out, stderr, code = vh5fsRun(t, "diff", "-v", file, a, b, tc.ds)
					require.Equal(t, 0, code, stderr)
					require.Equal(t, vline, strings.SplitN(out, "\n", 2)[0], "-v %s %s", a, b)

					out, stderr, code = vh5fsRun(t, "diff", "--json", file, a, b, tc.ds)
					require.Equal(t, 0, code, stderr)
					var doc struct {
						Datasets []map[string]any `json:"datasets"`
					}
					require.NoError(t, json.Unmarshal([]byte(out), &doc))
					require.Len(t, doc.Datasets, 1)
					got := doc.Datasets[0]
					if strings.Contains(line, "unchanged") {
						require.Equal(t, "unchanged", got["change"])
						require.NotContains(t, got, "elements_changed")
						continue
					}
					require.Equal(t, "modified", got["change"])
					want := map[string]any{"elements_changed": w.changed, "elements_compared": w.compared,
						"elements_added": w.added, "elements_removed": w.removed}
					for k, v := range want {
						require.EqualValues(t, v, got[k], "--json %s %s: %s", a, b, k)
					}
				}
			}
			require.Positive(t, changed)
		})
	}
}

// stringDiff is what diff says of two versions of a string dataset.
type stringDiff struct {
	compared, changed, added, removed  int
	old, new, addedRange, removedRange string // "" when empty
}

// wantStringDiff matches every index of the newer shape with the older one (and the
// other way round for the removed), as numpy indexing would: a brute-force oracle.
func wantStringDiff(shape1 []int64, vals1 []string, shape2 []int64, vals2 []string) stringDiff {
	var w stringDiff
	var old, nw, added, removed []string
	at := func(k int, from, to []int64) (int, bool) {
		idx := make([]int64, len(from))
		for i := len(from) - 1; i >= 0; i-- {
			idx[i] = int64(k) % from[i]
			k /= int(from[i])
		}
		j := int64(0)
		for i, x := range idx {
			if x >= to[i] {
				return 0, false
			}
			j = j*to[i] + x
		}
		return int(j), true
	}
	for k, s := range vals2 {
		j, ok := at(k, shape2, shape1)
		switch {
		case !ok:
			w.added++
			added = append(added, s)
		case vals1[j] != s:
			w.changed++
			old, nw = append(old, vals1[j]), append(nw, s)
		}
		if ok {
			w.compared++
		}
	}
	for k, s := range vals1 {
		if _, ok := at(k, shape1, shape2); !ok {
			w.removed++
			removed = append(removed, s)
		}
	}
	w.old, w.new, w.addedRange, w.removedRange = jsonRange(old), jsonRange(nw), jsonRange(added), jsonRange(removed)
	return w
}

// jsonRange is `"lo".."hi"` (one string when they are equal) in code point order.
func jsonRange(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	q := func(s string) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSpace(b.String())
	}
	lo, hi := q(slices.Min(vals)), q(slices.Max(vals))
	if lo == hi {
		return lo
	}
	return lo + ".." + hi
}
