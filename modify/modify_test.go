package modify

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// optionsOf turns a golden's vh5fs modify arguments into Options, as the command does.
func optionsOf(t *testing.T, args []string) Options {
	var o Options
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--chunks":
			i++
			for _, s := range strings.Split(args[i], ",") {
				c, err := strconv.ParseInt(s, 10, 64)
				require.NoError(t, err)
				o.Chunks = append(o.Chunks, c)
			}
		case "--compression":
			i++
			o.Compression, o.GzipLevel = args[i], -1
		case "--shuffle", "--no-shuffle":
			b := a == "--shuffle"
			o.Shuffle = &b
		case "--dtype":
			i++
			o.DType = args[i]
		case "--fillvalue":
			i++
			o.FillValue = args[i]
		default:
			t.Fatalf("argument %q", a)
		}
	}
	return o
}

// TestGolden modifies each golden's before-file and compares every version with
// versioned-hdf5's after-file: the tree, data, hash_table rows, slots and mappings;
// the dataset's attributes are the before-file's (chunks aside), which versioned-hdf5
// drops.
func TestGolden(t *testing.T) {
	ms, err := fixture.Modifies()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			file := fixture.Copy(t, m.Before)
			res, err := File(file, m.Dataset, optionsOf(t, m.Args), false)
			require.NoError(t, err)
			require.NotEmpty(t, res.Versions)
			checkGolden(t, file, m)
		})
	}
}

func checkGolden(t *testing.T, file string, m fixture.Modify) {
	t.Helper()
	man, err := fixture.Load(strings.TrimSuffix(m.After, ".h5") + ".json")
	require.NoError(t, err)
	for _, v := range man.VersionNames() {
		got, err := conform.Tree(file, v)
		require.NoError(t, err)
		want, err := conform.Tree(m.After, v)
		require.NoError(t, err)
		require.Equal(t, withoutAttrs(want, m.Dataset), withoutAttrs(got, m.Dataset), "version %s", v)
		if _, ok := man.Versions[slices.IndexFunc(man.Versions, func(x fixture.Version) bool { return x.Name == v })].Datasets[m.Dataset]; !ok {
			continue
		}
		g, err := conform.Read(file, v, m.Dataset, 0)
		require.NoError(t, err)
		w, err := conform.Read(m.After, v, m.Dataset, 0)
		require.NoError(t, err)
		require.Empty(t, conform.Diff(g, w), "version %s", v)
		require.Equal(t, keptAttrs(t, m.Before, v, m.Dataset, w), attrsOf(t, file, v, m.Dataset), "attributes in version %s", v)
	}
	f, err := versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	k, err := f.HDF5().Kind(scratch)
	require.NoError(t, err)
	require.Equal(t, h5.KindMissing, k, "the scratch group is gone")
	members, err := f.HDF5().Members(versions.DataRoot + "/" + m.Dataset)
	require.NoError(t, err)
	require.Len(t, members, 2)
}

// withoutAttrs drops the attributes of dataset's lines from a conform.Tree.
func withoutAttrs(tree, dataset string) string {
	lines := strings.Split(tree, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, fmt.Sprintf("dataset %q ", dataset)) {
			lines[i] = l[:strings.LastIndex(l, " attrs ")]
		}
	}
	return strings.Join(lines, "\n")
}

func attrsOf(t *testing.T, file, version, dataset string) map[string]string {
	f, err := versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	as, err := f.Attrs(versions.VersionsGroup + "/" + version + "/" + dataset)
	require.NoError(t, err)
	out := map[string]string{}
	for _, a := range as {
		out[a.Name] = fmt.Sprint(h5json.Attr(a))
	}
	return out
}

// keptAttrs is what vh5fs leaves on a version's dataset: the before-file's attributes
// with chunks as the library wrote it.
func keptAttrs(t *testing.T, before, version, dataset string, _ *conform.Commit) map[string]string {
	want := attrsOf(t, before, version, dataset)
	want["chunks"] = attrsOf(t, strings.Replace(before, "-before.h5", "-after.h5", 1), version, dataset)["chunks"]
	return want
}

