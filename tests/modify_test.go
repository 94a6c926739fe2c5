package tests

import (
	"fmt"
	"os"
	"os/exec"
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
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), v
    cur = f["_version_data/versions"].attrs["current_version"]
    if name in f["_version_data/versions"][cur]:
        with vf.stage_version("by_library") as g:
            d = g[name]
            d[(0,) * d.ndim] = 42
        assert vf["by_library"][name][(0,) * d.ndim] == 42
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
		{[]string{"g/nope", "--chunks", "4,4"}, 1, "no version holds a dataset g/nope"},
	} {
		_, stderr, code := vh5fsRun(t, append([]string{"modify", file}, c.args...)...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
	}
	strs := fixture.Copy(t, "testdata/fixtures/strings.h5")
	_, stderr, code := vh5fsRun(t, "modify", strs, "names", "--chunks", "2")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "variable-length strings")

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
	require.Equal(t, file+": would rewrite g/z in 4 versions (v1, v2, v3, v4): chunks (4, 5) -> (5, 3); compression none -> gzip=4; raw_data holds 13 chunk slots\n", out)
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
