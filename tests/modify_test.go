package tests

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestModifyGoldens: `vh5fs modify` of each golden's before-file makes a file whose
// versions h5py reads exactly as it reads versioned-hdf5's after-file (field-by-field
// comparison of the storage is modify's TestGolden), that fsck passes, and that
// versioned-hdf5, where importable, reads and commits on top of.
func TestModifyGoldens(t *testing.T) {
	ms, err := fixture.Modifies()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	lib := libraryPython(t)
	if lib == "" {
		t.Log("versioned_hdf5 is not importable here: the library's reads and commits on modified files not checked")
	}
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			file := fixture.Copy(t, m.Before)
			out, stderr, code := vh5fsRun(t, append([]string{"modify", file, m.Dataset}, m.Args...)...)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, file+": rewrote "+m.Dataset+" in ")
			require.Equal(t, versionDigests(t, m.After), versionDigests(t, file))
			_, stderr, code = vh5fsRun(t, "fsck", file)
			require.Equal(t, 0, code, stderr)
			if lib == "" {
				return
			}
			script := `import sys, numpy as np, h5py
from versioned_hdf5 import VersionedHDF5File
path, name = sys.argv[1], sys.argv[2]
with h5py.File(path, "r+") as f:
    vf = VersionedHDF5File(f)
    for v in f["_version_data/versions"]:
        if v == "__first_version__" or name not in f["_version_data/versions"][v]:
            continue
        a = vf[v][name][()]
        b = f["_version_data/versions"][v][name][()]
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind != "O"), v
    cur = f["_version_data/versions"].attrs["current_version"]
    if name in f["_version_data/versions"][cur]:
        with vf.stage_version("by_library") as g:
            d = g[name]
            new = 42 if d.dtype.kind != "O" else "42"
            d[(0,) * d.ndim] = new
        got = vf["by_library"][name][(0,) * d.ndim]
        assert (got.decode() if isinstance(got, bytes) else got) == new, got
`
			run(t, lib, "-c", script, file, m.Dataset)
			_, stderr, code = vh5fsRun(t, "fsck", file)
			require.Equal(t, 0, code, stderr)
		})
	}
}

// TestModifyRefused: bad options are usage errors (status 2), a dataset modify cannot
// rewrite and a file a mount holds (read-write or read-only) are refused (status 1); the
// file is left alone.
func TestModifyRefused(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/modify/golden_modify_rechunk_2d-before.h5")
	orig, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"g/z"}, 2, "nothing to change"},
		{[]string{"g/z", "--chunks", "4"}, 2, "g/z has 2 axes"},
		{[]string{"g/z", "--chunks", "4,x"}, 2, "positive integers"},
		{[]string{"g/z", "--compression", "zstd"}, 2, "not one of gzip[=LEVEL], lzf, none"},
		{[]string{"g/z", "--compression", "gzip=11"}, 2, "0 to 9"},
		{[]string{"g/z", "--shuffle", "--no-shuffle"}, 2, "together"},
		{[]string{"g/z", "--dtype", "<U4"}, 2, "--dtype"},
		{[]string{"g/z", "--fillvalue", "abc"}, 2, `modify: --fillvalue "abc": not a number for dtype <f8; see 'vh5fs help modify'`},
		{[]string{"g/z", "--fillvalue", "1e400"}, 2, `--fillvalue "1e400": out of range for dtype <f8`},
		{[]string{"g/z", "--dtype", "<f4", "--fillvalue", "1e39"}, 2, `--fillvalue "1e39": out of range for dtype <f4`},
		{[]string{"g/z", "--dtype", "<i4", "--fillvalue", "1.5"}, 2, `--fillvalue "1.5": not an integer for dtype <i4`},
		{[]string{"g/z", "--dtype", "|u1", "--fillvalue", "300"}, 2, `--fillvalue "300": out of range for dtype |u1`},
		{[]string{"g/z", "--dtype", "|b1", "--fillvalue", "yes"}, 2, `--fillvalue "yes": not true, false, 1 or 0 for dtype |b1`},
		{[]string{"g/z", "--shuffle=maybe"}, 2, `--shuffle "maybe": not true or false`},
		{[]string{"g/z", "--force"}, 2, "nothing to change"},
		{[]string{"g/nope", "--chunks", "4,4"}, 1, "no version holds a dataset g/nope"},
	} {
		_, stderr, code := vh5fsRun(t, append([]string{"modify", file}, c.args...)...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	}
	// Strings are rechunked (TestModifyGoldens); casts between strings and numbers are
	// refused in one line naming both dtypes.
	strs := fixture.Copy(t, "testdata/fixtures/strings.h5")
	_, stderr, code := vh5fsRun(t, "modify", strs, "names", "--dtype", "<f8")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--dtype <f8: names holds variable-length strings (O); casts between strings and numbers are not supported")
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	_, stderr, code = vh5fsRun(t, "modify", file, "g/z", "--dtype", "O")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--dtype O: g/z holds <f8 numbers; casts between numbers and variable-length strings are not supported")

	for _, opts := range []string{"rw", "ro"} {
		m := mount(t, file, opts)
		_, stderr, code = vh5fsRun(t, "modify", file, "g/z", "--chunks", "5,3")
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, "vh5fs: "+file+": in use by the vh5fs mount at "+m.Dir, opts)
		m.unmount(t)
	}
	now, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, orig, now)

	out, stderr, code := vh5fsRun(t, "modify", file, "g/z", "--chunks", "5,3", "--compression", "gzip", "-n")
	require.Equal(t, 0, code, stderr)
	first, _, _ := strings.Cut(out, "\n")
	require.Equal(t, file+": would rewrite g/z in 4 versions (v1, v2, v3, v4): chunks (4, 5) -> (5, 3); compression none -> gzip=4; raw_data holds 13 chunk slots", first)
}