// TestDryRun: -n plans and writes nothing.
func TestDryRun(t *testing.T) {
	m := golden(t, "golden_modify_rechunk_1d")
	file := fixture.Copy(t, m.Before)
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	res, err := File(file, "x", Options{Chunks: []int64{6}}, true)
	require.NoError(t, err)
	require.Equal(t, []string{"v1", "v2", "v3", "v5"}, res.Versions)
	require.Equal(t, []string{"chunks (4,) -> (6,)"}, res.Changes())
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func golden(t *testing.T, name string) fixture.Modify {
	ms, err := fixture.Modifies()
	require.NoError(t, err)
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no golden %s", name)
	return fixture.Modify{}
}

// TestRefusals: bad options and unsupported datasets get one clear error, and the file
// is not touched.
func TestRefusals(t *testing.T) {
	m := golden(t, "golden_modify_rechunk_2d")
	for _, c := range []struct {
		name, dataset string
		o             Options
		want          string
	}{
		{"rank", "g/z", Options{Chunks: []int64{4}}, "has 2 axes"},
		{"zero", "g/z", Options{Chunks: []int64{0, 3}}, "must be positive"},
		{"compression", "g/z", Options{Compression: "zstd"}, "not one of none"},
		{"level", "g/z", Options{Compression: "gzip", GzipLevel: 12}, "0 to 9"},
		{"dtype", "g/z", Options{DType: "<U4"}, "--dtype"},
		{"fill", "g/z", Options{FillValue: "abc"}, "--fillvalue"},
		{"missing", "g/nope", Options{}, "no version holds"},
		{"path", "../x", Options{}, "not a path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := fixture.Copy(t, m.Before)
			before, err := os.ReadFile(file)
			require.NoError(t, err)
			_, err = File(file, c.dataset, c.o, false)
			require.ErrorContains(t, err, c.want)
			after, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
	t.Run("strings", func(t *testing.T) {
		file := fixture.Copy(t, fixture.Dir()+"/strings.h5")
		f, err := versions.Open(file)
		require.NoError(t, err)
		v, err := f.CurrentVersion()
		require.NoError(t, err)
		ents, err := f.List(versions.VersionsGroup + "/" + v)
		require.NoError(t, err)
		var vlen string
		for _, e := range ents {
			d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/" + e.Name)
			if err == nil && d.Strings {
				vlen = e.Name
			}
		}
		f.Close()
		require.NotEmpty(t, vlen)
		text := func() []byte { // the current version's strings, as vh5fs serves them
			f, err := versions.Open(file)
			require.NoError(t, err)
			defer f.Close()
			d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/" + vlen)
			require.NoError(t, err)
			b := make([]byte, d.Size())
			_, err = d.ReadAt(b, 0)
			require.NoError(t, err)
			return b
		}
		before := text()
		// Strings are rewritten by value now (issue 50); casts to numbers stay refused.
		_, err = File(file, vlen, Options{Chunks: []int64{2}, Compression: "gzip", GzipLevel: -1}, false)
		require.NoError(t, err)
		require.Equal(t, string(before), string(text()))
		_, err = File(file, vlen, Options{DType: "<i8"}, false)
		require.ErrorContains(t, err, "casts between strings and numbers are not supported")
	})
}

// TestBandsReadOnce: a band of new chunks whose source chunks an earlier version had
// already is mapped without being read again, with the same result (TestGolden).
func TestBandsReadOnce(t *testing.T) {
	m := golden(t, "golden_modify_rechunk_1d")
	file := fixture.Copy(t, m.Before)
	res, err := File(file, "x", Options{Chunks: []int64{6}}, false)
	require.NoError(t, err)
	var total, chunks int64
	for _, s := range lengths(t, m.Before, res.Versions) {
		total += s * 8
		chunks += (s + 5) / 6
	}
	require.Equal(t, chunks, res.Chunks, "every chunk of every version mapped")
	require.Less(t, res.Read, total, "bands shared with an earlier version are not read again")
	checkGolden(t, file, m)
}

// lengths is the length of x in each of the versions of file before.
func lengths(t *testing.T, before string, vs []string) []int64 {
	f, err := versions.Open(before)
	require.NoError(t, err)
	defer f.Close()
	var out []int64
	for _, v := range vs {
		d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/x")
		require.NoError(t, err)
		out = append(out, d.Shape[0])
	}
	return out
}

// TestFailureHalfway: a modify that fails in the middle of its swap leaves the file as
// it was: nothing it wrote reaches the file, not even at the close.
func TestFailureHalfway(t *testing.T) {
	m := golden(t, "golden_modify_rechunk_2d")
	file := fixture.Copy(t, m.Before)
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	failHook = func(step string) error {
		if step == "swapped v2" {
			return fmt.Errorf("injected")
		}
		return nil
	}
	defer func() { failHook = nil }()
	_, err = File(file, "g/z", Options{Chunks: []int64{5, 3}}, false)
	require.ErrorContains(t, err, "injected")
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after[:len(before)], "the file's bytes are as they were")
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		got, err := conform.Tree(file, v)
		require.NoError(t, err)
		want, err := conform.Tree(m.Before, v)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	failHook = nil
	_, err = File(file, "g/z", Options{Chunks: []int64{5, 3}}, false)
	require.NoError(t, err, "a later modify goes through")
	checkGolden(t, file, m)
}

// TestCost: the new chunks of each version follow from its shape; the old storage is
// measured; dry or not, the plan carries them.
func TestCost(t *testing.T) {
	m := golden(t, "golden_modify_rechunk_2d")
	for _, c := range []struct {
		name     string
		chunks   []int64
		versions []int64 // new chunks of v1..v4
		slots    int64   // estimated
		real     int64   // what the rewrite makes
	}{
		{"finer", []int64{5, 3}, []int64{12, 12, 8, 12}, 29, 29},
		{"elements", []int64{1, 1}, []int64{120, 120, 90, 140}, 122, 122}, // shapes (12, 10), (12, 10), (9, 10), (14, 10)
		{"one chunk", []int64{100, 100}, []int64{1, 1, 1, 1}, 4, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := fixture.Copy(t, m.Before)
			res, err := File(file, "g/z", Options{Chunks: c.chunks}, true)
			require.NoError(t, err)
			require.Equal(t, c.versions, res.VersionChunks)
			var total int64
			for _, n := range c.versions {
				total += n
			}
			require.Equal(t, total, res.Mappings)
			require.Equal(t, slices.Max(c.versions), res.MaxChunks)
			require.Equal(t, c.slots, res.NewSlots)
			require.Positive(t, res.Growth)
			require.Positive(t, res.Unused, "the old storage is measured")
			run, err := File(file, "g/z", Options{Chunks: c.chunks}, false)
			require.NoError(t, err)
			require.Equal(t, c.real, run.Slots)
		})
	}
}

// TestEstimate: modify -n's growth is within 25% of what the rewrite then adds to the
// file, on every golden and on fixtures and made files of other shapes: many versions
// (more new slots than old ones), compression added to uncompressed data (measured on
// sampled new chunks), LZF, data that repeats in chunks of different sources, 2-D and
// 3-D datasets.
func TestEstimate(t *testing.T) {
	type tc struct {
		name, file, dataset string
		args                []string
	}
	var cases []tc
	ms, err := fixture.Modifies()
	require.NoError(t, err)
	for _, m := range ms {
		if strings.HasPrefix(m.Name, "golden_modify_str_") {
			continue // string chunks hold heap handles: the estimate leaves the strings out
		}
		cases = append(cases, tc{m.Name, m.Before, m.Dataset, m.Args})
	}
	fx := func(name string) string { return filepath.Join(fixture.Dir(), name) }
	made := func(name string, args ...string) string {
		path := filepath.Join(t.TempDir(), name)
		out, err := exec.Command("/usr/bin/python3", append([]string{"../tests/py/make_versioned.py", path}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return path
	}
	gz := made("gz.h5", "--shape", "200000", "--chunks", "10000", "--versions", "20", "--gzip")
	grid := made("grid.h5", "--shape", "600,500", "--chunks", "100,500", "--versions", "12")
	periodic := made("periodic.h5", "--shape", "300000", "--chunks", "4096", "--versions", "30", "--lzf", "--dtype", "<i4", "--modulo", "1000")
	cases = append(cases,
		tc{"many versions, coarser", fx("many_versions.h5"), "counts", []string{"--chunks", "512"}},
		tc{"many versions, coarser, gzip", fx("many_versions.h5"), "counts", []string{"--chunks", "2048", "--compression", "gzip"}},
		tc{"many versions, finer", fx("many_versions.h5"), "counts", []string{"--chunks", "100"}},
		tc{"many versions, dtype", fx("many_versions.h5"), "counts", []string{"--dtype", "<i8"}},
		tc{"grid, finer", fx("grid_2d_gzip.h5"), "temp", []string{"--chunks", "5,5"}},
		tc{"grid, coarser, lzf", fx("grid_2d_gzip.h5"), "temp", []string{"--chunks", "20,20", "--compression", "lzf"}},
		tc{"grid, uncompressed", fx("grid_2d_gzip.h5"), "temp", []string{"--compression", "none"}},
		tc{"sparse", fx("sparse.h5"), "s", []string{"--chunks", "7"}},
		tc{"3-D", fx("nested.h5"), "sensors/north/cube", []string{"--chunks", "2,2,2"}},
		tc{"elements", fx("basic_1d.h5"), "x", []string{"--chunks", "1"}},
		tc{"gzip, finer", gz, "data", []string{"--chunks", "4096"}},
		tc{"gzip to lzf", gz, "data", []string{"--compression", "lzf"}},
		tc{"gzip to none", gz, "data", []string{"--compression", "none"}},
		tc{"2-D, square chunks", grid, "data", []string{"--chunks", "250,250"}},
		tc{"2-D, gzip", grid, "data", []string{"--compression", "gzip", "--shuffle"}},
		tc{"2-D, lzf", grid, "data", []string{"--chunks", "64,64", "--compression", "lzf"}},
		tc{"periodic data, finer", periodic, "data", []string{"--chunks", "1000"}},
		tc{"periodic data, gzip", periodic, "data", []string{"--compression", "gzip", "--shuffle"}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := fixture.Copy(t, c.file)
			o := optionsOf(t, c.args)
			plan, err := File(file, c.dataset, o, true)
			require.NoError(t, err)
			before, err := os.Stat(file)
			require.NoError(t, err)
			_, err = File(file, c.dataset, o, false)
			require.NoError(t, err)
			after, err := os.Stat(file)
			require.NoError(t, err)
			grew := after.Size() - before.Size()
			off := float64(plan.Growth-grew) / float64(grew)
			t.Logf("%s %v: estimated %d, grew %d (%+.0f%%; %d new slots estimated, %d sampled)", c.name, c.args, plan.Growth, grew, 100*off, plan.NewSlots, plan.Sampled)
			require.InDelta(t, 0, off, 0.25, "estimated %d, grew %d", plan.Growth, grew)
		})
	}
}

// TestLimit: a rewrite past MaxVersionChunks chunks in a version is refused unless forced
// or no version gets more chunks than one had before.
func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name          string
		most, oldMost int64
		force         bool
		refused       bool
	}{
		{"at the limit", MaxVersionChunks, 10, false, false},
		{"past it", MaxVersionChunks + 1, 10, false, true},
		{"forced", MaxVersionChunks + 1, 10, true, false},
		{"no worse than before", MaxVersionChunks + 1, MaxVersionChunks + 1, false, false},
		{"worse than before", 3 * MaxVersionChunks, 2 * MaxVersionChunks, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &modification{Plan: Plan{New: h5.DataSpec{Chunks: []int64{1}}, Cost: Cost{MaxChunks: c.most, OldMaxChunks: c.oldMost}}}
			err := m.checkLimit(c.force)
			if !c.refused {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrTooManyChunks)
			require.ErrorContains(t, err, fmt.Sprintf("make %d chunks in a version, past the limit of 100000 per version", c.most))
			require.ErrorContains(t, err, "--force rewrites anyway")
		})
	}
}

// TestReadLimit: a dataset one of whose versions already has more than MaxVersionChunks
// chunks is refused before its chunk maps are read, dry or not, unless forced; the file
// is left as it was.
func TestReadLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("short: making a version of 100,001 chunks takes ~16 s")
	}
	file := filepath.Join(t.TempDir(), "many.h5")
	out, err := exec.Command("/usr/bin/python3", "../tests/py/make_versioned.py", file, "--shape", "200002",
		"--chunks", "2", "--dtype", "|u1", "--modulo", "251", "--versions", "1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, dry := range []bool{true, false} {
		_, err := File(file, "data", Options{Chunks: []int64{1000}}, dry)
		require.ErrorIs(t, err, ErrTooManyChunks, "dry %v", dry)
		require.ErrorContains(t, err, "version v0 has 100001 chunks, past the limit of 100000 per version")
		require.ErrorContains(t, err, "--force rewrites anyway")
	}
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
	res, err := File(file, "data", Options{Chunks: []int64{1000}, Force: true}, true)
	require.NoError(t, err)
	require.Equal(t, []int64{201}, res.VersionChunks)
}
