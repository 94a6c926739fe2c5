package tests

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// datasetSHA is the sha256 of a file's bytes, hex, as the fixtures' manifests give it.
func datasetSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestRenameVersion: mv versions/OLD versions/NEW renames a version as a snapshot
// directory is renamed: its data, the prev_version of its child and current_version
// follow; taken names, busy versions and moves out of versions/ are refused.
func TestRenameVersion(t *testing.T) {
	man, err := fixture.Load(fixturePath("grid_2d_gzip.json"))
	require.NoError(t, err)
	want := map[string]string{}
	for _, v := range man.Versions {
		want[v.Name] = *v.Datasets["temp"].SHA256
	}
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	vdir := func(v string) string { return filepath.Join(m.Dir, "versions", v) }

	require.Equal(t, want["r3"], datasetSHA(t, filepath.Join(vdir("r3"), "temp")), "read before: cached")
	require.NoError(t, os.Rename(vdir("r3"), vdir("mid")))
	require.Equal(t, want["r3"], datasetSHA(t, filepath.Join(vdir("mid"), "temp")))
	_, err = os.Stat(vdir("r3"))
	require.ErrorIs(t, err, syscall.ENOENT)
	ents, err := os.ReadDir(filepath.Join(m.Dir, "versions"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"mid", "r1", "r2", "r4", "r5"}, names)

	// The current version: current follows it.
	require.NoError(t, os.Rename(vdir("r5"), vdir("top")))
	got, err := os.Readlink(filepath.Join(m.Dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "versions/top", got)

	require.ErrorIs(t, os.Rename(vdir("r1"), vdir("r2")), syscall.EEXIST)
	require.ErrorIs(t, os.Rename(vdir("r1"), filepath.Join(m.Dir, "stage", "r1")), syscall.EPERM)

	// Busy: an open write handle's base, a stage's base.
	f, err := os.OpenFile(filepath.Join(vdir("r2"), "temp"), os.O_WRONLY, 0)
	require.NoError(t, err)
	require.ErrorIs(t, os.Rename(vdir("r2"), vdir("two")), syscall.EBUSY)
	require.NoError(t, f.Close())
	require.NoError(t, os.Rename(vdir("r2"), vdir("two")))
	require.NoError(t, os.Mkdir(filepath.Join(m.Dir, "stage", "s"), 0o755)) // based on top
	require.ErrorIs(t, os.Rename(vdir("top"), vdir("r5")), syscall.EBUSY)
	require.NoError(t, os.RemoveAll(filepath.Join(m.Dir, "stage", "s")))
	require.NoError(t, os.Rename(vdir("top"), vdir("r5")))

	m.unmount(t)
	require.Equal(t, []string{"r5", "mid", "two", "r1"}, versionAttrs(t, file, "r4", "mid", "two"),
		"current_version; r4's, mid's and two's prev_version")
	out, stderr, code := vh5fsRun(t, "log", file)
	require.Equal(t, 0, code, stderr)
	log := parseLog(t, out)
	var chain []string
	for _, e := range log {
		chain = append(chain, e.Name)
	}
	require.Equal(t, []string{"r5", "r4", "mid", "two", "r1"}, chain)
}

// TestDeleteThroughMount: with -o allow_delete, rmdir MNT/versions/X (the system call, and
// coreutils' rmdir) deletes the version as versioned-hdf5's delete_versions does (every
// delete golden without a commit on top, compared whole), although the directory has
// entries; current follows; a stage or a file open for writing makes it EBUSY, and
// __first_version__ cannot be named. Without the option rmdir is EPERM
// (TestSnapshotContract).
func TestDeleteThroughMount(t *testing.T) {
	goldens, err := fixture.Deletes()
	require.NoError(t, err)
	ran := 0
	for _, g := range goldens {
		if g.Commit != nil {
			continue
		}
		ran++
		t.Run(g.Name, func(t *testing.T) {
			file := fixture.Copy(t, g.Before)
			m := mount(t, file, "rw,allow_delete")
			for i, v := range g.Names {
				dir := filepath.Join(m.Dir, "versions", v)
				if i%2 == 0 {
					out, err := exec.Command("rmdir", dir).CombinedOutput()
					require.NoError(t, err, "rmdir: %s", out)
				} else {
					require.NoError(t, syscall.Rmdir(dir))
				}
				_, err := os.Stat(dir)
				require.ErrorIs(t, err, syscall.ENOENT)
			}
			cur, err := os.Readlink(filepath.Join(m.Dir, "current"))
			require.NoError(t, err)
			require.Equal(t, "versions/"+g.CurrentAfter, cur)
			m.unmount(t)
			require.NoError(t, conform.Files(file, g.After))
		})
	}
	require.Greater(t, ran, 3)

	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_middle-before.h5"))
	m := mount(t, file, "rw,allow_delete")
	v2 := filepath.Join(m.Dir, "versions", "v2")
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions", "v3", "x"), os.O_WRONLY, 0)
	require.NoError(t, err)
	require.ErrorIs(t, syscall.Rmdir(v2), syscall.EBUSY, "a file open for writing")
	require.NoError(t, f.Close())
	require.NoError(t, os.Mkdir(filepath.Join(m.Dir, "stage", "s"), 0o755))
	require.ErrorIs(t, syscall.Rmdir(v2), syscall.EBUSY, "a stage")
	require.NoError(t, os.RemoveAll(filepath.Join(m.Dir, "stage", "s")))
	require.ErrorIs(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "__first_version__")), syscall.ENOENT)
	m.unmount(t)
	require.Contains(t, versionDigests(t, file), "v2")
}

