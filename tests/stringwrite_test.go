package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// Writes of variable-length string datasets through their text (issue 50, item 1). The
// commits themselves are checked against versioned-hdf5's in TestGoldenThroughMount
// (golden_strings_*); these check the file's behaviour around them.

// textLines is the text form of vals: one JSON string per line.
func textLines(vals ...string) string {
	var b strings.Builder
	for _, v := range vals {
		j, _ := json.Marshal(v)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// h5pyStrings reads a version's string dataset with h5py, through its virtual dataset.
func h5pyStrings(t *testing.T, file, version, dataset string) []string {
	t.Helper()
	out, err := exec.Command(python(t), "-c", `import sys, json, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f["_version_data/versions"][sys.argv[2]][sys.argv[3]]
    print(json.dumps([v.decode() if isinstance(v, bytes) else v for v in d[...].ravel().tolist()]))
`, file, version, dataset).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var vals []string
	require.NoError(t, json.Unmarshal(out, &vals), "%s", out)
	return vals
}

// TestStringWrites: a string dataset's file takes its text form in current/, a version's
// directory and a branch; what it commits h5py reads; text that is not one JSON string
// per line, or values its dataset cannot hold, are EINVAL with the line in the log, and
// nothing is committed.
func TestStringWrites(t *testing.T) {
	utf := filepath.Join(fixture.Dir(), "golden_strings_change-before.h5")  // v1, v2: s, 10 UTF-8 strings
	ascii := filepath.Join(fixture.Dir(), "golden_strings_ascii-before.h5") // v1: s, 5 ASCII strings
	refused := []struct {
		name, fixture, text, logged string
	}{
		{"not JSON", utf, textLines("a") + "b\n", `line=2 reason="not one JSON string`},
		{"a number", utf, textLines("a") + "7\n", `line=2 reason="not one JSON string`},
		{"no final newline", utf, textLines("a") + `"b"`, `line=2 reason="no newline at the end`},
		{"a NUL", utf, textLines("a", "b\x00c"), `line=2 reason="holds a NUL character`},
		{"not ASCII", ascii, textLines("AAPL", "MSFT", "NVDÄ"), `line=3 reason="not ASCII`},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			file := copyPath(t, tc.fixture)
			m := mount(t, file, "rw")
			before := currentVersion(t, m.Dir)
			p := filepath.Join(m.Dir, "current", "s")
			want, err := os.ReadFile(p)
			require.NoError(t, err)
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
			require.NoError(t, err)
			_, err = f.WriteString(tc.text)
			require.NoError(t, err, "writes are taken; the text is parsed at fsync and close")
			require.ErrorIs(t, f.Sync(), syscall.EINVAL)
			require.ErrorIs(t, f.Close(), syscall.EINVAL)
			m.logged(t, `refused: a string dataset's file holds one JSON string per line.* `+tc.logged)
			require.Equal(t, before, currentVersion(t, m.Dir), "nothing committed")
			got, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
			m.unmount(t)
			checkFile(t, file)
		})
	}

	t.Run("replace, append, a version and a branch", func(t *testing.T) {
		file := copyPath(t, utf)
		m := mount(t, file, "rw")
		s := filepath.Join(m.Dir, "current", "s")
		st, err := os.Stat(s)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "a string dataset's file is writable")

		// Replaced whole, as a shell's > does: shrinks to three values.
		require.NoError(t, os.WriteFile(s, []byte(textLines("x", "ÿ", "")), 0))
		v3 := currentVersion(t, m.Dir)
		require.NotEqual(t, "v2", v3)
		got, err := os.ReadFile(s)
		require.NoError(t, err)
		require.Equal(t, textLines("x", "ÿ", ""), string(got))

		// Whole lines appended grow axis 0.
		f, err := os.OpenFile(s, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.WriteString(textLines("tail ✓"))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		v4 := currentVersion(t, m.Dir)
		require.NotEqual(t, v3, v4)
		buf := make([]byte, 64)
		n, err := unix.Getxattr(filepath.Join(m.Dir, "versions", v4, "s"), "user.vh5fs.shape", buf)
		require.NoError(t, err)
		require.Equal(t, "[4]", string(buf[:n]))

		// A write in an older version's directory commits on it (prev_version v1).
		require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "versions", "v1", "s"), []byte(textLines("old line")), 0))
		v5 := currentVersion(t, m.Dir)
		require.NotEqual(t, v4, v5)
		n, err = unix.Getxattr(filepath.Join(m.Dir, "versions", v5), "user.vh5fs.prev_version", buf)
		require.NoError(t, err)
		require.Equal(t, "v1", string(buf[:n]))

		// A branch: its head moves, current does not.
		require.NoError(t, os.Mkdir(filepath.Join(m.Dir, "branches", "dev"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(m.Dir, "branches", "dev", "s"), []byte(textLines("on dev")), 0))
		require.Equal(t, v5, currentVersion(t, m.Dir))
		dev, err := os.ReadFile(filepath.Join(m.Dir, "branches", "dev", "s"))
		require.NoError(t, err)
		require.Equal(t, textLines("on dev"), string(dev))
		m.unmount(t)

		checkFile(t, file)
		require.Equal(t, []string{"x", "ÿ", ""}, h5pyStrings(t, file, v3, "s"))
		require.Equal(t, []string{"x", "ÿ", "", "tail ✓"}, h5pyStrings(t, file, v4, "s"))
		require.Equal(t, []string{"old line"}, h5pyStrings(t, file, v5, "s"))
		stdout, stderr, code := vh5fsRun(t, "log", file, "--all")
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "dev")
	})
}

