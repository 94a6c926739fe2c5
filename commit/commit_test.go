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
