package tests

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// refsDoc is a parsed `vh5fs refs` document.
type refsDoc struct {
	Version int                        `json:"version"`
	Refs    map[string]json.RawMessage `json:"refs"`
}

// vh5fsRefs runs `vh5fs refs ARGS -o OUT` and returns OUT's path, its parsed document and
// the command's stderr lines; the command must succeed.
func vh5fsRefs(t *testing.T, args ...string) (string, refsDoc, []string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "refs.json")
	_, stderr, code := vh5fsRun(t, append(append([]string{"refs"}, args...), "-o", out)...)
	require.Equal(t, 0, code, "vh5fs refs %v: %s", args, stderr)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var doc refsDoc
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, 1, doc.Version)
	var lines []string
	if s := strings.TrimSpace(stderr); s != "" {
		lines = strings.Split(s, "\n")
	}
	return out, doc, lines
}

// checkRefs runs tests/py/check_refs.py on FILE REFS pairs (zarr through the references
// against h5py, byte for byte) and returns its output.
func checkRefs(t *testing.T, mode []string, pairs ...string) string {
	t.Helper()
	out, err := exec.Command(python(t), append(append([]string{"py/check_refs.py"}, mode...), pairs...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "MISMATCH")
	return string(out)
}

// TestRefsFixtures: every version of every fixture (shared fixtures, legacy files), of the
// extra plain file, and of generated files read through zarr from `vh5fs refs --all`
// equals h5py's read byte for byte, and versioned-hdf5's (the manifests' sha256 and
// values). Nothing is left out of these files.
func TestRefsFixtures(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	files := []string{}
	for _, m := range manifests {
		files = append(files, m.H5)
	}
	files = append(files,
		makeVersioned(t, "--shape", "262144", "--chunks", "1024", "--gzip"),
		makeVersioned(t, "--shape", "600,37", "--chunks", "8,10", "--gzip"),
		makeVersioned(t, "--shape", "10,7", "--chunks", "4,3", "--versions", "4", "--gzip"),
		makeVersioned(t, "--shape", "300,5", "--chunks", "7,2", "--versions", "3", "--dtype", ">i4", "--fillvalue", "-9"),
	)
	var pairs []string
	for _, f := range files {
		out, doc, warnings := vh5fsRefs(t, "--all", f)
		require.Empty(t, warnings, f)
		require.Contains(t, doc.Refs, "versions/.zgroup")
		pairs = append(pairs, f, out)
	}
	got := checkRefs(t, []string{"--all", "--manifest"}, pairs...)
	require.Equal(t, len(files), strings.Count(got, "refs ok: "), got)
	require.NotContains(t, got, "left out:")
	require.Equal(t, len(manifests), len(files)-4)
	for _, m := range manifests {
		require.Contains(t, got, "refs ok: "+filepath.Base(m.H5)+": "+strconv.Itoa(len(m.Versions))+" versions", got)
	}

	plainOut, doc, warnings := vh5fsRefs(t, "testdata/extra/plain.h5")
	require.Empty(t, warnings)
	require.Contains(t, doc.Refs, ".zgroup")
	require.Contains(t, checkRefs(t, []string{"--plain"}, "testdata/extra/plain.h5", plainOut), "refs ok: plain.h5: 0 versions, 6 datasets")
}

// TestRefsVersions: a single version is described at the root (the current one by
// default, or the one named or current at --at), with the version's attributes in the
// root .zattrs; --url replaces the file's path in every chunk reference.
func TestRefsVersions(t *testing.T) {
	file := fixturePath("basic_1d.h5")
	abs, err := filepath.Abs(file)
	require.NoError(t, err)
	for _, tc := range []struct {
		args    []string
		version string
	}{
		{nil, "v4"},
		{[]string{"v2"}, "v2"},
		{[]string{"--at", "2024-01-01 02:30:00"}, "v3"},
	} {
		out, doc, warnings := vh5fsRefs(t, append([]string{file}, tc.args...)...)
		require.Empty(t, warnings)
		var attrs map[string]any
		var text string
		require.NoError(t, json.Unmarshal(doc.Refs[".zattrs"], &text))
		require.NoError(t, json.Unmarshal([]byte(text), &attrs))
		require.Contains(t, attrs, "timestamp")
		require.NotContains(t, doc.Refs, "versions/.zgroup")
		require.Contains(t, checkRefs(t, []string{"--version", tc.version, "--manifest"}, file, out), "refs ok: basic_1d.h5: 1 versions")
		for k, v := range doc.Refs {
			if strings.HasPrefix(k, "x/") && !strings.Contains(k, "/.") {
				var ref []any
				require.NoError(t, json.Unmarshal(v, &ref), k)
				require.Equal(t, abs, ref[0], k)
			}
		}
	}

	// --url: object-storage URLs are written as given; a file:// URL reads.
	_, doc, _ := vh5fsRefs(t, file, "--url", "s3://bucket/run.h5")
	n := 0
	for k, v := range doc.Refs {
		if strings.HasPrefix(k, "x/") && !strings.Contains(k, "/.") {
			require.True(t, strings.HasPrefix(string(v), `["s3://bucket/run.h5",`), "%s: %s", k, v)
			n++
		}
	}
	require.Positive(t, n)
	out, _, _ := vh5fsRefs(t, file, "--url", "file://"+abs)
	require.Contains(t, checkRefs(t, []string{"--version", "v4"}, file, out), "refs ok: basic_1d.h5: 1 versions, 1 datasets")
}

// TestRefsCommandLine: usage errors exit 2, bad files exit 1 with one line and leave no
// output file behind; stdout is the document when -o is not given.
func TestRefsCommandLine(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"refs"}, 2, "needs FILE"},
		{[]string{"refs", fixturePath("basic_1d.h5"), "v1", "--all"}, 2, "--all describes every version"},
		{[]string{"refs", fixturePath("basic_1d.h5"), "v1", "--at", "2024-01-01"}, 2, "not both"},
		{[]string{"refs", fixturePath("basic_1d.h5"), "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"refs", fixturePath("basic_1d.h5"), "nope", "-o", out}, 1, `no version "nope"`},
		{[]string{"refs", "testdata/extra/plain.h5", "v1", "-o", out}, 1, "not a versioned-hdf5 file"},
		{[]string{"refs", "testdata/extra/data_version_3.h5", "-o", out}, 1, "unsupported data_version 3"},
		{[]string{"refs", "refs_test.go", "-o", out}, 1, "not an HDF5 file"},
	} {
		stdout, stderr, code := vh5fsRun(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.msg, "%v", tc.args)
		require.Empty(t, stdout, "%v", tc.args)
		if tc.code == 1 {
			require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: %q", tc.args, stderr)
		}
		_, err := os.Stat(out)
		require.True(t, os.IsNotExist(err), "%v left %s", tc.args, out)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "temporary files left behind")

	stdout, stderr, code := vh5fsRun(t, "refs", fixturePath("grid_2d_gzip.h5"), "r2")
	require.Equal(t, 0, code, stderr)
	var doc refsDoc
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	var zarray struct {
		Shape, Chunks []int64
		DType         string         `json:"dtype"`
		Compressor    map[string]any `json:"compressor"`
		Filters       []map[string]any
		FillValue     any    `json:"fill_value"`
		Order         string `json:"order"`
	}
	var text string
	require.NoError(t, json.Unmarshal(doc.Refs["temp/.zarray"], &text))
	require.NoError(t, json.Unmarshal([]byte(text), &zarray))
	require.Equal(t, []int64{8, 10}, zarray.Chunks)
	require.Equal(t, "<f8", zarray.DType)
	require.Equal(t, map[string]any{"id": "zlib", "level": 4.0}, zarray.Compressor)
	require.Equal(t, []map[string]any{{"id": "shuffle", "elementsize": 8.0}}, zarray.Filters)
	require.Equal(t, 0.5, zarray.FillValue)
	require.Equal(t, "C", zarray.Order)
}

