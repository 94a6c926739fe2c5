package commit

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestGolden applies each golden edit through the engine (no FUSE) and compares the new
// version with the one versioned-hdf5 committed, committed as a handle commits (Commit)
// and as a stage commits (CommitTree, mode "tree").
func TestGolden(t *testing.T) {
	edits, err := fixture.Edits()
	require.NoError(t, err)
	require.NotEmpty(t, edits)
	for _, e := range edits {
		for _, mode := range []string{"", "store", "sink", "tree"} {
			t.Run(e.Name+"/"+mode, func(t *testing.T) { golden(t, e, mode) })
		}
	}
}

// golden applies edit e and compares; in mode "store", the chunks are staged as a mount
// stages them: hashed and encoded when written, spilled beyond a budget of two chunks;
// in mode "sink", evicted to their raw_data slots ahead of the commit where they can be.
func golden(t *testing.T, e fixture.Edit, mode string) {
	file := fixture.Copy(t, e.Before)
	from, err := conform.Largest(file, e.BaseVersion, e.Dataset)
	require.NoError(t, err)

	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	d, err := f.Dataset(versions.VersionsGroup + "/" + e.BaseVersion + "/" + e.Dataset)
	require.NoError(t, err)
	if d.Strings {
		goldenStrings(t, e, mode, f, d, from)
		return
	}
	arr, err := NewStaged(d)
	require.NoError(t, err)
	c, err := Open(f, Options{StageMem: 2 * int64(arr.ChunkBytes())})
	require.NoError(t, err)
	defer c.Close()
	if mode == "store" || mode == "sink" {
		arr, err = c.NewArray(d, mode == "sink")
		require.NoError(t, err)
	}
	rowBytes := d.Size() / max(1, d.Shape[0])
	for _, op := range e.ByteOps {
		switch op.Op {
		case "pwrite":
			b, err := op.Data()
			require.NoError(t, err)
			_, err = arr.WriteAt(b, op.Offset, d.ChunkSource())
			require.NoError(t, err)
		case "truncate":
			shape := arr.Shape()
			shape[0] = op.Size / rowBytes
			require.NoError(t, arr.Resize(shape, d.ChunkSource()))
		}
	}
	var res Result
	if mode == "tree" { // the golden files hold the one dataset
		res, err = c.CommitTree(Tree{Base: e.BaseVersion, Name: "golden", Entries: []Entry{{Path: e.Dataset, FromBase: true, Array: arr}}})
	} else {
		require.NoError(t, c.SetNextName("golden"))
		res, err = c.Commit(Change{Base: e.BaseVersion, Dataset: e.Dataset, Array: arr})
	}
	require.NoError(t, err)
	require.Equal(t, "golden", res.Name)
	require.False(t, arr.Dirty())
	c.Close()
	require.NoError(t, f.Close())

	got, err := conform.Read(file, "golden", e.Dataset, from)
	require.NoError(t, err)
	want, err := conform.Read(e.After, e.NewVersion, e.Dataset, from)
	require.NoError(t, err)
	require.Empty(t, conform.Diff(got, want))
}

// goldenStrings applies edit e to the text of d, a string dataset, and commits its values
// whole (Strings) as a handle and as a stage do; staged arrays have no part in it.
func goldenStrings(t *testing.T, e fixture.Edit, mode string, f *versions.File, d *versions.Dataset, from int64) {
	if mode == "store" || mode == "sink" {
		require.NoError(t, f.Close())
		t.Skip("string datasets are not staged in arrays")
	}
	text := make([]byte, d.Size())
	_, err := d.ReadAt(text, 0)
	require.NoError(t, err)
	for _, op := range e.ByteOps {
		switch op.Op {
		case "pwrite":
			b, err := op.Data()
			require.NoError(t, err)
			text = append(text[:min(int64(len(text)), op.Offset)], b...)
		case "truncate":
			text = text[:op.Size]
		}
	}
	var vals []string
	for _, l := range bytes.SplitAfter(text, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var v string
		require.NoError(t, json.Unmarshal(l, &v))
		vals = append(vals, v)
	}
	shape := slices.Clone(d.Shape)
	shape[0] = int64(len(vals)) / max(1, chunkplan.Elements(shape[1:]))
	s := &Strings{Shape: shape, Values: vals}
	c, err := Open(f, Options{})
	require.NoError(t, err)
	defer c.Close()
	if mode == "tree" {
		_, err = c.CommitTree(Tree{Base: e.BaseVersion, Name: "golden", Entries: []Entry{{Path: e.Dataset, FromBase: true, Strings: s}}})
	} else {
		require.NoError(t, c.SetNextName("golden"))
		_, err = c.Commit(Change{Base: e.BaseVersion, Dataset: e.Dataset, Strings: s})
	}
	require.NoError(t, err)
	c.Close()
	require.NoError(t, f.Close())
	got, err := conform.Read(f.Path(), "golden", e.Dataset, from)
	require.NoError(t, err)
	want, err := conform.Read(e.After, e.NewVersion, e.Dataset, from)
	require.NoError(t, err)
	require.Empty(t, conform.Diff(got, want))
}

