package inspect

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// strCase is one string dataset of one version: its shape and its elements in C order.
type strCase struct {
	shape []int64
	vals  []string
}

// wantStrDiff is what DiffElements must answer for two versions of a string dataset,
// worked out element by element: every index of the newer shape is looked up in the older
// one (multi-dimensional, so C-order positions are recomputed per shape), then every
// index of the older shape in the newer one.
func wantStrDiff(a, b strCase) ElementDiff {
	want := ElementDiff{Strings: true}
	for _, r := range []*ValueRange{&want.Old, &want.New, &want.AddedRange, &want.RemovedRange} {
		r.kind = 's'
	}
	inside := func(idx, shape []int64) (int64, bool) {
		if shape == nil { // a null dataspace
			return 0, false
		}
		var k int64
		for i, x := range idx {
			if x >= shape[i] {
				return 0, false
			}
			k = k*shape[i] + x
		}
		return k, true
	}
	unravel := func(k int64, shape []int64) []int64 {
		idx := make([]int64, len(shape))
		for i := len(shape) - 1; i >= 0; i-- {
			idx[i] = k % shape[i]
			k /= shape[i]
		}
		return idx
	}
	for k, s := range b.vals {
		if j, ok := inside(unravel(int64(k), b.shape), a.shape); ok {
			want.Compared++
			if a.vals[j] != s {
				want.Changed++
				want.Old.addString(a.vals[j])
				want.New.addString(s)
			}
			continue
		}
		want.Added++
		want.AddedRange.addString(s)
	}
	for k, s := range a.vals {
		if _, ok := inside(unravel(int64(k), a.shape), b.shape); !ok {
			want.Removed++
			want.RemovedRange.addString(s)
		}
	}
	return want
}

// textOf is vals as a string dataset's text (versions.TextForm).
func textOf(t *testing.T, vals []string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, s := range vals {
		require.NoError(t, enc.Encode(s))
	}
	return b.String()
}

// TestDiffElementsStrings: every ordered pair of versions of every string dataset in the
// fixtures that hold them; the expected counts and value ranges come from the manifests'
// values.
func TestDiffElementsStrings(t *testing.T) {
	for _, tc := range []struct{ manifest, ds string }{
		{"strings.json", "names"},
		{"../latest/strings-default.json", "names"},
		{"legacy/object_dtype_bad_hashtable_chunk_reuse.json", "values"},
		{"legacy/object_dtype_bad_hashtable_chunk_reuse_unicode.json", "values"},
		{"legacy/object_dtype_bad_hashtable_chunk_reuse_multi_dim.json", "values"},
		{"legacy/object_dtype_bad_hashtable_data2.json", "data_with_bad_hashtable"},
		{"legacy/object_dtype_bad_hashtable_data2.json", "data_with_bad_hashtable2"},
	} {
		t.Run(tc.manifest+" "+tc.ds, func(t *testing.T) {
			m, err := fixture.Load(filepath.Join(fixture.Dir(), tc.manifest))
			require.NoError(t, err)
			f, err := versions.Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			cases := map[string]strCase{}
			for _, mv := range m.Versions {
				d, ok := mv.Datasets[tc.ds]
				require.True(t, ok, mv.Name)
				require.True(t, d.IsString(), mv.Name)
				c := strCase{shape: d.Shape}
				require.NoError(t, json.Unmarshal(d.Values, &c.vals))
				cases[mv.Name] = c
			}
			changed := 0
			for _, a := range m.VersionNames() {
				for _, b := range m.VersionNames() {
					want := wantStrDiff(cases[a], cases[b])
					dd, err := DiffDataset(f, a, b, tc.ds)
					require.NoError(t, err)
					ed, err := DiffElements(f, a, b, dd)
					require.NoError(t, err)
					same := want.Changed == 0 && slices.Equal(cases[a].shape, cases[b].shape)
					require.Equal(t, same, dd.Kind == "", "%s -> %s", a, b)
					if same {
						continue
					}
					changed++
					require.Equal(t, Modified, dd.Kind)
					require.Equal(t, want, ed, "%s -> %s", a, b)
				}
			}
			require.Positive(t, changed)
		})
	}
}

