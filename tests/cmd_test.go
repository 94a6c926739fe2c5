package tests

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// vh5fsRun runs the binary and returns stdout, stderr and the exit status.
func vh5fsRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(vh5fsBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v", err)
		code = exit.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

func fixturePath(name string) string { return filepath.Join("testdata", "fixtures", name) }

// logEntry is one version of `vh5fs log` output.
type logEntry struct {
	Name, Timestamp, Parent string
	Changes                 []string
}

func parseLog(t *testing.T, out string) []logEntry {
	var entries []logEntry
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		var e logEntry
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "version "):
				e.Name = strings.TrimSuffix(strings.TrimPrefix(line, "version "), " (current)")
			case strings.HasPrefix(line, "timestamp: "):
				e.Timestamp = strings.TrimSpace(strings.TrimPrefix(line, "timestamp:"))
			case strings.HasPrefix(line, "parent: "):
				e.Parent = strings.TrimSpace(strings.TrimPrefix(line, "parent:"))
			case strings.HasPrefix(line, "    "):
				e.Changes = append(e.Changes, strings.TrimSpace(line))
			default:
				t.Fatalf("unexpected log line %q", line)
			}
		}
		entries = append(entries, e)
	}
	return entries
}

// TestCmdLog: `vh5fs log` lists the history newest first with the manifest's parents and
// timestamps, from the current version, a named one, or the one current at a time.
func TestCmdLog(t *testing.T) {
	for _, name := range []string{"basic_1d", "grid_2d_gzip", "nested", "sparse", "strings", "many_versions"} {
		t.Run(name, func(t *testing.T) {
			m, err := fixture.Load(fixturePath(name + ".json"))
			require.NoError(t, err)
			byName := map[string]fixture.Version{}
			for _, v := range m.Versions {
				byName[v.Name] = v
			}
			out, stderr, code := vh5fsRun(t, "log", m.H5)
			require.Equal(t, 0, code, stderr)
			got := parseLog(t, out)
			require.Len(t, got, len(m.Versions))
			want := m.CurrentVersion
			for _, e := range got {
				require.Equal(t, want, e.Name)
				mv := byName[e.Name]
				require.Equal(t, mv.Timestamp, e.Timestamp)
				require.Equal(t, mv.PrevVersion, e.Parent)
				require.NotEmpty(t, e.Changes)
				want = mv.PrevVersion
			}
			require.Equal(t, "__first_version__", want)
			require.True(t, strings.HasPrefix(out, "version "+m.CurrentVersion+" (current)\n"), out)
		})
	}

	for _, tc := range []struct {
		name  string
		args  []string
		names []string
	}{
		{"named version", []string{"log", fixturePath("basic_1d.h5"), "v2"}, []string{"v2", "v1"}},
		{"at between", []string{"log", fixturePath("basic_1d.h5"), "--at", "2024-01-01 02:30:00"}, []string{"v3", "v2", "v1"}},
		{"at exact", []string{"log", "--at", "2024-01-01 01:00:00.000000+0000", fixturePath("basic_1d.h5")}, []string{"v2", "v1"}},
		{"at with zone", []string{"log", fixturePath("basic_1d.h5"), "--at=2024-01-01T02:30:00+02:00"}, []string{"v1"}},
		{"limit", []string{"log", "-n", "2", fixturePath("basic_1d.h5")}, []string{"v4", "v3"}},
		{"limit beyond", []string{"log", fixturePath("basic_1d.h5"), "-n=9", "v2"}, []string{"v2", "v1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, tc.args...)
			require.Equal(t, 0, code, stderr)
			var names []string
			for _, e := range parseLog(t, out) {
				names = append(names, e.Name)
			}
			require.Equal(t, tc.names, names)
		})
	}

	out, _, code := vh5fsRun(t, "log", "--oneline", "-n", "3", fixturePath("basic_1d.h5"))
	require.Equal(t, 0, code)
	require.Equal(t, "v4  2024-01-01 03:00:00.000000+0000  1 changed (current)\n"+
		"v3  2024-01-01 02:00:00.000000+0000  1 changed\n"+
		"v2  2024-01-01 01:00:00.000000+0000  1 changed\n", out)

	out, _, code = vh5fsRun(t, "log", fixturePath("nested.h5"))
	require.Equal(t, 0, code)
	got := parseLog(t, out)
	require.Equal(t, []string{"M phase", "D top"}, got[0].Changes, "dropped vs added")
	require.Equal(t, []string{"M sensors/north/cube", "A sensors/south/level"}, got[1].Changes, "added vs base")
	require.Equal(t, []string{"A phase", "A sensors/north/cube", "A sensors/north/flags", "A top"}, got[2].Changes)
}

