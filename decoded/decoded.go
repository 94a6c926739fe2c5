// Package decoded keeps a directory of decoded dataset files: for a committed version's
// dataset, a plain file whose bytes are the dataset's bytes at the same offsets, which the
// kernel can serve itself (FUSE passthrough) at page-cache speed.
//
// An entry is named by a content key (versions.Dataset.ContentKey: dtype, shape, chunk
// shape, fill value and the chunks' digests), never by a version's name or a file's
// identity, so renames, reverts, deletions of other versions and compact keep it and a
// rechunk never matches it. An entry is written to a temporary name, preallocated to its
// full size (a full disk fails at once), flushed and renamed when complete; Get serves
// only a complete entry whose name, key attribute and size match. Temporary files left
// by a crash are removed by the next Open. The directory never holds more than its size:
// every file in it counts, temporary ones at their full size, and the least recently used
// entries are removed to make room.
package decoded

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Key is an entry's content key (a SHA-256).
type Key [32]byte

func (k Key) String() string { return hex.EncodeToString(k[:]) }

const (
	entrySuffix = ".dec"           // a complete entry: KEY.dec
	tempMark    = ".tmp-"          // an entry being written: KEY.tmp-RANDOM
	keyAttr     = "user.vh5fs.key" // the entry's key, checked by Get
	copyStep    = 4 << 20          // bytes read from the source at a time
)

// ErrTooLarge: the entry would not fit in the cache even empty.
var ErrTooLarge = errors.New("larger than the cache")

// ErrFilling: another fill of the same key is under way in this process.
var ErrFilling = errors.New("already filling")

// Eviction is a complete entry removed to make room.
type Eviction struct {
	Key  Key
	Size int64
}

// Option configures Open.
type Option func(*Cache)

// OnEvict has fn told of each entry the cache removes to make room, at Open too. fn runs
// in the goroutine that evicts (Open's, or a fill's), with the cache locked: it must not
// call the Cache.
func OnEvict(fn func(Eviction)) Option { return func(c *Cache) { c.onEvict = fn } }

// Cache is one cache directory and its size limit.
type Cache struct {
	dir   string
	limit int64

	mu      sync.Mutex // over the directory's accounting and filling
	filling map[Key]bool
	kept    map[Key]bool   // entries evict leaves (Keep); GUARDED_BY(mu)
	onEvict func(Eviction) // OnEvict's; nil: nobody asked

	ctx    context.Context // cancelled by Close: fills stop and remove their temp files
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{} // one background fill at a time

	sizesMu sync.Mutex    // over the entry sizes MayHave lists
	sizes   map[int64]int // complete entries by size, as listed at listed
	listed  time.Time     // the directory's modification time when sizes were listed
}

