package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// h5pySpec prints, per version named, the dataset temp's dtype, shape, chunks (its
// chunks attribute, as versioned-hdf5 reads them), fill value, raw_data and that
// dataset's compression, compression_opts and shuffle, the names of its attributes, and
// a digest of its data, as h5py reads them.
const h5pySpec = `
import sys, hashlib, h5py
f = h5py.File(sys.argv[1], "r")
for v in sys.argv[2:]:
    d = f["_version_data/versions"][v]["temp"]
    raw = f[d.attrs["raw_data"]]
    print(d.dtype.str, d.shape, tuple(d.attrs["chunks"]), d.fillvalue, d.attrs["raw_data"], raw.compression,
          raw.compression_opts, raw.shuffle, sorted(d.attrs), hashlib.sha256(d[()].tobytes()).hexdigest(), sep="|")
`

// TestStageRecreate: a dataset removed in a stage and created again — by touch, cp,
// open(O_CREAT), or touch and user.vh5fs.create with the identical spec — takes the
// dtype, chunks, fill value and filters that its path's data group fixes, and the
// committed version's dataset is what versioned-hdf5 writes for it: h5py reads the
// written data, with the old version's spec.
func TestStageRecreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string, data []byte)
	}{
		{"touch then write", func(t *testing.T, path string, data []byte) {
			run(t, "touch", path)
			require.NoError(t, os.WriteFile(path, data, 0o644))
		}},
		{"cp", func(t *testing.T, path string, data []byte) {
			src := filepath.Join(t.TempDir(), "temp.bin")
			require.NoError(t, os.WriteFile(src, data, 0o644))
			run(t, "cp", src, path)
		}},
		{"open O_CREAT", func(t *testing.T, path string, data []byte) {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
			require.NoError(t, err)
			_, err = f.Write(data)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		{"setfattr with the identical spec", func(t *testing.T, path string, data []byte) {
			run(t, "touch", path)
			run(t, "setfattr", "-n", "user.vh5fs.create", "-v",
				`{"dtype": "<f8", "shape": [0, 37], "chunks": [8, 10], "fillvalue": 0.5, "compression": "gzip", "compression_opts": 4, "shuffle": true}`, path)
			require.NoError(t, os.WriteFile(path, data, 0o644))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
			m := mount(t, file, "rw")
			dir := filepath.Join(m.Dir, "stage", "s")
			require.NoError(t, os.Mkdir(dir, 0o755))
			path := filepath.Join(dir, "temp")
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Len(t, data, 45*37*8)
			data[8] ^= 0x40 // element 1 differs from r5's

			require.NoError(t, os.Remove(path))
			require.NotContains(t, readDirNames(t, dir), "temp")
			tc.make(t, path, data)
			for name, want := range map[string]string{"user.vh5fs.dtype": "<f8", "user.vh5fs.shape": "[45,37]",
				"user.vh5fs.chunks": "[8,10]", "user.vh5fs.fillvalue": "0.5"} {
				got, err := xattr.Get(path, name)
				require.NoError(t, err, name)
				require.Equal(t, want, string(got), name)
			}
			require.NoError(t, os.Rename(dir, filepath.Join(m.Dir, "versions", "s")))
			got, err := os.ReadFile(filepath.Join(m.Dir, "versions", "s", "temp"))
			require.NoError(t, err)
			require.Equal(t, data, got)
			m.unmount(t)
			require.NotContains(t, m.stderr.String(), "level=WARN", "nothing was refused")
			checkFile(t, file)

			out, err := exec.Command(python(t), "-c", h5pySpec, file, "r5", "s").CombinedOutput()
			require.NoError(t, err, "%s", out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			require.Len(t, lines, 2)
			old, recreated := strings.Split(lines[0], "|"), strings.Split(lines[1], "|")
			require.Equal(t, []string{"<f8", "(45, 37)", "(8, 10)", "0.5", "/_version_data/temp/raw_data", "gzip", "4", "True"}, old[:8])
			require.Equal(t, old[:8], recreated[:8], "the new version's dataset has the old one's spec")
			require.Equal(t, "['chunks', 'long_name', 'raw_data']", old[8])
			require.Equal(t, "['chunks', 'raw_data']", recreated[8], "a dataset created again starts without the old one's attributes, as in versioned-hdf5")
			require.NotEqual(t, old[9], recreated[9], "its data is what was written")
			out, err = exec.Command(python(t), "-c", `
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
a = f["_version_data/versions/s/temp"][()]
b = np.fromfile(sys.argv[2], dtype="<f8").reshape(45, 37)
assert np.array_equal(a, b, equal_nan=True), "h5py reads what was written"
print(f["_version_data/versions/s"].attrs["prev_version"])`, file, writeTemp(t, data)).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Equal(t, "r5", strings.TrimSpace(string(out)))
		})
	}
}

// writeTemp writes b to a new temporary file and returns its path.
func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "data.bin")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// TestStageRecreateConflict: a user.vh5fs.create that conflicts with what the path's data
// group fixes is EINVAL, and the log line names the stage path, each conflict with fill
// values as values (NaN, not its bytes) and the whole spec to give.
func TestStageRecreateConflict(t *testing.T) {
	file := makeVersioned(t, "--shape", "20,6", "--chunks", "8,6", "--fillvalue", "NaN")
	m := mount(t, file, "rw")
	dir := filepath.Join(m.Dir, "stage", "s")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "data")
	require.NoError(t, os.Remove(path))
	run(t, "touch", path)
	fill, err := xattr.Get(path, "user.vh5fs.fillvalue")
	require.NoError(t, err)
	require.Equal(t, `"NaN"`, string(fill))
	for _, c := range []struct {
		spec string
		ok   bool
	}{
		{`{"fillvalue": 0}`, false},
		{`{"dtype": "<f4", "chunks": [4, 6]}`, false},
		{`{"compression": "gzip"}`, false},
		{`{"dtype": "<f8", "chunks": [8, 6], "fillvalue": "NaN"}`, true},
	} {
		err := xattr.Set(path, "user.vh5fs.create", []byte(c.spec))
		if c.ok {
			require.NoError(t, err, c.spec)
		} else {
			require.ErrorIs(t, err, syscall.EINVAL, c.spec)
		}
	}
	m.unmount(t)
	log := m.stderr.String()
	const give = `give {\"dtype\":\"<f8\",\"shape\":[0,6],\"chunks\":[8,6],\"fillvalue\":\"NaN\",\"compression\":null,\"shuffle\":false}, or leave those fields out`
	for _, want := range []string{
		`msg="stage: refused" op="setfattr user.vh5fs.create" path=stage/s/data errno="invalid argument" err="data: user.vh5fs.create: an earlier dataset of this path fixed its dtype, chunks, fill value and filters (versioned-hdf5 keeps them per path): fillvalue 0 (the path's is NaN); ` + give,
		`: dtype <f4 (the path's is <f8), chunks [4 6] (the path's is [8 6]); ` + give,
		`: filters gzip 4 (the path's is none); ` + give,
	} {
		require.Contains(t, log, want)
	}
	require.NotContains(t, log, "000000000000f87f", "fill values are shown as values")
}