func TestCmdLs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", fixturePath("basic_1d.h5")}, "x <i8 [6]\n"},
		{[]string{"ls", fixturePath("basic_1d.h5"), "v3"}, "x <i8 [13]\n"},
		{[]string{"ls", fixturePath("basic_1d.h5"), "--at", "2024-01-01 00:59:59"}, "x <i8 [10]\n"},
		{[]string{"ls", fixturePath("grid_2d_gzip.h5"), "r4"}, "temp <f8 [61,37]\n"},
		{[]string{"ls", fixturePath("strings.h5")}, "codes |S8 [5]\nnames vlen-str [8]\n"},
		{[]string{"ls", fixturePath("nested.h5"), "added"}, "phase <c16 [9]\nsensors/north/cube |u1 [6,7,8]\n" +
			"sensors/north/flags |b1 [30]\nsensors/south/level <f4 [25]\ntop <i4 [20]\n"},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, tc.args...)
			require.Equal(t, 0, code, stderr)
			var norm []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				norm = append(norm, strings.Join(strings.Fields(line), " "))
			}
			require.Equal(t, tc.want, strings.Join(norm, "\n")+"\n")
		})
	}
}

// infoFields parses "key: value" lines (tabwriter-aligned).
func infoFields(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && !strings.HasPrefix(line, " ") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func TestCmdInfo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"info", fixturePath("basic_1d.h5")}, map[string]string{
			"data_version": "4", "current version": "v4", "versions": "4", "datasets": "1"}},
		{[]string{"info", fixturePath("many_versions.h5")}, map[string]string{
			"current version": "v0299", "versions": "300", "datasets": "1"}},
		{[]string{"info", fixturePath("basic_1d.h5") + ":v2"}, map[string]string{
			"version": "v2", "timestamp": "2024-01-01 01:00:00.000000+0000", "parent": "v1", "datasets": "1"}},
		{[]string{"info", fixturePath("basic_1d.h5") + ":v4/x"}, map[string]string{
			"dtype": "<i8", "shape": "[6]", "chunks": "[4]", "filters": "none", "fill value": "-1",
			"chunks stored": "2 of 2", "shared with parent": "1 of 2 (parent v3)"}},
		{[]string{"info", fixturePath("basic_1d.h5") + ":v1/x"}, map[string]string{
			"shape": "[10]", "chunks stored": "3 of 3", "shared with parent": "0 (parent __first_version__)"}},
		{[]string{"info", "--at", "2024-01-01 01:30:00", fixturePath("basic_1d.h5") + ":x"}, map[string]string{
			"version": "v2", "shape": "[10]", "shared with parent": "2 of 3 (parent v1)"}},
		{[]string{"info", fixturePath("grid_2d_gzip.h5") + ":r4/temp"}, map[string]string{
			"dtype": "<f8", "shape": "[61,37]", "chunks": "[8,10]", "filters": "shuffle, gzip level 4",
			"fill value": "0.5", "chunks stored": "28 of 32"}},
		{[]string{"info", fixturePath("sparse.h5") + ":empty/s"}, map[string]string{
			"fill value": "7", "chunks stored": "0 of 10"}},
		{[]string{"info", "testdata/extra/plain.h5"}, map[string]string{"versioned": "no (plain HDF5)"}},
	} {
		t.Run(strings.Join(tc.args[1:], " "), func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, tc.args...)
			require.Equal(t, 0, code, stderr)
			got := infoFields(out)
			for k, v := range tc.want {
				require.Equal(t, v, got[k], "%s in\n%s", k, out)
			}
		})
	}
}

