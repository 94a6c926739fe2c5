package lifecycle

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestDeleteGolden deletes each golden's versions from a copy of its before-file and
// compares the whole file with what versioned-hdf5's delete_versions made (conform.Files:
// versions, trees, data, mappings, hash rows, slots, data groups); for the golden with a
// commit on top, vh5fs then commits the same change and the new version must be the one
// versioned-hdf5 committed.
func TestDeleteGolden(t *testing.T) {
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	require.NotEmpty(t, dels)
	for _, d := range dels {
		t.Run(d.Name, func(t *testing.T) {
			// The comparison sees the deletion at all.
			require.Error(t, conform.Files(d.Before, d.After))
			file := fixture.Copy(t, d.Before)
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			p, err := Delete(f, d.Names)
			require.NoError(t, err)
			require.Equal(t, d.CurrentBefore, p.Current)
			require.Equal(t, d.CurrentAfter, p.NewCurrent)
			if d.Commit != nil {
				commitGolden(t, f, *d.Commit)
			}
			require.NoError(t, f.Close())
			var fresh []string
			if d.Commit != nil {
				fresh = append(fresh, d.Commit.NewVersion)
			}
			require.NoError(t, conform.Files(file, d.After, fresh...))
		})
	}
}

// commitGolden commits e's byte operations on its base version as a handle commits them,
// naming the version as versioned-hdf5 did.
func commitGolden(t *testing.T, f *versions.File, e fixture.Edit) {
	c, err := commit.Open(f, commit.Options{})
	require.NoError(t, err)
	defer c.Close()
	d, err := f.Dataset(versions.VersionsGroup + "/" + e.BaseVersion + "/" + e.Dataset)
	require.NoError(t, err)
	arr, err := commit.NewStaged(d)
	require.NoError(t, err)
	for _, op := range e.ByteOps {
		require.Equal(t, "pwrite", op.Op)
		b, err := op.Data()
		require.NoError(t, err)
		_, err = arr.WriteAt(b, op.Offset, d.ChunkSource())
		require.NoError(t, err)
	}
	require.NoError(t, c.SetNextName(e.NewVersion))
	_, err = c.Commit(commit.Change{Base: e.BaseVersion, Dataset: e.Dataset, Array: arr})
	require.NoError(t, err)
}

// h5pyDigests is tests/py/version_digests.py's listing of file: how h5py reads every
// committed version.
func h5pyDigests(t *testing.T, file string) string {
	out, err := exec.Command("/usr/bin/python3", "../tests/py/version_digests.py", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// TestDeleteReadByH5py: h5py reads every version of vh5fs's result as it reads
// versioned-hdf5's, and every kept version as it read it before the deletion (with its
// prev_version relinked).
func TestDeleteReadByH5py(t *testing.T) {
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("python3 with h5py not available")
	}
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	for _, d := range dels {
		if d.Commit != nil {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			file := fixture.Copy(t, d.Before)
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			p, err := Delete(f, d.Names)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			got := h5pyDigests(t, file)
			require.Equal(t, h5pyDigests(t, d.After), got)

			relinked := map[string]string{}
			for _, r := range p.Relinks {
				relinked[r.Version] = r.To
			}
			var want []string
			for _, line := range strings.Split(strings.TrimSpace(h5pyDigests(t, d.Before)), "\n") {
				fields := strings.Fields(line)
				switch {
				case fields[0] == "current":
					line = "current " + p.NewCurrent
				case slices.Contains(p.Delete, fields[0]):
					continue
				case relinked[fields[0]] != "":
					fields[1] = relinked[fields[0]]
					line = strings.Join(fields, " ")
				}
				want = append(want, line)
			}
			require.Equal(t, want, strings.Split(strings.TrimSpace(got), "\n"))
		})
	}
}

