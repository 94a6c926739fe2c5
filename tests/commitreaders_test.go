package tests

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadersServedDuringCommit: while a large commit writes its chunks into the file,
// readers of another version (4 KiB reads, stat), stat of the file being committed and
// ls versions/ are answered, with the right bytes, rather than waiting for the commit.
//
// The commit must write the change itself: the first chunk is left partly written, which
// keeps the sink from taking any chunk ahead of it, and the budget holds the whole change.
func TestReadersServedDuringCommit(t *testing.T) {
	const size = 192 << 20
	file := makeFloats(t, t.TempDir(), size)
	m := mount(t, file, "rw,stage_mem=256M")

	other, err := os.Open(filepath.Join(m.Dir, "versions/v0/data"))
	require.NoError(t, err)
	defer other.Close()
	f, err := os.OpenFile(filepath.Join(m.Dir, "versions/v1/data"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for off := 0; off < size; off += len(buf) {
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], math.Float64bits(-float64(off+i)-0.5))
		}
		from := 0
		if off == 0 {
			from = 4096 // the first chunk partly written
		}
		_, err := f.WriteAt(buf[from:], int64(off+from))
		require.NoError(t, err)
	}
	st, err := os.Stat(file)
	require.NoError(t, err)
	before := st.Size()

	var done atomic.Bool
	syncErr := make(chan error, 1)
	go func() {
		syncErr <- f.Sync()
		done.Store(true)
	}()
	// A probe counts when it started and ended while the commit was writing: the file
	// has grown (its chunks are going in) and fsync has not returned.
	writing := func() bool {
		st, err := os.Stat(file)
		return err == nil && st.Size() > before && !done.Load()
	}
	got := make([]byte, 4096)
	var served int
	var worst, worstLs time.Duration
	for i := int64(0); !done.Load(); i++ {
		off := (i * 7919 % (size / 4096)) * 4096
		inWrite := writing()
		start := time.Now()
		_, err := other.ReadAt(got, off)
		require.NoError(t, err)
		want := make([]byte, 4096)
		for j := 0; j < len(want); j += 8 { // v0 holds each element's index
			binary.LittleEndian.PutUint64(want[j:], math.Float64bits(float64((off+int64(j))/8)))
		}
		require.True(t, bytes.Equal(want, got), "v0 at %d read during the commit", off)
		_, err = os.Stat(other.Name())
		require.NoError(t, err)
		fi, err := os.Stat(f.Name())
		require.NoError(t, err)
		require.Equal(t, int64(size), fi.Size(), "the committing file's size")
		lsStart := time.Now()
		_, err = os.ReadDir(filepath.Join(m.Dir, "versions"))
		require.NoError(t, err)
		worst = max(worst, time.Since(start))
		if inWrite {
			worstLs = max(worstLs, time.Since(lsStart))
		}
		if inWrite && writing() {
			served++
		}
	}
	require.NoError(t, <-syncErr)
	t.Logf("probes served while the commit wrote: %d; worst probe %v, worst ls during the writes %v", served, worst, worstLs)
	// Waiting for the commit leaves only the moment between its end and fsync's return
	// (a few probes); being served through it, hundreds.
	require.GreaterOrEqual(t, served, 30, "readers are served while the commit writes")
}