// TestRefsEdgeCases: datasets Zarr cannot read from the references are left out, each with
// one stderr line naming it, and never make the rest fail; chunks whose filter mask skipped
// a filter are inlined re-encoded; Fletcher-32 checksums are cut off the byte ranges;
// variable-length strings are inlined as VLenUTF8; NaN and infinite fill values read as
// such (tests/py/make_refs_edge.py lists the cases).
func TestRefsEdgeCases(t *testing.T) {
	dir := t.TempDir()
	plain, versioned := filepath.Join(dir, "edge.h5"), filepath.Join(dir, "edgev.h5")
	b, err := exec.Command(python(t), "py/make_refs_edge.py", plain, versioned).CombinedOutput()
	require.NoError(t, err, "%s", b)

	out, doc, warnings := vh5fsRefs(t, plain)
	prefix := "vh5fs: refs: " + plain + ": "
	require.Equal(t, []string{
		prefix + "/lzf: left out: no numcodecs codec for LZF (filter 32000)",
		prefix + "/ragged: left out: unsupported dataset: dtype |V16 has no byte form",
	}, warnings)
	for _, k := range []string{"lzf/.zarray", "ragged/.zarray", "lzf/0"} {
		require.NotContains(t, doc.Refs, k)
	}
	inline := func(k string) bool { return strings.HasPrefix(string(doc.Refs[k]), `"base64:`) }
	require.True(t, inline("gzip_masked/1.1"), "the chunk stored with deflate skipped is inlined")
	require.False(t, inline("gzip_masked/0.0"))
	require.NotContains(t, doc.Refs, "gzip_masked/1.0", "unwritten chunks have no key")
	require.True(t, inline("words/0.0"))
	require.True(t, inline("contiguous/0"))
	zarray := func(k string) map[string]any {
		var text string
		require.NoError(t, json.Unmarshal(doc.Refs[k+"/.zarray"], &text))
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(text), &m))
		return m
	}
	require.Equal(t, "NaN", zarray("gzip_masked")["fill_value"])
	require.Equal(t, "-Infinity", zarray("neg_inf")["fill_value"])
	require.Equal(t, 1.5, zarray("half")["fill_value"])
	require.Equal(t, -3.0, zarray("fletcher")["fill_value"])
	require.Equal(t, "|O", zarray("words")["dtype"])
	require.Equal(t, []any{map[string]any{"id": "vlen-utf8"}}, zarray("words")["filters"])
	// The checksum is not part of the range (12 bytes stored for 4 uint16); the chunk
	// stored with the checksum skipped has none to cut.
	for _, k := range []string{"fletcher_raw/0", "fletcher_raw/1"} {
		var ref []any
		require.NoError(t, json.Unmarshal(doc.Refs[k], &ref), k)
		require.EqualValues(t, 4*2, ref[2], k)
	}
	got := checkRefs(t, []string{"--plain"}, plain, out)
	require.True(t, inline("scalar/0"), "a scalar is a 0-d array with its one chunk inlined")
	require.Contains(t, got, "refs ok: edge.h5: 0 versions, 9 datasets")
	for _, ds := range []string{"lzf", "ragged"} {
		require.Contains(t, got, "left out: /"+ds+"\n")
	}

	out, doc, warnings = vh5fsRefs(t, "--all", versioned)
	require.Empty(t, warnings)
	// v0 maps raw_data's slot 0 at chunk (0, 0); v1 changed that chunk (another slot).
	require.True(t, strings.HasPrefix(string(doc.Refs["versions/v0/data/0.0"]), `"base64:`))
	require.True(t, strings.HasPrefix(string(doc.Refs["versions/v1/data/0.0"]), `[`))
	require.Contains(t, checkRefs(t, []string{"--all"}, versioned, out), "refs ok: edgev.h5: 3 versions, 3 datasets")

	// LZF in a versioned file: 'data' is left out of every version, 'log' is described.
	lzf := makeVersioned(t, "--shape", "10,7", "--chunks", "4,3", "--versions", "2", "--lzf", "--history", "2", "--log-everywhere")
	out, doc, warnings = vh5fsRefs(t, "--all", lzf)
	prefix = "vh5fs: refs: " + lzf + ": "
	require.Equal(t, []string{
		prefix + "v0/data: left out: no numcodecs codec for LZF (filter 32000)",
		prefix + "v1/data: left out: no numcodecs codec for LZF (filter 32000)",
	}, warnings)
	require.Contains(t, doc.Refs, "versions/v1/log/.zarray")
	got = checkRefs(t, []string{"--all"}, lzf, out)
	require.Contains(t, got, "left out: v0/data\n")
	require.Contains(t, got, "refs ok: data.h5: 4 versions, 4 datasets")
}