// TestRefusalLogLines: changes inside a version answer EROFS, changes of versions/ itself
// EPERM, each with a log line naming the path as the user gave it, relative to the mount,
// and advice that fits the change.
func TestRefusalLogLines(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	v := filepath.Join(m.Dir, "versions", "r1")
	ds := filepath.Join(v, "temp")
	cases := []struct {
		name  string
		do    func() error
		errno syscall.Errno
		want  string // the log line, from msg on
	}{
		{"mv a dataset", func() error { return os.Rename(ds, filepath.Join(v, "t2")) }, syscall.EROFS,
			`msg="refused: versions are snapshots: nothing in them changes: nothing in them is renamed (in versioned-hdf5 a dataset at a new path is a new dataset); make changes in a stage: mkdir MNT/stage/NAME, cp MNT/stage/NAME/OLD MNT/stage/NAME/NEW and rm MNT/stage/NAME/OLD, then commit it as one version: mv MNT/stage/NAME MNT/versions/" op=rename path=versions/r1/temp`},
		{"mv a version out of versions/", func() error { return os.Rename(v, filepath.Join(m.Dir, "stage", "r9")) }, syscall.EPERM,
			`msg="refused: a version is renamed only within versions/ (mv MNT/versions/OLD MNT/versions/NEW); a stage is committed under the name it is given: mv MNT/stage/NAME MNT/versions/VERSION" op=rename path=versions/r1`},
		{"mkdir in versions", func() error { return os.Mkdir(filepath.Join(m.Dir, "versions", "new"), 0o755) }, syscall.EPERM,
			`msg="refused: a new version is made by committing a stage, not by mkdir in versions/; make changes in a stage: mkdir MNT/stage/NAME, change MNT/stage/NAME/..., then commit it as one version: mv MNT/stage/NAME MNT/versions/" op=mkdir path=versions/new`},
		{"mkdir in a version", func() error { return os.Mkdir(filepath.Join(v, "g"), 0o755) }, syscall.EROFS,
			`msg="refused: versions are snapshots: nothing in them changes: no new groups in them; make changes in a stage: mkdir MNT/stage/NAME, mkdir MNT/stage/NAME/PATH, then commit it as one version: mv MNT/stage/NAME MNT/versions/" op=mkdir path=versions/r1/g`},
		// ln -f over an existing name links to a temporary name first: the line names
		// the target and the directory instead.
		{"ln", func() error {
			return exec.Command("ln", "-f", ds, filepath.Join(m.Dir, "versions", "r2", "temp")).Run()
		}, syscall.EROFS,
			`msg="refused: versions hold only groups and datasets, no links; make changes in a stage: mkdir MNT/stage/NAME, cp a dataset to MNT/stage/NAME/PATH, then commit it as one version: mv MNT/stage/NAME MNT/versions/" op=link dir=versions/r2 target=versions/r1/temp`},
		{"chmod", func() error { return os.Chmod(ds, 0o600) }, syscall.EROFS,
			`msg="refused: modes, owners and times are fixed (the mount's uid=, gid= and umask= options set them)" op=setattr path=versions/r1/temp`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			require.Error(t, err)
			if _, isExit := err.(*exec.ExitError); !isExit {
				require.ErrorIs(t, err, c.errno)
			}
		})
	}
	m.unmount(t)
	log := m.stderr.String()
	for _, c := range cases {
		require.Contains(t, log, "level=WARN "+c.want+"\n", c.name)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "refused") {
			require.NotContains(t, line, "_version_data", "paths as the user gave them")
			require.NotContains(t, line, "write a dataset's bytes")
		}
	}
}

