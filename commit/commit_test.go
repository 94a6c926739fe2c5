package commit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestGolden applies each golden edit through the engine (no FUSE) and compares the new
// version with the one versioned-hdf5 committed.
func TestGolden(t *testing.T) {
	edits, err := fixture.Edits()
	require.NoError(t, err)
	require.NotEmpty(t, edits)
	for _, e := range edits {
		t.Run(e.Name, func(t *testing.T) {
			file := fixture.Copy(t, e.Before)
			from, err := conform.Largest(file, e.BaseVersion, e.Dataset)
			require.NoError(t, err)

			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			c, err := New(f)
			require.NoError(t, err)
			d, err := f.Dataset(versions.VersionsGroup + "/" + e.BaseVersion + "/" + e.Dataset)
			require.NoError(t, err)
			arr, err := d.NewStaged()
			require.NoError(t, err)
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
			require.NoError(t, c.SetNextName("golden"))
			res, err := c.Commit(Change{Base: e.BaseVersion, Dataset: e.Dataset, Array: arr})
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
		})
	}
}

// TestCarriesTree: a commit that changes one dataset of a nested file makes a version that
// holds the base's whole tree — every other dataset byte-identical, every group with its
// attributes — while the base's root-group attributes are not carried (versioned-hdf5's
// rule).
func TestCarriesTree(t *testing.T) {
	file := fixture.Copy(t, fixture.Dir()+"/nested.h5")
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	defer f.Close()
	c, err := New(f)
	require.NoError(t, err)
	defer c.Close()
	base, err := f.CurrentVersion()
	require.NoError(t, err)
	d, err := f.Dataset(versions.VersionsGroup + "/" + base + "/sensors/north/flags")
	require.NoError(t, err)
	arr, err := d.NewStaged()
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
