package decoded

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func key(s string) Key { return Key(sha256.Sum256([]byte(s))) }

func data(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ seed
	}
	return b
}

func read(t *testing.T, c *Cache, k Key, size int64) []byte {
	t.Helper()
	f, ok := c.Get(k, size)
	require.True(t, ok, "entry %s", k)
	defer f.Close()
	b := make([]byte, size)
	_, err := f.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

func TestFillGet(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"empty", 0}, {"small", 100}, {"several steps", 2*copyStep + 17}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Open(t.TempDir(), 64<<20)
			require.NoError(t, err)
			defer c.Close()
			k, b := key(tc.name), data(tc.size, 3)
			_, ok := c.Get(k, int64(tc.size))
			require.False(t, ok)
			require.NoError(t, c.Fill(context.Background(), k, int64(tc.size), bytes.NewReader(b)))
			require.Equal(t, b, read(t, c, k, int64(tc.size)))
			_, ok = c.Get(k, int64(tc.size)+1)
			require.False(t, ok, "a size that differs is no match")
			_, ok = c.Get(key("other"), int64(tc.size))
			require.False(t, ok)
		})
	}
}

// TestVerify: an entry whose key attribute or size is not its own is never served.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer c.Close()
	a, b := key("a"), key("b")
	require.NoError(t, c.Fill(context.Background(), a, 10, bytes.NewReader(data(10, 1))))
	require.NoError(t, os.Rename(c.entryPath(a), c.entryPath(b)))
	_, ok := c.Get(b, 10)
	require.False(t, ok, "b's name, a's key attribute")
	require.NoError(t, os.Rename(c.entryPath(b), c.entryPath(a)))
	require.NoError(t, os.Truncate(c.entryPath(a), 9))
	_, ok = c.Get(a, 10)
	require.False(t, ok, "short entry")
}

type failingReader struct{ after int64 }

func (r failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= r.after {
		return 0, errors.New("boom")
	}
	return len(p), nil
}

// TestFailedFill: a fill whose source fails or is cancelled leaves no entry and no temp file.
func TestFailedFill(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 64<<20)
	require.NoError(t, err)
	defer c.Close()
	k := key("x")
	require.Error(t, c.Fill(context.Background(), k, 3*copyStep, failingReader{after: copyStep}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, c.Fill(ctx, k, 3*copyStep, failingReader{after: 1 << 40}), context.Canceled)
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, des)
	require.False(t, c.Has(k, 3*copyStep))
}

// TestCrashLeftovers: Open removes temp files nobody holds and keeps a running fill's.
func TestCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, key("a").String()+tempMark+"123")
	require.NoError(t, os.WriteFile(left, data(100, 0), 0o600))
	held, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer held.Close()
	require.NoFileExists(t, left)
	_, ok := held.Get(key("a"), 100)
	require.False(t, ok)

	tmp, err := held.reserve(key("b"), 1000) // a fill under way: its temp file locked
	require.NoError(t, err)
	defer tmp.Close()
	again, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer again.Close()
	require.FileExists(t, tmp.Name())
}

// TestEviction: the directory never holds more than the limit; the least recently used go.
func TestEviction(t *testing.T) {
	dir := t.TempDir()
	const limit = 10 << 10
	c, err := Open(dir, limit)
	require.NoError(t, err)
	defer c.Close()
	fill := func(name string, n int) {
		require.NoError(t, c.Fill(context.Background(), key(name), int64(n), bytes.NewReader(data(n, 0))))
		time.Sleep(10 * time.Millisecond) // distinct mtimes
	}
	fill("a", 4<<10)
	fill("b", 4<<10)
	require.True(t, c.Has(key("a"), 4<<10)) // a used after b: b is older now
	time.Sleep(10 * time.Millisecond)
	fill("c", 4<<10)
	require.True(t, c.Has(key("a"), 4<<10))
	require.False(t, c.Has(key("b"), 4<<10), "least recently used goes")
	require.True(t, c.Has(key("c"), 4<<10))
	require.LessOrEqual(t, dirBytes(t, dir), int64(limit))
	require.ErrorIs(t, c.Fill(context.Background(), key("big"), limit+1, bytes.NewReader(data(limit+1, 0))), ErrTooLarge)

	small, err := Open(dir, 5<<10) // a smaller limit evicts at Open
	require.NoError(t, err)
	defer small.Close()
	require.LessOrEqual(t, dirBytes(t, dir), int64(5<<10))
}