// diffChunks runs `vh5fs diff -v` and returns, per dataset, its summary line (with the
// chunk count line after " | ") and the "(grid) [range] kind" of each differing chunk.
func diffChunks(t *testing.T, args ...string) map[string][]string {
	out, stderr, code := vh5fsRun(t, append([]string{"diff", "-v"}, args...)...)
	require.Equal(t, 0, code, stderr)
	res := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "  chunk ") {
			res[cur] = append(res[cur], strings.TrimPrefix(line, "  chunk "))
			continue
		}
		if strings.HasPrefix(line, "  ") {
			res[cur][0] += " | " + strings.TrimSpace(line)
			continue
		}
		name, rest, ok := strings.Cut(line, ": ")
		require.True(t, ok, line)
		cur = name
		res[cur] = []string{rest}
	}
	return res
}

// TestCmdDiff: basic_1d's chunk diffs follow from its manifest values (chunks of 4):
// v1 [0..9] -> v2 changes elements 4:8; v3 grows to 13 (-1 fill); v4 is [0,1,2,3,40,555].
func TestCmdDiff(t *testing.T) {
	f := fixturePath("basic_1d.h5")
	for _, tc := range []struct {
		v1, v2 string
		want   []string
	}{
		{"v1", "v2", []string{"(1) [4:8] modified"}},
		{"v2", "v3", []string{"(2) [8:12] modified", "(3) [12:13] added"}},
		{"v3", "v4", []string{"(1) [4:6] modified", "(2) [8:12] removed", "(3) [12:13] removed"}},
		{"v1", "v4", []string{"(1) [4:6] modified", "(2) [8:10] removed"}},
	} {
		t.Run(tc.v1+"-"+tc.v2, func(t *testing.T) {
			got := diffChunks(t, f, tc.v1, tc.v2)
			require.Len(t, got, 1)
			require.Equal(t, tc.want, got["x"][1:])
			require.Contains(t, got["x"][0], fmt.Sprintf("| %d of ", len(tc.want)))
		})
	}
	got := diffChunks(t, f, "v2", "v2", "x")
	require.Equal(t, []string{"unchanged, shape [10]"}, got["x"])

	// The golden edit set rows 8:16 of every column: chunk row 1 of the 8x10 grid.
	got = diffChunks(t, fixturePath("golden_full_chunks_gzip-after.h5"), "r5", "golden", "temp")
	require.Equal(t, []string{"(1,0) [8:16, 0:10] modified", "(1,1) [8:16, 10:20] modified",
		"(1,2) [8:16, 20:30] modified", "(1,3) [8:16, 30:37] modified"}, got["temp"][1:])
	// Rewriting a chunk with the bytes it had: versioned-hdf5 reused the slot.
	got = diffChunks(t, fixturePath("golden_dedup_existing-after.h5"), "v4", "golden")
	require.True(t, strings.HasPrefix(got["x"][0], "unchanged"), got["x"][0])

	got = diffChunks(t, fixturePath("nested.h5"), "base", "dropped")
	require.Equal(t, "added, shape [25]", got["sensors/south/level"][0])
	require.Equal(t, "removed, shape [20]", got["top"][0])
	require.True(t, strings.HasPrefix(got["sensors/north/flags"][0], "unchanged"))
}

