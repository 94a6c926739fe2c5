package h5

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The big change: a dataset of bigChunks chunks of chunkRows float64s each (512 KiB).
const (
	chunkRows = 65536
	bigChunks = 24
	bigPath   = "/_version_data/big/raw_data"
)

// pattern is the bytes of rows [from, to) of the big dataset in generation gen.
func pattern(gen, from, to int) []byte {
	b := make([]byte, 8*(to-from))
	for i := range to - from {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(gen)<<40|uint64(from+i))
	}
	return b
}

// bigBase is a copy of basic_1d.h5 with the big dataset added and synced (generation 1):
// every later write over its chunks is held.
func bigBase(t *testing.T) string {
	t.Helper()
	path := copyFixture(t, "basic_1d.h5")
	f, err := OpenRW(path)
	require.NoError(t, err)
	require.NoError(t, f.CreateDataGroup("/_version_data/big", DataSpec{DType: "<f8", Chunks: []int64{chunkRows}, Gzip: -1}))
	writeBig(t, f, 1, 0, bigChunks*chunkRows, bigChunks*chunkRows)
	require.NoError(t, f.FlushSync())
	require.NoError(t, f.Close())
	return path
}

// writeBig writes generation gen over rows [from, to) of the big dataset, grown to rows.
func writeBig(t *testing.T, f *File, gen, from, to, rows int) {
	t.Helper()
	ds, err := f.OpenDataset(bigPath)
	require.NoError(t, err)
	defer ds.Close()
	if ds.Info().Shape[0] < int64(rows) {
		require.NoError(t, ds.SetExtent([]int64{int64(rows)}))
	}
	n := int64(to - from)
	require.NoError(t, ds.WriteBox([]int64{int64(from)}, []int64{n}, []int64{n}, []int64{0}, pattern(gen, from, to)))
}