// Open makes dir (if needed), removes the temporary files crashed fills left (those no
// running fill holds locked) and evicts entries beyond limit.
func Open(dir string, limit int64, opts ...Option) (*Cache, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("decoded cache %s: size %d", dir, limit)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("decoded cache: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{dir: dir, limit: limit, filling: map[Key]bool{}, kept: map[Key]bool{}, ctx: ctx, cancel: cancel, sem: make(chan struct{}, 1)}
	for _, o := range opts {
		o(c)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.scan(true); err != nil {
		cancel()
		return nil, err
	}
	if err := c.evict(0); err != nil {
		cancel()
		return nil, err
	}
	return c, nil
}

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.dir }

// Limit is the cache's size in bytes.
func (c *Cache) Limit() int64 { return c.limit }

// Close stops the background fills (their temp files are removed) and waits for them.
func (c *Cache) Close() {
	c.cancel()
	c.wg.Wait()
}

func (c *Cache) entryPath(k Key) string { return filepath.Join(c.dir, k.String()+entrySuffix) }

// Get opens the complete entry of k if there is one of exactly size bytes whose key
// attribute names k, and marks it used. ok is false otherwise (no entry, a missing
// directory, a mismatch): the caller reads as it would without a cache.
func (c *Cache) Get(k Key, size int64) (f *os.File, ok bool) {
	f, err := os.Open(c.entryPath(k))
	if err != nil {
		return nil, false
	}
	if !verify(f, k, size) {
		f.Close()
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(f.Name(), now, now) // the LRU order, kept across restarts
	return f, true
}

// verify reports whether f is a regular file of size bytes whose key attribute is k (a
// file system without user xattrs has none to check: the name and size are then the key).
func verify(f *os.File, k Key, size int64) bool {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() != size {
		return false
	}
	buf := make([]byte, 2*len(k))
	n, err := unix.Fgetxattr(int(f.Fd()), keyAttr, buf)
	switch {
	case errors.Is(err, unix.ENOTSUP):
		return true
	case err != nil:
		return false
	}
	return string(buf[:n]) == k.String()
}

// Keep has this Cache's evictions leave the entry of k from now on: a run that fills
// several entries (vh5fs warm) keeps those it has filled or found rather than evict one
// for another, and what it said is cached stays so. Other processes' evictions may still
// remove it.
func (c *Cache) Keep(k Key) {
	c.mu.Lock()
	c.kept[k] = true
	c.mu.Unlock()
}

// Has reports whether a complete entry of k and size exists.
func (c *Cache) Has(k Key, size int64) bool {
	f, ok := c.Get(k, size)
	if ok {
		f.Close()
	}
	return ok
}

// file is one file of the directory as the accounting sees it.
type file struct {
	name string
	size int64
	used time.Time
	temp bool
}

// scan lists the directory's files; with clean it first removes the temporary files no
// fill holds (a fill holds its temp file's flock until it is renamed or removed).
func (c *Cache) scan(clean bool) ([]file, error) {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("decoded cache: %w", err)
	}
	var out []file
	for _, de := range des {
		name := de.Name()
		temp := strings.Contains(name, tempMark)
		if !temp && !strings.HasSuffix(name, entrySuffix) {
			continue // not ours
		}
		p := filepath.Join(c.dir, name)
		if temp && clean && removeAbandoned(p) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // gone meanwhile
		}
		size := info.Size()
		if temp {
			size = max(size, diskSize(info))
		}
		out = append(out, file{name: name, size: size, used: info.ModTime(), temp: temp})
	}
	return out, nil
}

// removeAbandoned removes the temp file p if no fill holds it, and reports whether it did.
func removeAbandoned(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // a running fill's
	}
	return os.Remove(p) == nil
}

// diskSize is the bytes a file has allocated (a preallocated temp file's full size).
func diskSize(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return 0
}

// evict removes least recently used entries until the directory's files and need bytes
// more fit in the limit; it fails if even removing every entry it may would not make room
// (temporary files of running fills and kept entries count too). Called with c.mu held.
func (c *Cache) evict(need int64) error {
	files, err := c.scan(false)
	if err != nil {
		return err
	}
	var used int64
	for _, f := range files {
		used += f.size
	}
	sort.Slice(files, func(i, j int) bool { return files[i].used.Before(files[j].used) })
	for _, f := range files {
		if used+need <= c.limit {
			return nil
		}
		k, ok := entryKey(f.name)
		if f.temp || ok && c.kept[k] {
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, f.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("decoded cache: evicting: %w", err)
		}
		used -= f.size
		if ok && c.onEvict != nil {
			c.onEvict(Eviction{Key: k, Size: f.size})
		}
	}
	if used+need > c.limit {
		return fmt.Errorf("decoded cache: %d bytes in use of %d: %w", used, c.limit, ErrTooLarge)
	}
	return nil
}

// entryKey is the key a complete entry's file name holds.
func entryKey(name string) (k Key, ok bool) {
	h, found := strings.CutSuffix(name, entrySuffix)
	if !found || hex.DecodedLen(len(h)) != len(k) {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(h))
	return k, err == nil
}