// TestDiffTexts: the side-by-side walk of two texts, on shapes and spellings the fixtures
// do not have.
func TestDiffTexts(t *testing.T) {
	abc := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		}
		return out
	}
	long := strings.Repeat("é", 100<<10) // longer than the reader's buffer
	for _, tc := range []struct {
		name string
		a, b strCase
	}{
		{"2-D, rows and columns added", strCase{[]int64{2, 3}, abc(6)}, strCase{[]int64{3, 4}, abc(12)}},
		{"2-D, columns removed, rows added", strCase{[]int64{2, 4}, abc(8)}, strCase{[]int64{4, 2}, abc(8)}},
		{"3-D, every axis changed", strCase{[]int64{2, 3, 4}, abc(24)}, strCase{[]int64{3, 2, 5}, abc(30)}},
		{"2-D, emptied", strCase{[]int64{2, 3}, abc(6)}, strCase{[]int64{0, 3}, nil}},
		{"2-D, from empty", strCase{[]int64{2, 0}, nil}, strCase{[]int64{2, 2}, abc(4)}},
		{"scalar changed", strCase{[]int64{}, []string{"a"}}, strCase{[]int64{}, []string{"b"}}},
		{"scalar same", strCase{[]int64{}, []string{"a"}}, strCase{[]int64{}, []string{"a"}}},
		{"null dataspace to scalar", strCase{nil, nil}, strCase{[]int64{}, []string{"a"}}},
		{"scalar to null dataspace", strCase{[]int64{}, []string{"a"}}, strCase{nil, nil}},
		{"long lines", strCase{[]int64{3}, []string{long, "x", long}}, strCase{[]int64{3}, []string{long + "!", "x", long}}},
		{"HTML and control characters", strCase{[]int64{2}, []string{"<a&b>", "tab\t"}}, strCase{[]int64{2}, []string{"<a&b>", "new\nline"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ed ElementDiff
			a := newLineReader("a", strings.NewReader(textOf(t, tc.a.vals)), tc.a.shape)
			b := newLineReader("b", strings.NewReader(textOf(t, tc.b.vals)), tc.b.shape)
			require.NoError(t, diffTexts(a, b, &ed))
			require.Equal(t, wantStrDiff(tc.a, tc.b), ed)
		})
	}

	// Strings are compared decoded: JSON that spells the same string is no change.
	var ed ElementDiff
	require.NoError(t, diffTexts(newLineReader("a", strings.NewReader("\"a\"\n\"\\u00e9\"\n"), []int64{2}),
		newLineReader("b", strings.NewReader("\"\\u0061\"\n\"é\"\n"), []int64{2}), &ed))
	require.Zero(t, ed.Changed)
	require.Equal(t, int64(2), ed.Compared)

	for _, tc := range []struct{ name, text, err string }{
		{"fewer lines than the shape", "\"a\"\n", "a: the text ends at element 1 of 2"},
		{"more lines than the shape", "\"a\"\n\"b\"\n\"c\"\n", "a: the text holds more than the 2 elements of its shape"},
		{"not JSON", "\"a\"\nb\n", "a: element 1: invalid character"},
		{"no newline at the end", "\"a\"\n\"b\"", "a: the text ends at element 1 of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ed ElementDiff
			err := diffTexts(newLineReader("a", strings.NewReader(tc.text), []int64{2}),
				newLineReader("b", strings.NewReader("\"x\"\n\"y\"\n"), []int64{2}), &ed)
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestStringRange: ranges of strings print as JSON strings, as the text spells them.
func TestStringRange(t *testing.T) {
	for _, tc := range []struct {
		vals []string
		want string
	}{
		{nil, ""},
		{[]string{"b"}, `"b"`},
		{[]string{"b", "b"}, `"b"`},
		{[]string{"zoë", "ann", "été"}, `"ann".."été"`}, // code point order: é after z
		{[]string{"<&>", "say \"hi\"\n"}, `"<&>".."say \"hi\"\n"`},
		{[]string{""}, `""`},
	} {
		r := ValueRange{kind: 's'}
		for _, s := range tc.vals {
			r.addString(s)
		}
		require.Equal(t, tc.want, r.String(), "%q", tc.vals)
	}
}

// TestLineIndex: the index boxRows reads chunks of strings through.
func TestLineIndex(t *testing.T) {
	long := strings.Repeat("x", 70<<10)
	for _, tc := range []struct {
		name, text string
		want       []uint32
		err        string
	}{
		{"empty", "", []uint32{0}, ""},
		{"lines", "\"a\"\n\"\"\n\"bc\"\n", []uint32{0, 4, 7, 12}, ""},
		{"a line longer than the buffer", "\"" + long + "\"\n\"a\"\n", []uint32{0, uint32(len(long)) + 3, uint32(len(long)) + 7}, ""},
		{"no newline at the end", "\"a\"\n\"b\"", nil, "d: the text's last line has no newline"},
		{"a long line without its newline", "\"a\"\n\"" + long, nil, "d: the text's last line has no newline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := indexLines("d", strings.NewReader(tc.text), int64(len(tc.text)))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, x.small)
			for k, off := range tc.want {
				require.Equal(t, int64(off), x.offset(int64(k)))
			}
			require.Equal(t, int64(len(tc.text)), x.offset(int64(len(tc.want))+5), "past the end: the text's end")
		})
	}
}