// TestCmdDiffGrid checks grid_2d_gzip's chunk diffs against h5py reading each version's
// virtual dataset and comparing every chunk box.
func TestCmdDiffGrid(t *testing.T) {
	file := fixturePath("grid_2d_gzip.h5")
	script := `
import sys, json, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
vs = [v for v in f["_version_data/versions"] if v != "__first_version__"]
out = {}
for a in vs:
    for b in vs:
        x, y = f["_version_data/versions/%s/temp" % a][()], f["_version_data/versions/%s/temp" % b][()]
        res = []
        for i in range(0, max(x.shape[0], y.shape[0]), 8):
            for j in range(0, 37, 10):
                ca, cb = x[i:i+8, j:j+10], y[i:i+8, j:j+10]
                ext = "[%d:%d, %d:%d]" % (i, i + (cb.shape[0] or ca.shape[0]), j, j + cb.shape[1])
                g = "(%d,%d) " % (i // 8, j // 10)
                if ca.shape[0] == 0:
                    res.append(g + ext + " added")
                elif cb.shape[0] == 0:
                    res.append(g + ext + " removed")
                elif ca.shape != cb.shape or not np.array_equal(ca, cb):
                    res.append(g + ext + " modified")
        out[a + " " + b] = res
print(json.dumps(out))
`
	cmd := exec.Command(python(t), "-c", script, file)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	require.NoError(t, err)
	var want map[string][]string
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Len(t, want, 25)
	for pair, chunks := range want {
		v1, v2, _ := strings.Cut(pair, " ")
		got := diffChunks(t, file, v1, v2)
		if len(chunks) == 0 {
			require.True(t, strings.HasPrefix(got["temp"][0], "unchanged"), "%s: %v", pair, got)
			continue
		}
		require.Equal(t, chunks, got["temp"][1:], pair)
	}
}

func TestCmdFsck(t *testing.T) {
	out, stderr, code := vh5fsRun(t, "fsck", fixturePath("basic_1d.h5"))
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "ok: 4 versions checked\n", out)
	out, stderr, code = vh5fsRun(t, "fsck", fixturePath("grid_2d_gzip.h5"))
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "ok: 5 versions checked\n", out)

	// Damage a copy: overwrite the stored chunk [0, 1, 2, 3] (uncompressed <i8) in place.
	whole, err := os.ReadFile(fixturePath("basic_1d.h5"))
	require.NoError(t, err)
	var chunk, bad bytes.Buffer
	require.NoError(t, binary.Write(&chunk, binary.LittleEndian, []int64{0, 1, 2, 3}))
	require.NoError(t, binary.Write(&bad, binary.LittleEndian, []int64{0, 1, 2, 99}))
	require.Equal(t, 1, bytes.Count(whole, chunk.Bytes()))
	damaged := filepath.Join(t.TempDir(), "damaged.h5")
	require.NoError(t, os.WriteFile(damaged, bytes.Replace(whole, chunk.Bytes(), bad.Bytes(), 1), 0o644))
	out, stderr, code = vh5fsRun(t, "fsck", damaged)
	require.Equal(t, 1, code)
	require.Contains(t, out, "hash_table")
	require.Contains(t, out, "digest does not match")
	require.Regexp(t, regexp.MustCompile(`^vh5fs: .*damaged\.h5: \d+ problem\(s\) found\n$`), stderr)
}

