package staged

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSpillFilesRemoved: the spill file has no name (or loses it at once), its space is
// given back when the chunks are committed, and a named one a crash left is removed when
// the next store opens.
func TestSpillFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	h5 := filepath.Join(dir, "f.h5")
	stale := filepath.Join(dir, ".f.h5.123"+spillSuffix)
	require.NoError(t, os.WriteFile(stale, []byte("x"), 0o600))
	st := OpenStore(h5, 0)
	defer st.Close()
	_, err := os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist)

	a, err := New([]int64{4096}, []int64{512}, 8, make([]byte, 8))
	require.NoError(t, err)
	a.UseStore(st)
	for off := int64(0); off < a.Size(); off += 4096 {
		_, err := a.WriteAt(bytes.Repeat([]byte{7}, 4096), off, nil)
		require.NoError(t, err)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "no spill file is visible")
	st.mu.Lock()
	size, _ := st.file.Seek(0, 2)
	st.mu.Unlock()
	require.Greater(t, size, int64(0), "chunks were spilled")
	// A commit re-points every chunk and marks the array clean.
	require.NoError(t, a.Each(func(g []int64, slab int32, off int64) error { return a.MapFull(g) }))
	a.MarkClean()
	st.mu.Lock()
	size, _ = st.file.Seek(0, 2)
	st.mu.Unlock()
	require.Zero(t, size, "the spill file is emptied once nothing is staged")
	require.Zero(t, st.Resident())
}

// TestDiscard: a discarded array gives its staged chunks' memory and spill slots back.
func TestDiscard(t *testing.T) {
	st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), 2*4096)
	defer st.Close()
	a, err := New([]int64{4096}, []int64{512}, 8, make([]byte, 8))
	require.NoError(t, err)
	a.UseStore(st)
	for off := int64(0); off < a.Size(); off += 4096 {
		_, err = a.WriteAt(bytes.Repeat([]byte{3}, 4096), off, nil)
		require.NoError(t, err)
	}
	st.mu.Lock()
	used := st.used
	st.mu.Unlock()
	require.Positive(t, used, "chunks beyond the budget spilled")
	require.Positive(t, st.Resident())
	a.Discard()
	require.Zero(t, st.Resident())
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Zero(t, st.used)
}

// TestReleaseSpilled: a commit that wrote a spilled chunk gives up its spill copy at once
// (its pages are freed); reading it again fails instead of returning other bytes, and
// re-pointing it and marking the array clean empties the spill file as before.
func TestReleaseSpilled(t *testing.T) {
	st := OpenStore(filepath.Join(t.TempDir(), "f.h5"), 0)
	defer st.Close()
	const chunk = 64 << 10
	a, err := New([]int64{8 * chunk / 8}, []int64{chunk / 8}, 8, make([]byte, 8))
	require.NoError(t, err)
	a.UseStore(st)
	for i := range 8 {
		_, err := a.WriteAt(bytes.Repeat([]byte{byte(i + 1)}, chunk), int64(i)*chunk, nil)
		require.NoError(t, err)
	}
	blocks := func() int64 {
		st.mu.Lock()
		defer st.mu.Unlock()
		var s unix.Stat_t
		require.NoError(t, unix.Fstat(int(st.file.Fd()), &s))
		return s.Blocks
	}
	before := blocks()
	scs := stagedChunks(t, a)
	require.Len(t, scs, 8)
	for _, sc := range scs[:4] {
		require.Nil(t, sc.Data, "spilled")
		a.ReleaseSpilled(sc)
		a.ReleaseSpilled(sc) // twice is once
	}
	if after := blocks(); before > 0 && after >= before {
		t.Logf("no hole punched (%d blocks before, %d after): the filesystem keeps them", before, after)
	}
	_, err = a.StagedData(scs[0], nil)
	require.Error(t, err, "a released chunk is not read back")
	_, err = a.ReadAt(make([]byte, 8), 0, nil)
	require.Error(t, err)
	data, err := a.StagedData(scs[5], nil)
	require.NoError(t, err, "the others are intact")
	require.Equal(t, bytes.Repeat([]byte{6}, chunk), data)
	require.NoError(t, a.Each(func(g []int64, slab int32, off int64) error { return a.MapFull(g) }))
	a.MarkClean()
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Zero(t, st.used)
	size, _ := st.file.Seek(0, 2)
	require.Zero(t, size)
}