// TestRefsDaskXarray: a dask.distributed LocalCluster of 2 worker processes computes over
// a gzip+shuffle version from its references (both workers read chunks) and matches
// h5py; xarray opens the version's references.
func TestRefsDaskXarray(t *testing.T) {
	file := makeVersioned(t, "--shape", "4000,250", "--chunks", "100,50", "--versions", "2", "--gzip")
	out, _, warnings := vh5fsRefs(t, file, "v1")
	require.Empty(t, warnings)
	b, err := exec.Command(python(t), "py/dask_refs.py", file, out, "v1", "data").CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.Contains(t, string(b), "dask ok: 2 worker processes, 2 read 200 blocks of zarr chunks (100, 50), 8000000 bytes equal to h5py's")
	require.Contains(t, string(b), "xarray ok: {'data_dim_0': 4000, 'data_dim_1': 250} float64")
}

// TestRefsSpeed: the references of a 100k-chunk version take well under a second and
// point at every chunk (each one float64 holding its index); zarr reads the version as h5py
// does; --all on 300 versions takes seconds.
func TestRefsSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a 100k-chunk file")
	}
	const n = 100000
	file := makeVersioned(t, "--shape", strconv.Itoa(n), "--chunks", "1")
	var took []time.Duration
	var out string
	var doc refsDoc
	for range 3 {
		start := time.Now()
		o, d, warnings := vh5fsRefs(t, file)
		took = append(took, time.Since(start))
		require.Empty(t, warnings)
		out, doc = o, d
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("vh5fs refs, one version of %d chunks: %v (median of 3, process start to exit)", n, took[1])
	require.Less(t, took[1], time.Second)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	seen := 0
	for k, v := range doc.Refs {
		idx, ok := strings.CutPrefix(k, "data/")
		if !ok || strings.HasPrefix(idx, ".") {
			continue
		}
		var ref struct {
			URL       string
			Off, Size int64
		}
		var arr []json.RawMessage
		require.NoError(t, json.Unmarshal(v, &arr))
		require.Len(t, arr, 3)
		require.NoError(t, json.Unmarshal(arr[1], &ref.Off))
		require.NoError(t, json.Unmarshal(arr[2], &ref.Size))
		i, err := strconv.Atoi(idx)
		require.NoError(t, err)
		require.EqualValues(t, 8, ref.Size)
		require.Equal(t, float64(i), math.Float64frombits(binary.LittleEndian.Uint64(raw[ref.Off:])), k)
		seen++
	}
	require.Equal(t, n, seen)
	require.Contains(t, checkRefs(t, []string{"--version", "v0"}, file, out), "800000 bytes equal to h5py's")

	took = took[:0]
	for range 3 {
		start := time.Now()
		_, doc, _ := vh5fsRefs(t, "--all", fixturePath("many_versions.h5"))
		took = append(took, time.Since(start))
		require.Contains(t, doc.Refs, "versions/v0299/counts/63")
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("vh5fs refs --all, 300 versions: %v (median of 3)", took[1])
	require.Less(t, took[1], 5*time.Second)
}

// refsRecipes are the guide's recipes of "Zarr references" (marked skip for
// TestReadmeRecipes, which mounts): the references, Dask and xarray.
func refsRecipes(t *testing.T) []string {
	b, err := os.ReadFile("../docs/GUIDE.md")
	require.NoError(t, err)
	text := string(b)
	start := strings.Index(text, "## Zarr references")
	require.Positive(t, start)
	end := start + 1 + strings.Index(text[start+1:], "\n## ")
	blocks := regexp.MustCompile("(?s)<!-- recipe: skip \\(no mount[^>]*-->\n```sh\n(.*?)```").FindAllStringSubmatch(text[start:end], -1)
	require.Len(t, blocks, 3)
	var out []string
	for _, blk := range blocks {
		out = append(out, blk[1])
	}
	return out
}

// runRecipe runs script as a newcomer would paste it into sh (set -e) in dir, with vh5fs
// and python3 on PATH, and returns its output; it must succeed.
func runRecipe(t *testing.T, dir, script string) string {
	t.Helper()
	bin := t.TempDir()
	require.NoError(t, os.Symlink(vh5fsBin, filepath.Join(bin, "vh5fs")))
	require.NoError(t, os.Symlink(python(t), filepath.Join(bin, "python3")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n---\n%s", script, out)
	return string(out)
}

// TestRefsReadme runs the guide's recipes of "Zarr references" in one directory, as a
// newcomer would paste them, with data.h5 a copy of the demo file, and checks what they
// print against h5py. The xarray recipe is run again on references whose "temp" is an
// int32 dataset with fill value 0 holding real zeros and an unwritten chunk: it
// reads int32, not float64 with the zeros masked.
func TestRefsReadme(t *testing.T) {
	blocks := refsRecipes(t)
	work := t.TempDir()
	data := filepath.Join(work, "data.h5")
	require.NoError(t, os.Rename(fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5"), data))
	var outs []string
	for _, blk := range blocks {
		outs = append(outs, runRecipe(t, work, blk))
	}
	want := run(t, python(t), "-c", `import sys, h5py
v = h5py.File(sys.argv[1], "r")["_version_data/versions"]
t = v["r5/temp"][()]
print(repr(float(t.mean())), repr(float(t.max())))`, data)
	var mean, maxv float64
	_, err := fmt.Sscanf(want, "%g %g", &mean, &maxv)
	require.NoError(t, err, want)
	require.Contains(t, outs[0], "(45, 37) float64 temperature [")
	require.Contains(t, outs[0], "r1: (50, 37)")
	m := regexp.MustCompile(`mean: (\S+)`).FindStringSubmatch(outs[1])
	require.NotNil(t, m, outs[1])
	got, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.InDelta(t, mean, got, 1e-12, "dask's mean against numpy's of h5py's read")
	require.Contains(t, outs[2], "('temp_dim_0', 'temp_dim_1') float64 "+strconv.FormatFloat(maxv, 'g', -1, 64)+" 2024-01-01 05:00:00.000000+0000")

	ints := t.TempDir()
	run(t, python(t), "py/xarray_refs.py", "make", filepath.Join(ints, "ints.h5"))
	refs, _, warnings := vh5fsRefs(t, filepath.Join(ints, "ints.h5"))
	require.Empty(t, warnings)
	require.NoError(t, os.Rename(refs, filepath.Join(ints, "r5.json")))
	store, err := os.ReadFile(filepath.Join(work, "refs_store.py"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ints, "refs_store.py"), store, 0o644))
	require.Contains(t, runRecipe(t, ints, blocks[2]), "('temp_dim_0', 'temp_dim_1') int32 2.0 2025-01-01 00:00:00.000000+0000")
}

// readmeXarrayOpen is the guide's xarray recipe's xr.open_dataset(...) call, as written.
func readmeXarrayOpen(t *testing.T) string {
	m := regexp.MustCompile(`(?s)xr\.open_dataset\(.*?\)\s*(#[^\n]*)?\n`).FindString(refsRecipes(t)[2])
	require.NotEmpty(t, m, "the guide's xarray recipe calls xr.open_dataset")
	return strings.TrimSpace(regexp.MustCompile(`#[^\n]*`).ReplaceAllString(m, ""))
}

// TestRefsXarrayFill: HDF5's fill value is data, but xarray's Zarr backend masks
// every element equal to an array's fill_value as missing (NaN, in a float dtype) unless
// opened with mask_and_scale=False, as the guide's recipe does. Through that call, int,
// uint8 and float datasets whose fill value (0, -1, 255, NaN) also appears as data, each
// with an unwritten chunk, in a plain file and in a version, read with h5py's dtype and
// values; zarr still reads unwritten chunks as the fill value. A plain open masks them.
func TestRefsXarrayFill(t *testing.T) {
	open := readmeXarrayOpen(t)
	require.Contains(t, open, "mask_and_scale=False")

	plain := filepath.Join(t.TempDir(), "fill.h5")
	run(t, python(t), "py/xarray_refs.py", "make", plain)
	out, _, warnings := vh5fsRefs(t, plain)
	require.Empty(t, warnings)
	got := run(t, python(t), "py/xarray_refs.py", "check", "--open", open, plain, out)
	require.Contains(t, got, "xarray ok: 5 datasets equal to h5py's")
	// What the guide warns of: a plain open masks every fill-valued element.
	require.Contains(t, got, "plain: temp float64 masked 32\n")
	require.Contains(t, got, "plain: zeros float64 masked 27\n")
	require.Contains(t, got, "plain: nan float32 equal\n", "masking NaN as NaN changes nothing")
	require.Contains(t, checkRefs(t, []string{"--plain"}, plain, out), "refs ok: fill.h5: 0 versions, 5 datasets")

	// A version: int32 with fill 0, element (0, 0) a real 0 (values n % 3).
	versioned := makeVersioned(t, "--shape", "10,7", "--chunks", "4,3", "--dtype", "<i4", "--modulo", "3", "--fillvalue", "0")
	out, _, warnings = vh5fsRefs(t, versioned)
	require.Empty(t, warnings)
	got = run(t, python(t), "py/xarray_refs.py", "check", "--open", open, versioned, out, "_version_data/versions/v0")
	require.Contains(t, got, "xarray ok: 1 datasets equal to h5py's")
	require.Contains(t, got, "plain: data float64 masked 24\n")
}

// TestRefsBrokenFiles runs `vh5fs refs --all` on every file of the hostile-input corpus
// (tests/py/make_broken.py): it either writes a complete document, naming on stderr each
// version, group or dataset it left out, or fails with one line; it never crashes or hangs.
func TestRefsBrokenFiles(t *testing.T) {
	dir := t.TempDir()
	run(t, python(t), "py/make_broken.py", fixture.Dir(), dir)
	files, err := filepath.Glob(filepath.Join(dir, "*.h5"))
	require.NoError(t, err)
	require.Greater(t, len(files), 20)
	complete, leftOut := 0, 0
	docs := map[string]string{}
	for _, f := range files {
		out := filepath.Join(t.TempDir(), "refs.json")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, vh5fsBin, "refs", "--all", f, "-o", out)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if err != nil {
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s: %s", f, stderr.String())
			require.Equal(t, 1, exit.ExitCode(), "%s: %s", f, stderr.String())
			require.Len(t, lines, 1, "%s: %s", f, stderr.String())
			require.True(t, strings.HasPrefix(lines[0], "vh5fs: "+f+": "), lines[0])
			_, err := os.Stat(out)
			require.True(t, os.IsNotExist(err), "%s: a partial document was left", f)
			continue
		}
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		var doc refsDoc
		require.NoError(t, json.Unmarshal(b, &doc), f)
		require.Contains(t, doc.Refs, ".zgroup", f)
		docs[filepath.Base(f)] = out
		complete++
		if stderr.Len() > 0 {
			leftOut++
			for _, l := range lines {
				require.Regexp(t, `^vh5fs: refs: `+regexp.QuoteMeta(f)+`: \S+: (left out|attributes left out|members left out): `, l)
			}
		}
	}
	t.Logf("%d files: %d complete documents (%d of them with parts left out), %d refused", len(files), complete, leftOut, len(files)-complete)
	require.Positive(t, leftOut)
	// Mappings whose raw_data slots are not chunk-aligned have no chunk map to list: the
	// dataset is inlined as the mount reads it, which is h5py's read.
	f := "vds_source_misaligned.h5"
	require.Contains(t, docs, f)
	require.Contains(t, checkRefs(t, []string{"--all"}, filepath.Join(dir, f), docs[f]), "refs ok: "+f+": 4 versions, 4 datasets")
}

// TestRefsOddNames: versions, groups and datasets named with spaces, tabs, newlines, UTF-8
// and leading dots read through zarr as h5py reads them (metadata is ASCII-escaped JSON,
// as zarr-python 2.13 requires); names zarr cannot address ("..", backslashes) are left
// out, each with one warning line.
func TestRefsOddNames(t *testing.T) {
	file := filepath.Join(t.TempDir(), "odd.h5")
	run(t, python(t), "py/odd_names.py", "make", file)
	out, doc, warnings := vh5fsRefs(t, "--all", file)
	got := checkRefs(t, []string{"--all"}, file, out)
	leftOut := len(regexp.MustCompile(`(?m)^left out: `).FindAllString(got, -1))
	require.Contains(t, got, "refs ok: odd.h5: 8 versions, 96 datasets")
	require.Contains(t, got, fmt.Sprintf(", %d left out", leftOut))
	versionsLeftOut := 0
	for _, w := range warnings {
		what, ok := strings.CutPrefix(w, "vh5fs: refs: "+file+": ")
		require.True(t, ok, w)
		path, _, ok := strings.Cut(what, ": left out: ")
		require.True(t, ok, w)
		require.Contains(t, what, "cannot be a Zarr key", w)
		if !strings.Contains(path, "/") {
			versionsLeftOut++
		}
	}
	require.Equal(t, len(warnings), leftOut+versionsLeftOut, "one warning per name left out:\n%s", strings.Join(warnings, "\n"))
	require.Equal(t, 2, versionsLeftOut, "the versions '..' and 'back\\slash'")
	found := false
	for k := range doc.Refs {
		found = found || strings.Contains(k, "température")
	}
	require.True(t, found, "UTF-8 names are kept as they are in the keys")
}

// TestRefsOutput: -o replaces a regular file whole, writes a symbolic link's target (the
// link stays a link) and writes a pipe or device in place (renaming over /dev/null once
// made it a regular file); a directory is refused.
func TestRefsOutput(t *testing.T) {
	file := fixturePath("basic_1d.h5")
	dir := t.TempDir()
	target := filepath.Join(dir, "target.json")
	require.NoError(t, os.WriteFile(target, []byte("old"), 0o644))
	link := filepath.Join(dir, "link.json")
	require.NoError(t, os.Symlink("target.json", link))
	_, stderr, code := vh5fsRun(t, "refs", file, "-o", link)
	require.Equal(t, 0, code, stderr)
	st, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, st.Mode().Type(), "the link stays a link")
	var doc map[string]any
	require.NoError(t, json.Unmarshal(must(os.ReadFile(target)), &doc))
	require.Contains(t, doc, "refs")

	fifo := filepath.Join(dir, "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- b
	}()
	_, stderr, code = vh5fsRun(t, "refs", file, "-o", fifo)
	require.Equal(t, 0, code, stderr)
	select {
	case b := <-got:
		require.NoError(t, json.Unmarshal(b, &doc), "the document went through the pipe")
	case <-time.After(30 * time.Second):
		t.Fatal("nothing was written to the pipe")
	}
	st, err = os.Lstat(fifo)
	require.NoError(t, err)
	require.Equal(t, os.ModeNamedPipe, st.Mode().Type(), "the pipe stays a pipe")

	_, stderr, code = vh5fsRun(t, "refs", file, "-o", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "is a directory")
}