// libraryCommit opens file with versioned-hdf5, commits x[0:6] = 0..5 on top of its
// current version and prints version_digests.py's listing of every version after it.
const libraryCommit = `
import sys
import h5py, numpy as np
from datetime import datetime, timezone
from versioned_hdf5 import VersionedHDF5File
with h5py.File(sys.argv[1], "r+") as f:
    vf = VersionedHDF5File(f)
    with vf.stage_version("on_top", timestamp=datetime(2024, 3, 1, tzinfo=timezone.utc)) as sv:
        sv["x"][0:6] = np.arange(6)
    for v in vf.versions:
        for name in ("x", "g/y"):
            if name in vf[v]:
                vf[v][name][()]
`

// TestLibraryCommitsOnTop: versioned-hdf5 opens vh5fs's result, reads every version and
// commits on top of it, and the file it makes reads as the one it makes on top of its own
// deletion. Runs only where versioned-hdf5 is importable (PYTHONPATH); the goldens hold
// its results for every other run.
func TestLibraryCommitsOnTop(t *testing.T) {
	if out, err := exec.Command("/usr/bin/python3", "-c", "import versioned_hdf5").CombinedOutput(); err != nil {
		t.Skipf("versioned-hdf5 is not importable by /usr/bin/python3 (set PYTHONPATH to a build of it): %s", strings.TrimSpace(string(out)))
	}
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	for _, d := range dels {
		if d.Commit != nil {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			file := fixture.Copy(t, d.Before)
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			_, err = Delete(f, d.Names)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			theirs := fixture.Copy(t, d.After)
			for _, p := range []string{file, theirs} {
				out, err := exec.Command("/usr/bin/python3", "-c", libraryCommit, p).CombinedOutput()
				require.NoError(t, err, "%s", out)
			}
			require.Equal(t, h5pyDigests(t, theirs), h5pyDigests(t, file))
			require.NoError(t, conform.Files(file, theirs, "on_top"))
		})
	}
}

// TestDeleteRefuses: __first_version__, an unknown name, and a file open read-only are
// refused before anything is written.
func TestDeleteRefuses(t *testing.T) {
	src := filepath.Join(fixture.Dir(), "golden_delete_middle-before.h5")
	for _, tc := range []struct {
		name  string
		names []string
		want  error
	}{
		{"first version", []string{"v2", versions.FirstVersion}, ErrFirstVersion},
		{"unknown", []string{"v2", "nope"}, ErrNoVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, src)
			before, err := os.ReadFile(file)
			require.NoError(t, err)
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			_, err = Delete(f, tc.names)
			require.ErrorIs(t, err, tc.want)
			require.NoError(t, f.Close())
			after, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, before, after)
		})
	}
	f, err := versions.Open(src)
	require.NoError(t, err)
	defer f.Close()
	_, err = Delete(f, []string{"v2"})
	require.ErrorContains(t, err, "not open for writing")
}

// TestDeleteFailsWhole: a deletion that fails before its sync, after the body or after
// the whole publish was written, leaves the file as it was (no journal, every version as
// before), and the same deletion then succeeds once the file is opened again.
func TestDeleteFailsWhole(t *testing.T) {
	d := fixture.Delete{}
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	for _, x := range dels {
		if x.Name == "golden_delete_several" {
			d = x
		}
	}
	require.NotEmpty(t, d.Name)
	for _, point := range []string{"body", "publish"} {
		t.Run(point, func(t *testing.T) {
			file := fixture.Copy(t, d.Before)
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			injected := errors.New("injected failure")
			failAt = func(p string) error {
				if p == point {
					return injected
				}
				return nil
			}
			defer func() { failAt = func(string) error { return nil } }()
			_, err = Delete(f, d.Names)
			require.ErrorIs(t, err, injected)
			require.ErrorContains(t, err, "nothing deleted")
			f.Close() // the driver stopped: the close writes nothing
			failAt = func(string) error { return nil }
			_, err = os.Stat(file + h5.JournalSuffix)
			require.ErrorIs(t, err, os.ErrNotExist)
			require.NoError(t, conform.Files(file, d.Before))

			f, err = versions.OpenRW(file)
			require.NoError(t, err)
			_, err = Delete(f, d.Names)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, conform.Files(file, d.After))
		})
	}
}