// copyTo copies the file at src into a new temporary directory.
func copyTo(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// limits is a journal driver's hold budget and step piece (0: the default).
type limits struct{ budget, piece int }

const defaultBudget = 32 << 20

// bigChange opens a copy of base and changes it in place: every chunk of the big dataset
// rewritten (generation 2, 12 MiB held over the durable state) as the body, then chunks 4 to
// 20 again (generation 3, 8 MiB) and an attribute as the publish. It returns the file and
// how many bytes the driver spilled and held in memory at most.
func bigChange(t *testing.T, base string, lim limits) (path string, f *File, spilled uint64, held int) {
	t.Helper()
	path = copyTo(t, base)
	f, err := OpenRW(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	if lim.budget != defaultBudget || lim.piece != 0 {
		require.NoError(t, f.setHoldBudget(lim.budget, lim.piece))
	}
	_, opened, err := f.spilled() // what the open wrote
	require.NoError(t, err)
	writeBig(t, f, 2, 0, bigChunks*chunkRows, 0)
	require.NoError(t, f.FlushBody())
	_, held, err = f.spilled()
	require.NoError(t, err)
	writeBig(t, f, 3, 4*chunkRows, 20*chunkRows, 0)
	require.NoError(t, f.SetAttrInt64("/", "big", 3))
	spilled, h, err := f.spilled()
	require.NoError(t, err)
	return path, f, spilled, max(held, h) - opened
}

// checkBig checks the big dataset reads as bigChange left it.
func checkBig(t *testing.T, path string) {
	t.Helper()
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	ds, err := f.OpenDataset(bigPath)
	require.NoError(t, err)
	defer ds.Close()
	rows := bigChunks * chunkRows
	got := make([]byte, 8*rows)
	require.NoError(t, ds.ReadBox([]int64{0}, []int64{int64(rows)}, []int64{int64(rows)}, []int64{0}, got))
	want := append(pattern(2, 0, 4*chunkRows), pattern(3, 4*chunkRows, 20*chunkRows)...)
	want = append(want, pattern(2, 20*chunkRows, rows)...)
	require.True(t, bytes.Equal(want, got), "the big dataset reads as written")
}

// TestJournalHoldBudget: a sync of 20 MiB of in-place changes (a body of 12 MiB, a publish
// of 8 MiB) gives the same file whatever the driver's hold budget and piece; with a budget
// smaller than the held bytes, those beyond it go to the spill file and no more than the
// budget stays in memory.
func TestJournalHoldBudget(t *testing.T) {
	base := bigBase(t)
	var want []byte
	for _, tc := range []struct {
		name string
		lim  limits
	}{
		{"default", limits{defaultBudget, 0}}, // first: the reference
		{"64 KiB budget", limits{64 << 10, 0}},
		{"64 KiB budget, odd pieces", limits{64 << 10, 4099}},
		{"all spilled, smallest pieces", limits{0, 1}},
		{"1 MiB budget, 1 MiB pieces", limits{1 << 20, 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, f, spilled, held := bigChange(t, base, tc.lim)
			require.LessOrEqual(t, held, tc.lim.budget, "bytes held in memory")
			if tc.lim.budget < 20<<20 {
				require.GreaterOrEqual(t, spilled, uint64(20<<20-tc.lim.budget), "bytes spilled")
			} else {
				require.Zero(t, spilled, "nothing spilled within the budget")
			}
			require.NoError(t, f.FlushSync())
			require.False(t, exists(path+JournalSuffix))
			_, held, err := f.spilled()
			require.NoError(t, err)
			require.Zero(t, held, "the sync drops what it held")
			require.NoError(t, f.Close())
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			if want == nil {
				want = got
				checkBig(t, path)
			}
			require.True(t, bytes.Equal(want, got), "the file differs from the default budget's")
		})
	}
}

// TestJournalHoldBudgetSyncs: syncs in a row through one open with a small budget (the
// spill file reused once a sync drops every held write, and writes held while a sync runs
// kept for the next), then a reopen.
func TestJournalHoldBudgetSyncs(t *testing.T) {
	path := copyTo(t, bigBase(t))
	f, err := OpenRW(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.setHoldBudget(64<<10, 5000))
	for gen := 2; gen < 5; gen++ {
		writeBig(t, f, gen, 0, bigChunks*chunkRows, 0)
		require.NoError(t, f.FlushBody())
		writeBig(t, f, gen+1, 4*chunkRows, 20*chunkRows, 0)
		require.NoError(t, f.FlushSync())
		_, held, err := f.spilled()
		require.NoError(t, err)
		require.Zero(t, held)
	}
	spilled, _, err := f.spilled()
	require.NoError(t, err)
	require.Greater(t, spilled, uint64(3*20<<20-3*64<<10))
	require.NoError(t, f.Close())
	g, err := Open(path)
	require.NoError(t, err)
	defer g.Close()
	ds, err := g.OpenDataset(bigPath)
	require.NoError(t, err)
	defer ds.Close()
	got := make([]byte, 8*chunkRows)
	for c, gen := range map[int]int{0: 4, 5: 5, 23: 4} {
		require.NoError(t, ds.ReadBox([]int64{int64(c * chunkRows)}, []int64{chunkRows}, []int64{chunkRows}, []int64{0}, got))
		require.True(t, bytes.Equal(pattern(gen, c*chunkRows, (c+1)*chunkRows), got), "chunk %d", c)
	}
}

// TestJournalHoldBudgetFaults: the big change, spilled and streamed in small pieces, fails
// or crashes at each step of its sync; recovery, itself in small pieces, leaves the file as
// the sync would have (after the commit point) or as it was (before).
func TestJournalHoldBudgetFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("twenty syncs of 20 MiB")
	}
	base := bigBase(t)
	before, err := os.ReadFile(base)
	require.NoError(t, err)
	path, f, _, _ := bigChange(t, base, limits{defaultBudget, 0})
	require.NoError(t, f.FlushSync())
	synced, err := os.ReadFile(path) // the state the sync makes durable
	require.NoError(t, err)
	require.NoError(t, f.Close())
	closed, err := os.ReadFile(path) // and the close's (the superblock's open-for-write flag cleared)
	require.NoError(t, err)

	setRecoverPiece(3001)
	defer setRecoverPiece(0)
	order := []syncStep{stepTail, stepFsync, stepJournal, stepJsync, stepDirsync, stepApply, stepBsync, stepPublish, stepAsync, stepRemove}
	for _, crash := range []bool{false, true} {
		for _, step := range order {
			ft := fault{step, crash}
			t.Run(fmt.Sprintf("%s crash=%v", steps[step].what, crash), func(t *testing.T) {
				path, f, spilled, _ := bigChange(t, base, limits{64 << 10, 3000})
				require.NotZero(t, spilled)
				f.sync.fault = &ft
				syncErr := f.FlushSync()
				committed := syncErr == nil || bytes.Contains([]byte(syncErr.Error()), []byte("after its commit point"))
				f.Close()
				// A journal whole on disk (a crash from its fsync on) is rolled forward.
				whole := committed || (crash && (step == stepJsync || step == stepDirsync))
				rec, err := Recover(path)
				require.NoError(t, err)
				if whole && step <= stepPublish {
					require.Equal(t, RecoveryReplayed, rec)
				}
				require.False(t, exists(path+JournalSuffix))
				got, err := os.ReadFile(path)
				require.NoError(t, err)
				switch {
				case syncErr == nil: // the journal's removal failed: the sync is done, the close too
					require.True(t, bytes.Equal(closed, got), "the file as the sync and the close leave it")
				case whole:
					require.True(t, bytes.Equal(synced, got), "the file as the sync leaves it")
				default: // the tail step may have appended past the old end
					require.GreaterOrEqual(t, len(got), len(before))
					require.True(t, bytes.Equal(before, got[:len(before)]), "the file as it was")
				}
			})
		}
	}
}