// TestCmdErrors: one line "vh5fs: ..." naming the file and the problem; 1 for bad input,
// 2 for usage errors; -h and help print usage and exit 0.
func TestCmdErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("hello\n"), 0o644))
	good := fixturePath("basic_1d.h5")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing file", []string{"log", filepath.Join(dir, "nope.h5")}, 1, "nope.h5: no such file"},
		{"not hdf5", []string{"ls", text}, 1, "notes.txt: not an HDF5 file"},
		{"plain file", []string{"log", "testdata/extra/plain.h5"}, 1, "plain.h5: not a versioned-hdf5 file"},
		{"unknown version", []string{"ls", good, "v9"}, 1, `basic_1d.h5: no version "v9"`},
		{"unknown dataset", []string{"info", good + ":v1/y"}, 1, `basic_1d.h5: version v1 has no dataset "y"`},
		{"diff unknown dataset", []string{"diff", good, "v1", "v2", "y"}, 1, `basic_1d.h5: no dataset "y"`},
		{"too early", []string{"log", good, "--at", "2020-01-01"}, 1, "basic_1d.h5: no version at or before 2020-01-01 00:00:00.000000+0000"},
		{"bad time", []string{"ls", good, "--at", "noon"}, 2, `cannot read time "noon"`},
		{"data_version 3", []string{"info", "testdata/extra/data_version_3.h5"}, 1, "data_version_3.h5: unsupported data_version 3"},
		{"log usage", []string{"log"}, 2, "log: needs FILE"},
		{"log both", []string{"log", good, "v1", "--at", "2024-01-01"}, 2, "give VERSION or --at"},
		{"log negative limit", []string{"log", good, "-n", "-1"}, 2, "-n must not be negative"},
		{"log bad limit", []string{"log", good, "-n", "x"}, 2, `log: -n "x": not a whole number`},
		{"diff usage", []string{"diff", good, "v1"}, 2, "diff: needs FILE V1 V2"},
		{"bad flag", []string{"ls", "--bogus", good}, 2, "ls: flag provided but not defined: -bogus"},
		{"help unknown", []string{"help", "frob"}, 2, `unknown command "frob"`},
		{"fsck plain", []string{"fsck", "testdata/extra/plain.h5"}, 1, "plain.h5: not a versioned-hdf5 file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, tc.args...)
			require.Equal(t, tc.code, code, "stdout %q stderr %q", out, stderr)
			first, _, _ := strings.Cut(stderr, "\n")
			require.True(t, strings.HasPrefix(first, "vh5fs: "), stderr)
			require.Contains(t, first, tc.want)
			require.NotContains(t, stderr, "HDF5-DIAG")
		})
	}
	for _, args := range [][]string{{"help"}, {"help", "log"}, {"log", "-h"}, {"diff", "--help"}, {"info", "-h"}, {"help", "time"}} {
		out, stderr, code := vh5fsRun(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.NotEmpty(t, out)
	}
	out, _, _ := vh5fsRun(t, "help", "diff")
	require.True(t, strings.HasPrefix(out, "usage: vh5fs diff [-v] FILE V1 V2 [DATASET] [--json]"), out)
}

// TestCmdFsckProgress: on a terminal (script(1) gives fsck one) fsck draws a progress bar
// on stderr and erases it before its verdict; without a terminal there is none (above).
func TestCmdFsckProgress(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) not installed")
	}
	out, err := exec.Command("script", "-qec", vh5fsBin+" fsck "+fixturePath("many_versions.h5"), "/dev/null").CombinedOutput()
	require.NoError(t, err, "%s", out)
	s := string(out)
	require.Regexp(t, `\r\x1b\[Kfsck \[[#.]{30}\] \d+/\d+ versions`, s)
	require.Regexp(t, `\r\x1b\[Kfsck \[[#.]{30}\] \d+/\d+ /_version_data/\S+/hash_table`, s)
	require.Regexp(t, `\r\x1b\[Kok: \d+ versions checked\r\n$`, s, "the bar is erased before the verdict")
}