// TestModifyKill kills `vh5fs modify` just before each system call of its sync in turn
// (h5.SyncKillEnv). Before any repair h5py reads every version as before, or every one
// as after, or, for a kill inside the guarded apply (the file marked, a whole journal
// beside it), finds no HDF5 file: never a mixture. After `vh5fs fsck --repair` every
// version reads as before the modify, or every one as after it (always, with a journal),
// and fsck finds nothing wrong.
func TestModifyKill(t *testing.T) {
	base := fixture.Copy(t, "testdata/fixtures/modify/golden_modify_rechunk_2d-before.h5")
	args := []string{"g/z", "--chunks", "5,3", "--dtype", "<f4"}
	old := digestLines(t, base)
	ref := copyPath(t, base)
	_, stderr, code := vh5fsRun(t, append([]string{"modify", ref}, args...)...)
	require.Equal(t, 0, code, stderr)
	want := digestLines(t, ref)
	for _, l := range want {
		require.NotContains(t, old, l, "every version's data changes")
	}
	kills, applied, hidden := 0, 0, 0
	for n := 1; ; n++ {
		file := copyPath(t, base)
		cmd := exec.Command(vh5fsBin, append([]string{"modify", file}, args...)...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", h5.SyncKillEnv, n))
		out, err := cmd.CombinedOutput()
		if err == nil {
			require.Equal(t, want, digestLines(t, file))
			break // n is past the last system call of the sync
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%s", out)
		require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "kill %d: %s", n, out)
		kills++
		st, err := os.Stat(file + h5.JournalSuffix)
		journal := err == nil && st.Size() > 0
		if journal {
			applied++
		}
		wasNew, marked := beforeRepair(t, file, n, old, want)
		if marked {
			require.True(t, journal, "kill %d: the file is marked, yet no journal can complete it", n)
			hidden++
		}
		out, err = exec.Command(vh5fsBin, "fsck", "--repair", file).CombinedOutput()
		require.NoError(t, err, "kill %d: fsck --repair: %s", n, out)
		lines := digestLines(t, file)
		switch {
		case journal:
			require.Equal(t, want, lines, "kill %d: the journal is whole: the repair completes the modify", n)
		case wasNew:
			require.Equal(t, want, lines, "kill %d", n)
		default:
			require.Equal(t, old, lines, "kill %d", n)
		}
		_, stderr, code := vh5fsRun(t, "fsck", file)
		require.Equal(t, 0, code, "kill %d: %s", n, stderr)
	}
	t.Logf("%d kills over the sync (%d with a whole journal beside the file, %d of them inside the guarded apply, which h5py refused as not HDF5)", kills, applied, hidden)
	require.Greater(t, kills, 5, "the kills cover the sync's steps")
	require.Positive(t, hidden, "kills fall inside the guarded apply")
}

// TestModifyCost: modify and modify -n print each version's new chunks and the total;
// -n estimates the file's growth (within 15% of what the rewrite then measures on a file
// of 200,000 mappings) and changes nothing; the rewrite prints the file's size before and
// after as stat measures it, and the old storage compact gives back, which compact then
// gives back at least. A rewrite past 100,000 chunks in a version is refused in one line
// naming the limit and --force, dry or not, the file untouched; --force rewrites it.
func TestModifyCost(t *testing.T) {
	rechunk := "testdata/fixtures/modify/golden_modify_rechunk_2d-before.h5"
	// wide has one version of 110,000 elements: 1-element chunks make 110,000 a version.
	wide := func(t *testing.T) string {
		return makeVersioned(t, "--shape", "110000", "--chunks", "10000", "--dtype", "<i8")
	}
	chunkLine := "new chunks per version: v1 12, v2 12, v3 8, v4 12 (44 in total, at most 12 in one version; the limit is 100000 without --force)"
	for _, c := range []struct {
		name string
		file func(t *testing.T) string
		args []string // after FILE DATASET
		code int
		out  []string // lines stdout starts with, in order ("%s": the file, "%b": its size before)
		err  string   // what the one stderr line holds
		// changed: the rewrite goes through; compact then gives back what it said.
		changed bool
	}{
		{"dry run", func(t *testing.T) string { return fixture.Copy(t, rechunk) },
			[]string{"g/z", "--chunks", "5,3", "--compression", "gzip", "-n"}, 0, []string{
				"%s: would rewrite g/z in 4 versions (v1, v2, v3, v4): chunks (4, 5) -> (5, 3); compression none -> gzip=4; raw_data holds 13 chunk slots",
				chunkLine + "; about 29 raw_data slots",
				"estimate: the file (now %b) would grow by about ",
			}, "", false},
		{"rewrite", func(t *testing.T) string { return fixture.Copy(t, rechunk) },
			[]string{"g/z", "--chunks", "5,3", "--compression", "gzip"}, 0, []string{
				"%s: rewrote g/z in 4 versions: chunks (4, 5) -> (5, 3); compression none -> gzip=4; 13 -> 29 chunk slots, ",
				chunkLine,
				"%s %c; vh5fs compact would give back at least ",
			}, "", true},
		{"past the limit", wide,
			[]string{"data", "--chunks", "1"}, 1, nil,
			"%s: data: chunks (1,) make 110000 chunks in a version, past the limit of 100000 per version (h5py needs about 25 KiB of memory per chunk to open a version: 2.6 GiB here); --force rewrites anyway", false},
		{"past the limit, dry", wide,
			[]string{"data", "--chunks", "1", "-n"}, 1, []string{
				"%s: would rewrite data in 1 version (v0): chunks (10000,) -> (1,); raw_data holds 11 chunk slots",
				"new chunks per version: v0 110000 (110000 in total, at most 110000 in one version; the limit is 100000 without --force); about 110000 raw_data slots",
				"estimate: the file (now %b) would grow by about ",
			}, "past the limit of 100000 per version", false},
		{"past the limit, forced", wide,
			[]string{"data", "--chunks", "1", "--force"}, 0, []string{
				"%s: rewrote data in 1 version: chunks (10000,) -> (1,); 11 -> 110000 chunk slots, ",
				"new chunks per version: v0 110000 (110000 in total, at most 110000 in one version; the limit is 100000 without --force)",
				"%s %c; vh5fs compact would give back at least ",
			}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := c.file(t)
			st, err := os.Stat(file)
			require.NoError(t, err)
			sum := fileSum(t, file)
			stdout, stderr, code := vh5fsRun(t, append([]string{"modify", file}, c.args...)...)
			require.Equal(t, c.code, code, "stdout %s\nstderr %s", stdout, stderr)
			after, err := os.Stat(file)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if c.out == nil {
				require.Empty(t, stdout)
			} else {
				require.Len(t, lines, len(c.out), stdout)
			}
			for i, want := range c.out {
				want = strings.ReplaceAll(want, "%s", file)
				want = strings.ReplaceAll(want, "%b", sizeText(st.Size()))
				want = strings.ReplaceAll(want, "%c", sizePhrase(st.Size(), after.Size()))
				require.True(t, strings.HasPrefix(lines[i], want), "line %d\n%q\nwant prefix\n%q", i, lines[i], want)
			}
			if c.err == "" {
				require.Empty(t, stderr, "no progress or other noise when stderr is no terminal")
			} else {
				require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
				require.Contains(t, stderr, strings.ReplaceAll(c.err, "%s", file))
			}
			if !c.changed {
				require.Equal(t, sum, fileSum(t, file), "the file is untouched")
				return
			}
			require.NotEqual(t, sum, fileSum(t, file))
			// What compact gives back is at least the old storage modify measured.
			unused := parseSize(t, lines[2][strings.LastIndex(lines[2], "at least ")+len("at least "):])
			_, stderr, code = vh5fsRun(t, "compact", file)
			require.Equal(t, 0, code, stderr)
			compacted, err := os.Stat(file)
			require.NoError(t, err)
			require.GreaterOrEqual(t, after.Size()-compacted.Size(), unused,
				"compact gave back %d bytes, modify said at least %s", after.Size()-compacted.Size(), lines[2])
		})
	}

	// The estimate against the growth measured. Uncompressed: within 15%. Compressed (the
	// generator's values compress far better in large chunks), from a sample of new chunks
	// compressed: within 25%.
	for _, c := range []struct {
		name   string
		gen    []string
		chunks string
		total  string
	}{
		{"20 versions of 10,000 new chunks", []string{"--shape", "100000", "--chunks", "1000", "--versions", "20", "--dtype", "<i8"}, "10",
			"(200000 in total, at most 10000 in one version;"},
		{"gzip", []string{"--shape", "400,400", "--chunks", "100,100", "--dtype", "<i4", "--gzip"}, "10,10",
			"(1600 in total, at most 1600 in one version;"},
	} {
		t.Run("estimate "+c.name, func(t *testing.T) {
			file := makeVersioned(t, c.gen...)
			out, stderr, code := vh5fsRun(t, "modify", file, "data", "--chunks", c.chunks, "-n")
			require.Equal(t, 0, code, stderr)
			require.Contains(t, out, c.total)
			est := regexp.MustCompile(`would grow by about ([0-9.]+ \S+)( \(a sample of \d+ new chunks? stored in \d+% of their size; up to about [0-9.]+ \S+ stored whole\))?;`).FindStringSubmatch(out)
			require.NotNil(t, est, out)
			before, err := os.Stat(file)
			require.NoError(t, err)
			_, stderr, code = vh5fsRun(t, "modify", file, "data", "--chunks", c.chunks)
			require.Equal(t, 0, code, stderr)
			after, err := os.Stat(file)
			require.NoError(t, err)
			grew := after.Size() - before.Size()
			within := 0.15
			if est[2] != "" {
				within = 0.25
			}
			require.InDelta(t, float64(grew), float64(parseSize(t, est[1])), within*float64(grew),
				"estimated %s, grew by %d bytes", est[1], grew)
		})
	}
}

// fileSum is the SHA-256 of a file's bytes.
func fileSum(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

// sizeText is n as the commands print sizes: B, or KiB, MiB, GiB with one decimal.
func sizeText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < 3 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB", "TiB"}[i])
}

// sizePhrase is how the commands say a file's size changed.
func sizePhrase(before, after int64) string {
	switch {
	case after > before:
		return fmt.Sprintf("grew by %s (%s -> %s)", sizeText(after-before), sizeText(before), sizeText(after))
	case after < before:
		return fmt.Sprintf("shrank by %s (%s -> %s)", sizeText(before-after), sizeText(before), sizeText(after))
	}
	return fmt.Sprintf("kept its size (%s)", sizeText(before))
}

// parseSize reads a size sizeText printed at the start of s, rounded down to what its
// decimal can tell (a printed "1.2 KiB" is at least 1.15 KiB).
func parseSize(t *testing.T, s string) int64 {
	m := regexp.MustCompile(`^([0-9.]+) (B|KiB|MiB|GiB)`).FindStringSubmatch(s)
	require.NotNil(t, m, "no size in %q", s)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	unit := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[2]]
	if m[2] != "B" {
		v -= 0.05
	}
	return int64(v * unit)
}
