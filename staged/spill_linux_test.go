package staged

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSpillFull: a spill file on a full disk fails the write that needs room with ENOSPC
// and changes nothing: every write accepted before it reads back and commits as written.
func TestSpillFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("needs root to mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, 0) })
	const chunk = 64 << 10
	a, err := New([]int64{64 << 10}, []int64{chunk / 8}, 8, make([]byte, 8))
	require.NoError(t, err)
	st := OpenStore(filepath.Join(dir, "f.h5"), 2*chunk)
	t.Cleanup(func() { st.Close() })
	a.UseStore(st)
	want := make([]byte, a.Size())
	var werr error
	last := -1 // the last chunk written: still in memory
	for i := 0; i < 32 && werr == nil; i++ {
		p := bytes.Repeat([]byte{byte(i + 1)}, chunk)
		if _, werr = a.WriteAt(p, int64(i)*chunk, nil); werr == nil {
			copy(want[i*chunk:], p)
			last = i
		}
	}
	require.Greater(t, last, 2, "chunks beyond the budget were spilled before the disk filled")
	require.ErrorIs(t, werr, syscall.ENOSPC, "the disk of the spill file fills up")
	got := make([]byte, a.Size())
	_, err = a.ReadAt(got, 0, nil)
	require.NoError(t, err)
	require.Equal(t, want, got, "accepted writes intact after the failed one")
	for _, sc := range stagedChunks(t, a) {
		data, err := a.StagedData(sc, nil)
		require.NoError(t, err)
		off := sc.Grid[0] * chunk
		require.Equal(t, want[off:off+chunk], data)
	}
	// Rewriting a chunk in memory needs no room: it still works.
	p := bytes.Repeat([]byte{0xEE}, 100)
	_, err = a.WriteAt(p, int64(last)*chunk, nil)
	require.NoError(t, err)
	copy(want[last*chunk:], p)
	_, err = a.ReadAt(got, 0, nil)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