// Fill writes the entry of k, size bytes read from src, unless a complete one exists: to
// a temporary file preallocated to size (after evicting what must go to make room),
// flushed, then renamed. On any error, or when ctx ends, the temporary file is removed and
// no entry appears.
func (c *Cache) Fill(ctx context.Context, k Key, size int64, src io.ReaderAt) error {
	if size > c.limit {
		return fmt.Errorf("decoded cache: %d bytes: %w", size, ErrTooLarge)
	}
	if c.Has(k, size) {
		return nil
	}
	c.mu.Lock()
	if c.filling[k] {
		c.mu.Unlock()
		return ErrFilling
	}
	c.filling[k] = true
	tmp, err := c.reserve(k, size)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.filling, k)
		c.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.Remove(tmp.Name())
		}
		tmp.Close() // drops the flock
	}()
	if err := copyFrom(ctx, tmp, src, size); err != nil {
		return fmt.Errorf("decoded cache: filling %s: %w", tmp.Name(), err)
	}
	if err := unix.Fsetxattr(int(tmp.Fd()), keyAttr, []byte(k.String()), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		return fmt.Errorf("decoded cache: %s: key attribute: %w", tmp.Name(), err)
	}
	// Durable before it is named: after a power loss an entry is whole or absent.
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("decoded cache: %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), c.entryPath(k)); err != nil {
		return fmt.Errorf("decoded cache: %w", err)
	}
	done = true
	c.forgetSizes() // a listing from the same clock tick as the rename would not see it
	if d, err := os.Open(c.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// reserve makes room for size bytes and creates the entry's temporary file, locked and
// preallocated. Called with c.mu held.
func (c *Cache) reserve(k Key, size int64) (*os.File, error) {
	if err := c.evict(size); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(c.dir, k.String()+tempMark+"*")
	if err != nil {
		return nil, fmt.Errorf("decoded cache: %w", err)
	}
	fail := func(err error) (*os.File, error) {
		os.Remove(tmp.Name())
		tmp.Close()
		return nil, fmt.Errorf("decoded cache: %s: %w", tmp.Name(), err)
	}
	if err := unix.Flock(int(tmp.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err)
	}
	if err := preallocate(tmp, size); err != nil {
		return fail(err)
	}
	return tmp, nil
}

// copyFrom copies size bytes of src into dst at the same offsets.
func copyFrom(ctx context.Context, dst *os.File, src io.ReaderAt, size int64) error {
	buf := make([]byte, min(size, copyStep))
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := buf[:min(int64(len(buf)), size-off)]
		n, err := src.ReadAt(b, off)
		if n == 0 && err == nil {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
			return fmt.Errorf("reading at %d: %w", off, err)
		}
		if _, err := dst.WriteAt(b[:n], off); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// Job names an entry to fill and its bytes; ok false: nothing to fill.
type Job func() (k Key, size int64, src io.ReaderAt, ok bool, err error)

// Start runs job and fills its entry in the background, one at a time in the order asked
// (the job too runs there: naming an entry can cost a read of the file), unless the entry
// is complete or under way; done, if not nil, gets the result. After Close nothing starts.
func (c *Cache) Start(job Job, done func(error)) {
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		defer func() { <-c.sem }()
		k, size, src, ok, err := job()
		if err == nil && ok {
			err = c.Fill(c.ctx, k, size, src)
		}
		if done != nil && (err != nil || ok) {
			done(err)
		}
	}()
}

// MayHave reports whether the directory may hold a complete entry of size bytes: false
// means Get of any key of that size misses, so an open need not name its content to know
// (naming costs a read of the hash table). The sizes are listed again whenever the
// directory's modification time moves (an entry renamed into it or removed, by any process).
func (c *Cache) MayHave(size int64) bool {
	st, err := os.Stat(c.dir)
	if err != nil {
		return false
	}
	c.sizesMu.Lock()
	defer c.sizesMu.Unlock()
	if !st.ModTime().Equal(c.listed) || c.sizes == nil {
		c.sizes = map[int64]int{}
		des, err := os.ReadDir(c.dir)
		if err != nil {
			return true // unknown: let Get decide
		}
		for _, de := range des {
			if !strings.HasSuffix(de.Name(), entrySuffix) {
				continue
			}
			if info, err := de.Info(); err == nil {
				c.sizes[info.Size()]++
			}
		}
		c.listed = st.ModTime()
		// A directory's mtime moves in coarse clock ticks: an entry another process renames
		// in within the tick of this listing leaves the mtime as it is. Trust a listing only
		// once its mtime is older than any tick; until then, list again at each call.
		if time.Since(c.listed) < listingSettle {
			c.listed = time.Time{}
		}
	}
	return c.sizes[size] > 0
}

// listingSettle is how old the directory's mtime must be for MayHave to keep its listing:
// well past the coarse clock's tick (a few milliseconds).
const listingSettle = time.Second

// forgetSizes makes the next MayHave list the directory again.
func (c *Cache) forgetSizes() {
	c.sizesMu.Lock()
	c.sizes = nil
	c.sizesMu.Unlock()
}