// TestHelpAndOptionErrors: --help lists every option and command form the man page has;
// an unknown mount option and -o rw of a plain HDF5 file are refused with one line that
// names no Go package, and the file is not touched.
func TestHelpAndOptionErrors(t *testing.T) {
	out, _, code := vh5fsRun(t, "--help")
	require.Equal(t, 0, code)
	for _, want := range []string{"stage_mem=SIZE", "vh5fs ls --stages FILE", "vh5fs diff [-v] FILE V1 V2",
		"vh5fs fsck [--repair [--discard-journal]] FILE", "vh5fs refs FILE [VERSION] [--at TIME]"} {
		require.Contains(t, out, want)
	}

	plain := filepath.Join(t.TempDir(), "plain.h5")
	b, err := os.ReadFile("testdata/extra/plain.h5")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(plain, b, 0o644))
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown option", []string{"mount", "-o", "ro,bogus", plain, t.TempDir()}, 2, `vh5fs: unknown mount option "bogus"` + "\n"},
		{"bad option value", []string{"mount", "-o", "stage_mem=lots", plain, t.TempDir()}, 2, `vh5fs: mount option "stage_mem": `},
		{"plain file rw", []string{"mount", "-o", "rw", plain, t.TempDir()}, 1,
			"vh5fs: " + plain + ": not a versioned-hdf5 file (no _version_data): only versioned-hdf5 files mount read-write; a plain HDF5 file mounts read-only (-o ro)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := vh5fsRun(t, c.args...)
			require.Equal(t, c.code, code, stderr)
			require.True(t, strings.HasPrefix(stderr, c.want), stderr)
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			require.NotContains(t, stderr, "mountopts")
			require.NotContains(t, stderr, "commit:")
		})
	}
	after, err := os.ReadFile(plain)
	require.NoError(t, err)
	require.Equal(t, b, after, "the plain file is untouched")
}
