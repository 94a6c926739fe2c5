package versions

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestDatasetBudget: reading every version of many_versions with a budget of a few chunk
// maps keeps no more than that cached, and a dataset dropped and loaded again reads the
// same bytes.
func TestDatasetBudget(t *testing.T) {
	f, err := Open(filepath.Join(fixture.Dir(), "many_versions.h5"))
	require.NoError(t, err)
	defer f.Close()
	vs, err := f.Versions()
	require.NoError(t, err)
	require.Len(t, vs, 300)
	f.mu.Lock()
	f.mapped.limit = 5 * 64 // five versions' chunk maps (4096 elements, chunks of 64)
	f.mu.Unlock()
	read := func(v Version) []byte {
		d, err := f.Dataset(v.Path() + "/counts")
		require.NoError(t, err)
		require.True(t, droppable(d), "a chunk-map dataset")
		b := make([]byte, d.Size())
		_, err = d.ReadAt(b, 0)
		require.NoError(t, err)
		return b
	}
	first := read(vs[0])
	for _, v := range vs {
		read(v)
		f.mu.Lock()
		require.LessOrEqual(t, f.mapped.chunks, f.mapped.limit)
		require.LessOrEqual(t, len(f.datasets), 5)
		f.mu.Unlock()
	}
	f.mu.Lock()
	_, cached := f.datasets[vs[0].Path()+"/counts"]
	f.mu.Unlock()
	require.False(t, cached, "the least recently used was dropped")
	require.True(t, bytes.Equal(first, read(vs[0])), "loaded again, it reads the same")
}