// TestCarriesTree: a commit that changes one dataset of a nested file makes a version that
// holds the base's whole tree — every other dataset byte-identical, every group with its
// attributes — while the base's root-group attributes are not carried (versioned-hdf5's
// rule).
func TestCarriesTree(t *testing.T) {
	file := fixture.Copy(t, fixture.Dir()+"/nested.h5")
	f, c := openCommitter(t, file, Options{})
	base, err := f.CurrentVersion()
	require.NoError(t, err)
	d, err := f.Dataset(versions.VersionsGroup + "/" + base + "/sensors/north/flags")
	require.NoError(t, err)
	arr, err := NewStaged(d)
	require.NoError(t, err)
	_, err = arr.WriteAt([]byte{1, 1, 1}, 0, d.ChunkSource())
	require.NoError(t, err)
	res, err := c.Commit(Change{Base: base, Dataset: "sensors/north/flags", Array: arr})
	require.NoError(t, err)

	var walk func(rel string)
	walk = func(rel string) {
		entries, err := f.List(versions.VersionsGroup + "/" + base + rel)
		require.NoError(t, err)
		got, err := f.List(versions.VersionsGroup + "/" + res.Name + rel)
		require.NoError(t, err)
		require.Equal(t, entries, got, "members of %q", rel)
		for _, e := range entries {
			p := rel + "/" + e.Name
			if e.IsGroup {
				a, err := f.HDF5().Attrs(versions.VersionsGroup + "/" + base + p)
				require.NoError(t, err)
				b, err := f.HDF5().Attrs(versions.VersionsGroup + "/" + res.Name + p)
				require.NoError(t, err)
				require.Equal(t, a, b, "attributes of group %s", p)
				walk(p)
				continue
			}
			if p == "/sensors/north/flags" {
				continue
			}
			read := func(v string) []byte {
				d, err := f.Dataset(versions.VersionsGroup + "/" + v + p)
				require.NoError(t, err)
				b := make([]byte, d.Size())
				_, err = d.ReadAt(b, 0)
				require.NoError(t, err)
				return b
			}
			require.Equal(t, read(base), read(res.Name), "dataset %s", p)
		}
	}
	walk("")
	attrs, err := f.HDF5().Attrs(versions.VersionsGroup + "/" + res.Name)
	require.NoError(t, err)
	var names []string
	for _, a := range attrs {
		names = append(names, a.Name)
	}
	require.ElementsMatch(t, []string{"committed", "prev_version", "timestamp"}, names)
}

// TestCopiesMappingLists: a commit that changes one dataset carries a large unchanged one
// over with its mapping list as stored (h5's CopyVirtual): libhdf5 (h5py) reads the same
// mappings, attributes and data in both versions, and so does vh5fs after reopening.
func TestCopiesMappingLists(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.h5")
	out, err := exec.Command("/usr/bin/python3", "../tests/py/make_versioned.py", file,
		"--shape", "3000,5", "--chunks", "7,5", "--history", "2", "--log-everywhere").CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	c, err := Open(f, Options{})
	require.NoError(t, err)
	d, err := f.Dataset(versions.VersionsGroup + "/v0/log")
	require.NoError(t, err)
	arr, err := NewStaged(d)
	require.NoError(t, err)
	_, err = arr.WriteAt([]byte{7, 0, 0, 0, 0, 0, 0, 0}, 0, d.ChunkSource())
	require.NoError(t, err)
	res, err := c.Commit(Change{Base: "v0", Dataset: "log", Array: arr})
	require.NoError(t, err)
	c.Close()
	require.NoError(t, f.Close())

	out, err = exec.Command("/usr/bin/python3", "-c", `import h5py, numpy as np, sys
f = h5py.File(sys.argv[1], "r")
a, b = f["_version_data/versions/v0/data"], f["_version_data/versions/" + sys.argv[2] + "/data"]
assert b.is_virtual and len(b.virtual_sources()) == 429, len(b.virtual_sources())
for x, y in zip(a.virtual_sources(), b.virtual_sources()):
    assert x.vspace.get_select_bounds() == y.vspace.get_select_bounds()
    assert x.src_space.get_select_bounds() == y.src_space.get_select_bounds()
    assert (x.file_name, x.dset_name) == (y.file_name, y.dset_name)
assert dict(a.attrs) .keys() == dict(b.attrs).keys() and a.attrs["raw_data"] == b.attrs["raw_data"]
assert (a.attrs["chunks"] == b.attrs["chunks"]).all() and a.fillvalue == b.fillvalue
assert (a[...] == b[...]).all() and a[-1, -1] == 14999
assert f["_version_data/versions/" + sys.argv[2] + "/log"][0] == 7
`, file, res.Name).CombinedOutput()
	require.NoError(t, err, "%s", out)

	f, err = versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	read := func(v string) []byte {
		d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/data")
		require.NoError(t, err)
		b := make([]byte, d.Size())
		_, err = d.ReadAt(b, 0)
		require.NoError(t, err)
		return b
	}
	require.Equal(t, read("v0"), read(res.Name))
}

// openCommitter opens file read-write with a Committer on it, both closed when the test
// ends.
func openCommitter(t *testing.T, file string, o Options) (*versions.File, *Committer) {
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	c, err := Open(f, o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return f, c
}