// TestCmdAttrChanges: versions that change only attributes, committed through a stage
// (setfattr on the stage's dataset and root, then mv into versions/), show in log (text,
// --oneline, --json, --all) and diff (text, one dataset, --json) with the object, the
// attribute, and its old and new values.
func TestCmdAttrChanges(t *testing.T) {
	file := copyPath(t, fixturePath("basic_1d.h5")) // v1..v4, x has units "m"
	m := mount(t, file, "rw")
	for _, s := range []struct {
		name string
		edit func(dir string) error
	}{
		{"a1", func(dir string) error {
			return errors.Join(xattr.Set(filepath.Join(dir, "x"), "user.hdf5.units", []byte(`"km"`)),
				xattr.Set(dir, "user.hdf5.author", []byte(`"ci"`)))
		}},
		// The root's author is set again: whether a stage's root keeps its base's
		// attributes is the stage's business, not this test's.
		{"a2", func(dir string) error {
			return errors.Join(xattr.Remove(filepath.Join(dir, "x"), "user.hdf5.units"),
				xattr.Set(dir, "user.hdf5.author", []byte(`"ci"`)))
		}},
	} {
		dir := filepath.Join(m.Dir, "stage", s.name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, s.edit(dir))
		require.NoError(t, os.Rename(dir, filepath.Join(m.Dir, "versions", s.name)))
	}
	m.unmount(t)

	for _, c := range []struct {
		name string
		args []string
		want []string // patterns of stdout's lines in order, but log's version, timestamp and parent
	}{
		{"log", []string{"log", file, "-n", "2"}, []string{
			`    attribute x units removed \(was "km"\)`,
			`    attribute / author added: "ci"`, `    attribute x units: "m" -> "km"`}},
		{"log --oneline", []string{"log", file, "--oneline", "-n", "2"}, []string{
			`a2  \S+ \S+  0 changed, 1 attribute changed \(current\)`,
			`a1  \S+ \S+  0 changed, 2 attributes changed`}},
		{"log --all", []string{"log", "--all", file, "-n", "3"}, []string{
			`\* a2  \S+ \S+  0 changed, 1 attribute changed \(current\)`,
			`\* a1  \S+ \S+  0 changed, 2 attributes changed`, `\* v4  \S+ \S+  1 changed`}},
		{"diff", []string{"diff", file, "v4", "a1"}, []string{
			`x: unchanged, shape \[6\]`, `/: attribute author added: "ci"`, `x: attribute units: "m" -> "km"`}},
		// The version's own group: v4 lacks a2's author, which versioned-hdf5 never
		// carries over, so it is not listed as removed.
		{"diff back", []string{"diff", file, "a2", "v4"}, []string{`x: unchanged, shape \[6\]`, `x: attribute units added: "m"`}},
		{"diff one dataset", []string{"diff", file, "a1", "a2", "x"}, []string{
			`x: unchanged, shape \[6\]`, `x: attribute units removed \(was "km"\)`}},
		{"diff of data", []string{"diff", file, "v3", "v4"}, []string{`x: 1 of 6 elements changed \(old 50, new 555\); shape \[13\] -> \[6\]`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, c.args...)
			require.Equal(t, 0, code, stderr)
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				if !regexp.MustCompile(`^(version|timestamp|parent)|^$`).MatchString(l) {
					got = append(got, l)
				}
			}
			require.Len(t, got, len(c.want), out)
			for i, w := range c.want {
				require.Regexp(t, "^"+w, got[i])
			}
		})
	}

	type attr struct {
		Path, Name, Change string
		Old, New           any
	}
	var d struct {
		From, To   string
		Datasets   []struct{ Path, Change string }
		Attributes []attr
	}
	out, stderr, code := vh5fsRun(t, "diff", file, "v4", "a1", "--json")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.Equal(t, "v4", d.From)
	require.Equal(t, "a1", d.To)
	require.Equal(t, []struct{ Path, Change string }{{"x", "unchanged"}}, d.Datasets)
	require.Equal(t, []attr{{"/", "author", "added", nil, "ci"}, {"x", "units", "modified", "m", "km"}}, d.Attributes)

	var l []struct {
		Version, Parent string
		Current         bool
		Datasets        []struct{ Path, Change string }
		Attributes      []attr
	}
	out, stderr, code = vh5fsRun(t, "log", file, "--json", "-n", "3")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal([]byte(out), &l), out)
	require.Len(t, l, 3)
	require.Equal(t, "a2", l[0].Version)
	require.True(t, l[0].Current)
	require.Equal(t, []attr{{"x", "units", "removed", "km", nil}}, l[0].Attributes)
	require.Equal(t, "a1", l[1].Version)
	require.Equal(t, "v4", l[1].Parent)
	require.Len(t, l[1].Attributes, 2)
	require.Equal(t, []struct{ Path, Change string }{{"x", "modified"}}, l[2].Datasets)
	require.Empty(t, l[2].Attributes)
}