// TestStringStage (issue 50, item 2): a stage creates string datasets (user.vh5fs.create
// with dtype "O", UTF-8 or "encoding": "ascii") and changes a base one through its text;
// the stage, saved by fsync, survives a remount; its commit is one version h5py reads,
// with string data groups as h5py's string_dtype makes them. Text that is not its values
// fails the commit (EINVAL) and the stage stays.
func TestStringStage(t *testing.T) {
	file := copyPath(t, filepath.Join(fixture.Dir(), "golden_strings_change-before.h5"))
	m := mount(t, file, "rw")
	st := filepath.Join(m.Dir, "stage", "names")
	require.NoError(t, os.Mkdir(st, 0o755))
	for _, c := range []struct{ name, spec, text string }{
		{"tickers", `{"dtype": "O", "encoding": "ascii", "chunks": [2]}`, textLines("AAPL", "MSFT", "NVDA")},
		{"grid", `{"dtype": "O", "shape": [0, 2], "chunks": [2, 2]}`, textLines("a", "b", "ç", "d")},
	} {
		p := filepath.Join(st, c.name)
		require.NoError(t, os.WriteFile(p, nil, 0o644))
		require.NoError(t, unix.Setxattr(p, "user.vh5fs.create", []byte(c.spec), 0))
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString(c.text)
		require.NoError(t, err)
		require.NoError(t, f.Sync(), "fsync saves the stage")
		require.NoError(t, f.Close())
	}
	require.NoError(t, os.WriteFile(filepath.Join(st, "s"), []byte(textLines("one", "two")), 0))
	// An ASCII dataset refuses other text at the commit, which leaves the stage as it was.
	bad := filepath.Join(st, "tickers")
	require.NoError(t, os.WriteFile(bad, []byte(textLines("ÄPL")), 0))
	require.ErrorIs(t, os.Rename(st, filepath.Join(m.Dir, "versions", "named")), syscall.EINVAL)
	m.logged(t, `tickers: string dataset: line 1: not ASCII`)
	require.NoError(t, os.WriteFile(bad, []byte(textLines("AAPL", "MSFT", "NVDA")), 0))
	f, err := os.OpenFile(bad, os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	m.unmount(t)

	m = mount(t, file, "rw")
	st = filepath.Join(m.Dir, "stage", "names")
	got, err := os.ReadFile(filepath.Join(st, "grid"))
	require.NoError(t, err)
	require.Equal(t, textLines("a", "b", "ç", "d"), string(got), "the saved stage came back")
	require.NoError(t, os.Rename(st, filepath.Join(m.Dir, "versions", "named")))
	require.Equal(t, "named", currentVersion(t, m.Dir))
	m.unmount(t)

	checkFile(t, file)
	require.Equal(t, []string{"AAPL", "MSFT", "NVDA"}, h5pyStrings(t, file, "named", "tickers"))
	require.Equal(t, []string{"a", "b", "ç", "d"}, h5pyStrings(t, file, "named", "grid"))
	require.Equal(t, []string{"one", "two"}, h5pyStrings(t, file, "named", "s"))
	out, err := exec.Command(python(t), "-c", `import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    for n in ("tickers", "grid"):
        r = f["_version_data"][n]["raw_data"]
        v = f["_version_data/versions/named"][n]
        print(n, h5py.check_string_dtype(r.dtype).encoding, r.chunks, v.shape, h5py.check_string_dtype(v.dtype).encoding)
`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "tickers ascii (2,) (3,) ascii\ngrid utf-8 (2, 2) (2, 2) utf-8\n", string(out))
}

// TestStringStageGolden: string datasets created in a stage beside a string dataset
// replaced whole make the version versioned-hdf5's stage_version makes of the same
// create_dataset calls and assignment (golden_stage_strings, make_string_writes.py):
// the same data groups, hash rows, slots, mappings and attributes.
func TestStringStageGolden(t *testing.T) {
	dir := fixture.Dir()
	file := copyPath(t, filepath.Join(dir, "golden_stage_strings-before.h5"))
	m := mount(t, file, "rw")
	st := filepath.Join(m.Dir, "stage", "golden")
	require.NoError(t, os.Mkdir(st, 0o755))
	for _, c := range []struct{ name, spec, text string }{
		{"tickers", `{"dtype": "O", "encoding": "ascii", "chunks": [2]}`, textLines("AAPL", "MSFT", "NVDA")},
		{"grid", `{"dtype": "O", "shape": [0, 2], "chunks": [2, 2]}`, textLines("a", "b", "ç", "d", "e", "")},
		{"s", "", textLines("one", "two", "alpha")},
	} {
		p := filepath.Join(st, c.name)
		if c.spec != "" {
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			require.NoError(t, unix.Setxattr(p, "user.vh5fs.create", []byte(c.spec), 0))
		}
		require.NoError(t, os.WriteFile(p, []byte(c.text), 0o644))
	}
	require.NoError(t, os.Rename(st, filepath.Join(m.Dir, "versions", "golden")))
	m.unmount(t)
	require.NoError(t, conform.Files(file, filepath.Join(dir, "golden_stage_strings-after.h5"), "golden"))
	checkFile(t, file)
}

// TestStringWriteFollowsHead: a string file opened in current/ commits on top of whatever
// is current at its commit when that still holds the string dataset as its base did
// (another handle committed x meanwhile): one line of versions, not a sibling.
func TestStringWriteFollowsHead(t *testing.T) {
	file := copyPath(t, filepath.Join(fixture.Dir(), "golden_delete_strings_middle-before.h5")) // s4: names, tags, x
	m := mount(t, file, "rw")
	names, err := os.OpenFile(filepath.Join(m.Dir, "current", "names"), os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	x, err := os.OpenFile(filepath.Join(m.Dir, "current", "x"), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = x.WriteAt(make([]byte, 8), 0)
	require.NoError(t, err)
	require.NoError(t, x.Close())
	afterX := currentVersion(t, m.Dir)
	require.NotEqual(t, "s4", afterX)
	_, err = names.WriteString(textLines("only"))
	require.NoError(t, err)
	require.NoError(t, names.Close())
	last := currentVersion(t, m.Dir)
	require.NotEqual(t, afterX, last)
	buf := make([]byte, 64)
	n, err := unix.Getxattr(filepath.Join(m.Dir, "versions", last), "user.vh5fs.prev_version", buf)
	require.NoError(t, err)
	require.Equal(t, afterX, string(buf[:n]), "the string commit follows the head")
	require.NotContains(t, m.stderr.String(), "committed a sibling")
	m.unmount(t)
	checkFile(t, file)
	require.Equal(t, []string{"only"}, h5pyStrings(t, file, last, "names"))
}