// TestReAddAfterDelete: a dataset a stage removed, whose every version is then deleted
// (its data group goes, as versioned-hdf5 drops it), is created again by a later stage with
// another dtype and shape: the path is free again. vh5fs log and diff follow the versions
// left, and h5py reads the new dataset.
func TestReAddAfterDelete(t *testing.T) {
	file := copyPath(t, fixturePath("golden_delete_middle-before.h5"))
	m := mount(t, file, "rw,allow_delete")
	p := func(parts ...string) string { return filepath.Join(append([]string{m.Dir}, parts...)...) }
	x := must(os.ReadFile(p("versions", "v4", "x")))

	require.NoError(t, os.Mkdir(p("stage", "gone"), 0o755))
	require.NoError(t, os.Remove(p("stage", "gone", "g", "y")))
	require.NoError(t, os.Rename(p("stage", "gone"), p("versions", "gone")))
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		require.NoError(t, syscall.Rmdir(p("versions", v)), v)
	}
	require.Equal(t, []string{"gone"}, readDirNames(t, p("versions")))

	require.NoError(t, os.Mkdir(p("stage", "back"), 0o755))
	y := p("stage", "back", "g", "y")
	require.NoError(t, os.WriteFile(y, nil, 0o644))
	require.NoError(t, exec.Command("setfattr", "-n", "user.vh5fs.create", "-v",
		`{"dtype":"<i4","shape":[0,3],"chunks":[4,3],"fillvalue":7}`, y).Run())
	data := make([]byte, 0, 24)
	for v := range int32(6) {
		data = binary.LittleEndian.AppendUint32(data, uint32(v+1))
	}
	require.NoError(t, os.WriteFile(y, data, 0o644))
	require.NoError(t, os.Rename(p("stage", "back"), p("versions", "back")))
	require.Equal(t, data, must(os.ReadFile(p("versions", "back", "g", "y"))))
	require.Equal(t, x, must(os.ReadFile(p("versions", "back", "x"))))
	m.unmount(t)

	out, stderr, code := vh5fsRun(t, "log", file)
	require.Equal(t, 0, code, stderr)
	var chain []string
	for _, e := range parseLog(t, out) {
		chain = append(chain, e.Name+"<"+e.Parent)
	}
	require.Equal(t, []string{"back<gone", "gone<__first_version__"}, chain)
	out, stderr, code = vh5fsRun(t, "diff", file, "gone", "back")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "g/y")
	got, err := exec.Command("/usr/bin/python3", "-c", `import sys, h5py
y = h5py.File(sys.argv[1], "r")["_version_data/versions/back/g/y"]
print(y.dtype, y.shape, y.fillvalue, y[()].ravel().tolist())`, file).CombinedOutput()
	require.NoError(t, err, "%s", got)
	require.Equal(t, "int32 (2, 3) 7 [1, 2, 3, 4, 5, 6]\n", string(got))
}
