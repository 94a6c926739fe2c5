package versions

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestFixtures reads every dataset of every version of every reference file and compares
// it with the manifest written by versioned-hdf5's own reader.
func TestFixtures(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	require.NotEmpty(t, manifests)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			f, err := Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			require.True(t, f.Versioned())
			require.Equal(t, m.DataVersion, f.DataVersion())

			cur, err := f.CurrentVersion()
			require.NoError(t, err)
			require.Equal(t, m.CurrentVersion, cur)

			vs, err := f.Versions()
			require.NoError(t, err)
			var names []string
			for _, v := range vs {
				names = append(names, v.Name)
			}
			require.Equal(t, m.VersionNames(), names)

			for _, mv := range m.Versions {
				v, ok, err := f.Version(mv.Name)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, mv.Timestamp, v.Timestamp)
				prev := mv.PrevVersion
				if prev == FirstVersion {
					prev = ""
				}
				require.Equal(t, prev, v.PrevVersion)
				require.False(t, v.Time().IsZero())

				require.Equal(t, sortedKeys(mv.Datasets), walkDatasets(t, f, v.Path(), ""), "datasets of %s", mv.Name)
				for p, md := range mv.Datasets {
					d, err := f.Dataset(v.Path() + "/" + p)
					require.NoError(t, err)
					require.Equal(t, md.Shape, d.Shape, p)
					require.Equal(t, md.Chunks, d.Chunks, p)
					buf := make([]byte, d.Size()+10)
					n, err := d.ReadAt(buf, 0)
					require.NoError(t, err)
					require.EqualValues(t, d.Size(), n)
					if md.IsString() {
						want, err := md.Text()
						require.NoError(t, err)
						require.Equal(t, string(want), string(buf[:n]), "%s/%s", mv.Name, p)
						continue
					}
					require.Equal(t, md.DType, d.DType(), p)
					require.Equal(t, md.NBytes, d.Size(), p)
					sum := sha256.Sum256(buf[:n])
					require.Equal(t, *md.SHA256, hex.EncodeToString(sum[:]), "%s/%s", mv.Name, p)
				}
			}
		})
	}
}

func walkDatasets(t *testing.T, f *File, path, prefix string) []string {
	entries, err := f.List(path)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.IsGroup {
			out = append(out, walkDatasets(t, f, path+"/"+e.Name, prefix+e.Name+"/")...)
		} else {
			out = append(out, prefix+e.Name)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("hello\n"), 0o644))
	_, err := Open(text)
	require.ErrorContains(t, err, "not an HDF5 file")
	_, err = Open(filepath.Join(dir, "missing.h5"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