// TestEvictionReport: OnEvict is told of every entry removed to make room, at Open and
// at a fill, with its key and size; Keep's entries stay, and a fill that needs their room
// is refused as too large.
func TestEvictionReport(t *testing.T) {
	const kib = 1 << 10
	for _, tc := range []struct {
		name    string
		before  []string // entries filled first (4 KiB each, oldest first) with a 12 KiB limit
		limit   int64    // the limit the cache is opened again with
		keep    []string // kept before the fill
		fill    string   // filled (4 KiB) after the reopen; "" none
		atOpen  []string // evicted by the reopen
		atFill  []string // evicted by the fill
		refused bool     // the fill finds no room
	}{
		{name: "nothing to evict", before: []string{"a"}, limit: 12 * kib, fill: "b"},
		{name: "a smaller limit evicts at open", before: []string{"a", "b", "c"}, limit: 5 * kib, atOpen: []string{"a", "b"}},
		{name: "a fill evicts the oldest", before: []string{"a", "b", "c"}, limit: 12 * kib, fill: "d", atFill: []string{"a"}},
		{name: "kept entries stay", before: []string{"a", "b", "c"}, limit: 12 * kib, keep: []string{"a"}, fill: "d", atFill: []string{"b"}},
		{name: "no room beside kept entries", before: []string{"a", "b"}, limit: 8 * kib, keep: []string{"a", "b"}, fill: "c", refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first, err := Open(dir, 12*kib)
			require.NoError(t, err)
			for _, n := range tc.before {
				require.NoError(t, first.Fill(context.Background(), key(n), 4*kib, bytes.NewReader(data(4*kib, 1))))
				time.Sleep(10 * time.Millisecond) // distinct mtimes
			}
			first.Close()
			names := map[Key]string{}
			for _, n := range []string{"a", "b", "c", "d"} {
				names[key(n)] = n
			}
			var evicted []string
			c, err := Open(dir, tc.limit, OnEvict(func(e Eviction) {
				require.Equal(t, int64(4*kib), e.Size)
				evicted = append(evicted, names[e.Key])
			}))
			require.NoError(t, err)
			defer c.Close()
			require.Equal(t, tc.atOpen, evicted, "at open")
			evicted = nil
			for _, n := range tc.keep {
				c.Keep(key(n))
			}
			if tc.fill != "" {
				err := c.Fill(context.Background(), key(tc.fill), 4*kib, bytes.NewReader(data(4*kib, 2)))
				if tc.refused {
					require.ErrorIs(t, err, ErrTooLarge)
				} else {
					require.NoError(t, err)
				}
			}
			require.Equal(t, tc.atFill, evicted, "at the fill")
			for _, n := range tc.keep {
				require.True(t, c.Has(key(n), 4*kib), "kept %s", n)
			}
			require.LessOrEqual(t, dirBytes(t, dir), tc.limit)
		})
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n int64
	for _, de := range des {
		info, err := de.Info()
		require.NoError(t, err)
		n += info.Size()
	}
	return n
}

// TestMissingDir: a cache whose directory was removed misses and fails fills, without panics.
func TestMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	c, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, os.RemoveAll(dir))
	require.Error(t, c.Fill(context.Background(), key("a"), 10, bytes.NewReader(data(10, 0))))
	require.False(t, c.Has(key("a"), 10))
}

func TestStart(t *testing.T) {
	c, err := Open(t.TempDir(), 1<<20)
	require.NoError(t, err)
	b := data(5000, 9)
	done := make(chan error, 1)
	c.Start(func() (Key, int64, io.ReaderAt, bool, error) { return key("s"), 5000, bytes.NewReader(b), true, nil },
		func(err error) { done <- err })
	require.NoError(t, <-done)
	require.Equal(t, b, read(t, c, key("s"), 5000))
	c.Start(func() (Key, int64, io.ReaderAt, bool, error) { return Key{}, 0, nil, false, errors.New("no key") },
		func(err error) { done <- err })
	require.EqualError(t, <-done, "no key")
	c.Close()
	ran := false
	c.Start(func() (Key, int64, io.ReaderAt, bool, error) { ran = true; return Key{}, 0, nil, false, nil }, nil)
	require.False(t, ran, "nothing starts after Close")
}

func TestMayHave(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer c.Close()
	require.False(t, c.MayHave(100))
	require.NoError(t, c.Fill(context.Background(), key("a"), 100, bytes.NewReader(data(100, 0))))
	require.True(t, c.MayHave(100))
	require.False(t, c.MayHave(101))
	other, err := Open(dir, 1<<20) // another process's fill shows too
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Fill(context.Background(), key("b"), 101, bytes.NewReader(data(101, 0))))
	require.True(t, c.MayHave(101))
	require.NoError(t, os.Remove(c.entryPath(key("a"))))
	require.False(t, c.MayHave(100))
	require.NoError(t, os.RemoveAll(dir))
	require.False(t, c.MayHave(101))
}

// TestMayHaveSameTick: an entry another process renames in within the clock tick of a
// listing leaves the directory's mtime as it was; MayHave must see it all the same.
func TestMayHaveSameTick(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer c.Close()
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.False(t, c.MayHave(200))
	other, err := Open(dir, 1<<20)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Fill(context.Background(), key("c"), 200, bytes.NewReader(data(200, 1))))
	require.NoError(t, os.Chtimes(dir, st.ModTime(), st.ModTime())) // as if in the listing's tick
	require.True(t, c.MayHave(200), "a listing as young as a clock tick is not trusted")
}
