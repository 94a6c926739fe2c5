package staged

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDirtyAfterDroppedChunks: shrinking drops chunks that held data; growing back to the
// clean shape reads the fill value there from the full slab. The array must stay dirty, or
// the change is never committed (an ftruncate to 0 and back to the old size on one handle).
func TestDirtyAfterDroppedChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		write  bool  // stage chunk 2 before shrinking
		shrink int64 // elements kept
		dirty  bool
	}{
		{name: "base chunks dropped", shrink: 0, dirty: true},
		{name: "base chunks dropped, one kept", shrink: 2, dirty: true},
		{name: "staged chunk dropped", write: true, shrink: 4, dirty: true},
		{name: "only the edge re-materialised", shrink: 5, dirty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{raw: []byte{1, 2, 3, 4, 5, 6}, chunkBytes: 2, rows: 2, calls: map[int64]int{}}
			a, err := New([]int64{6}, []int64{2}, 1, []byte{0})
			require.NoError(t, err)
			for k := int64(0); k < 3; k++ {
				require.NoError(t, a.MapBase([]int64{k}, 2*k))
			}
			if tc.write {
				_, err := a.WriteAt([]byte{7}, 4, src)
				require.NoError(t, err)
			}
			require.NoError(t, a.Resize([]int64{tc.shrink}, src))
			require.NoError(t, a.Resize([]int64{6}, src))
			require.Equal(t, tc.dirty, a.Dirty())
			got := make([]byte, 6)
			_, err = a.ReadAt(got, 0, src)
			require.NoError(t, err)
			want := []byte{1, 2, 3, 4, 5, 6}
			clear(want[tc.shrink:])
			require.Equal(t, want, got)
			a.MarkClean()
			require.Equal(t, a.nStaged > 0, a.Dirty(), "MarkClean forgets dropped chunks")
		})
	}
	// Dropping chunks that only read as the fill value changes nothing.
	a, err := New([]int64{6}, []int64{2}, 1, []byte{0})
	require.NoError(t, err)
	require.NoError(t, a.Resize([]int64{0}, nil))
	require.NoError(t, a.Resize([]int64{6}, nil))
	require.False(t, a.Dirty())
}
