// Package writefile gives a dataset's staged changes the semantics of a plain file on top
// of versioned-hdf5. A File owns a StagedChangesArray (package staged) based on a
// version: writes past the end grow axis 0, truncates resize it by whole rows. A Handle
// is a File of a version's dataset that commits itself (package commit) as a new
// version, after which it carries on from the version it made; a stage's datasets are
// Files its stage commits. A variable-length string dataset's File holds its text instead
// of a staged array (text.go): written as a plain file, parsed into values when committed.
// Nothing here knows FUSE: fsnode translates requests into these calls, and the tests
// drive them directly.
//
// Errors that a file system answers with a specific errno wrap it (syscall.EINVAL for a
// size that is not whole rows, and for the commit of a truncated handle whose content
// ends inside a row, PartialRowError; EFBIG for growing a dataset without rows, ENOSPC
// from a spill on a full disk); everything else is EIO for the caller.
package writefile

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// File is a dataset's staged changes with the semantics of a plain file: reads of its
// base with the changes on top, writes that grow axis 0, truncates by whole rows. Its
// methods are safe for concurrent use; they are serialised on its lock, except Size. A
// File commits nowhere by itself: a stage's dataset is one (its stage commits it), and
// every Handle has one.
type File struct {
	mu    sync.Mutex
	arr   *staged.Array // GUARDED_BY(mu); nil for text
	text  *text         // a variable-length string dataset's text (text.go); GUARDED_BY(mu)
	wrote bool          // WriteAt since the last commit; GUARDED_BY(mu)
	// truncated: the file was truncated (O_TRUNC, ftruncate) or reshaped, so its content
	// is what was written since, and end is where that content ends: the last truncation's
	// size or the furthest write past it. A write past the end grows axis 0 by whole rows,
	// so Size alone cannot tell a file replaced by the wrong number of bytes.
	truncated bool  // GUARDED_BY(mu)
	end       int64 // GUARDED_BY(mu)
	src       chunkmap.ChunkSource
	// sz is arr.Size(), stored after each change under mu: Size reads it without waiting
	// for mu, which a commit holds for as long as it runs.
	sz atomic.Int64
}

// Handle is a version's dataset opened for writing, committed on its own (Commit) as a
// new version.
//
// Lock ordering: File.mu, then commit.Committer's, then versions.File's, then the HDF5
// lock (the whole order: docs/ARCHITECTURE.md).
type Handle struct {
	File
	line // GUARDED_BY(File.mu)
}

// line is what a handle commits on, and advances with each commit it makes.
type line struct {
	c    *commit.Committer
	rel  string // the dataset's path inside its version
	base string // the version the changes apply to
	// follow: opened on the current version, the handle commits on top of whatever is
	// current then, unless that changed its dataset (commit.Change.FollowHead). A handle
	// opened on an older version keeps its own line of versions.
	follow bool
	// branch: opened through a branch (package named), the handle commits on the
	// branch and follows its head instead of the current version's.
	branch string
	unpin  func() // the base's pin (commit.Committer.Pin)
}

// newLine starts a handle's line on dataset rel of version (on branch, if set), pinned.
func newLine(c *commit.Committer, version, branch, rel string) (line, error) {
	cur, err := c.File().CurrentVersion()
	if err != nil {
		return line{}, fmt.Errorf("writefile: %s/%s: reading the current version: %w", version, rel, err)
	}
	return line{c: c, rel: rel, base: version, follow: version == cur || branch != "", branch: branch, unpin: c.Pin(version)}, nil
}

// change is a commit of the line's dataset on its base.
func (l *line) change(explicit bool) commit.Change {
	return commit.Change{Base: l.base, Dataset: l.rel, SkipUnchanged: !explicit, FollowHead: l.follow, Branch: l.branch}
}

// advance makes version, which a commit of the line just made, its base.
func (l *line) advance(version string) {
	unpin := l.unpin // pinned without a gap: a rewrite never moves the array's chunks
	l.base, l.unpin = version, l.c.Pin(version)
	unpin()
}

// Open opens dataset rel of version for writing, its staged chunks in c's store, those it
// evicts sunk into their raw_data slots. If version is the current one, the handle
// follows the head (see Commit). With a branch (version then being its head), the
// handle commits on the branch and follows the branch's head instead.
func Open(c *commit.Committer, version, branch, rel string) (*Handle, error) {
	l, err := newLine(c, version, branch, rel)
	if err != nil {
		return nil, err
	}
	h := &Handle{line: l}
	if err := h.File.open(c, version, rel, true); err != nil {
		h.unpin()
		return nil, err
	}
	return h, nil
}

// OpenFile opens dataset rel of version as a File: a stage's dataset of its base, staged
// in c's store (never sunk: a stage outlives the mount).
func OpenFile(c *commit.Committer, version, rel string) (*File, error) {
	f := &File{}
	if err := f.open(c, version, rel, false); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) open(c *commit.Committer, version, rel string, sink bool) error {
	d, err := c.File().Dataset(versions.InVersion(version, rel))
	if err != nil {
		return err
	}
	if d.TextWritable() {
		t, err := openText(d)
		if err != nil {
			return fmt.Errorf("writefile: %s/%s: %w", version, rel, err)
		}
		f.text = t
		f.sz.Store(int64(len(t.buf)))
		return nil
	}
	if !d.Stageable() {
		return fmt.Errorf("writefile: %s/%s: %w", version, rel, versions.ErrUnsupported)
	}
	arr, err := c.NewArray(d, sink)
	if err != nil {
		return err
	}
	f.arr, f.src = arr, d.ChunkSource()
	f.sz.Store(arr.Size())
	return nil
}

// NewFile returns a File on arr, whose base chunks src reads (nil: no base): a dataset
// created in a stage, or restored from one saved.
func NewFile(arr *staged.Array, src chunkmap.ChunkSource) *File {
	f := &File{arr: arr, src: src}
	f.sz.Store(arr.Size())
	return f
}

// Hold locks the file and returns its array (nil for text), for a caller that reads or
// commits it whole; release unlocks it.
func (h *File) Hold() (arr *staged.Array, release func()) {
	h.mu.Lock()
	return h.arr, h.mu.Unlock
}

// Source reads the chunks of the file's base version.
func (h *File) Source() chunkmap.ChunkSource { return h.src }

// Size is the file's size in bytes as the handle sees it.
func (h *File) Size() int64 { return h.sz.Load() }

// Branch is the branch the handle commits on ("" for none).
func (h *Handle) Branch() string { return h.branch }

// Base is the version the handle's staged changes apply to (the one it made last).
func (h *Handle) Base() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.base
}

// Written reports whether WriteAt was called since the last commit.
func (h *File) Written() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wrote
}

// Dirty reports whether there is anything to commit.
func (h *File) Dirty() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dirty()
}

// DirtyHeld is Dirty for a caller holding the file (Hold).
func (h *File) DirtyHeld() bool { return h.dirty() }

func (h *File) dirty() bool {
	if h.text != nil {
		return h.text.dirty
	}
	return h.arr.Dirty()
}

// ReadAt reads the handle's view: its base version with its staged changes.
func (h *File) ReadAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.text != nil {
		return h.text.readAt(p, off), nil
	}
	return h.arr.ReadAt(p, off, h.src)
}

// rowBytes is the size of one row along axis 0; 0 if a later axis has length 0.
func rowBytes(arr *staged.Array) int64 {
	r := int64(arr.ItemSize())
	for _, s := range arr.Shape()[1:] {
		r *= s
	}
	return r
}

// WriteAt writes p at off; writing past the end grows axis 0 first (rows not written read
// as the fill value). On error nothing is written (a grow that succeeded stays).
func (h *File) WriteAt(p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < 0 {
		return 0, fmt.Errorf("writefile: write at %d: %w", off, syscall.EINVAL)
	}
	if h.text != nil {
		h.text.writeAt(p, off)
		h.wrote = true
		h.sz.Store(int64(len(h.text.buf)))
		return len(p), nil
	}
	if end := off + int64(len(p)); end > h.arr.Size() {
		row := rowBytes(h.arr)
		if row == 0 {
			return 0, fmt.Errorf("writefile: write to [%d, %d): rows of 0 bytes cannot grow: %w", off, end, syscall.EFBIG)
		}
		shape := h.arr.Shape()
		shape[0] = (end + row - 1) / row
		err := h.arr.Resize(shape, h.src)
		h.sz.Store(h.arr.Size())
		if err != nil {
			return 0, err
		}
	}
	if _, err := h.arr.WriteAt(p, off, h.src); err != nil {
		return 0, err
	}
	h.wrote = true
	h.end = max(h.end, off+int64(len(p)))
	return len(p), nil
}

// Truncate resizes axis 0 to size bytes, which must be a whole number of rows. From then
// on the file's content is what is written after it, which a Handle commits only if it
// ends at a row's end (PartialRowError).
func (h *File) Truncate(size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.text != nil {
		if size < 0 {
			return fmt.Errorf("writefile: truncate to %d bytes: %w", size, syscall.EINVAL)
		}
		h.text.truncate(size)
		h.sz.Store(size)
		return nil
	}
	row := rowBytes(h.arr)
	if size < 0 || (row == 0 && size != 0) || (row > 0 && size%row != 0) {
		return fmt.Errorf("writefile: truncate to %d bytes: not a whole number of %d-byte rows: %w", size, row, syscall.EINVAL)
	}
	shape := h.arr.Shape()
	if row > 0 {
		shape[0] = size / row
	}
	return h.reshape(shape)
}

// Reshape resizes the dataset to shape (any axis; same rank, no negative length).
func (h *File) Reshape(shape []int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.text != nil {
		return fmt.Errorf("writefile: reshape to %v: a string dataset's shape follows its lines (write them): %w", shape, syscall.EINVAL)
	}
	if len(shape) != len(h.arr.Shape()) {
		return fmt.Errorf("writefile: reshape to %v: rank %d, want %d: %w", shape, len(shape), len(h.arr.Shape()), syscall.EINVAL)
	}
	for _, s := range shape {
		if s < 0 {
			return fmt.Errorf("writefile: reshape to %v: negative length: %w", shape, syscall.EINVAL)
		}
	}
	return h.reshape(shape)
}

func (h *File) reshape(shape []int64) error {
	err := h.arr.Resize(shape, h.src)
	h.sz.Store(h.arr.Size())
	if err == nil {
		h.truncated, h.end = true, h.arr.Size()
	}
	return err
}

// PartialRowError refuses the commit of a handle that truncated and whose content then
// ends inside a row: a file replaced whole (cp, a shell's >) by the wrong number of bytes
// would otherwise commit, its last row completed with the fill value, without a word.
// It is EINVAL for the file system.
type PartialRowError struct {
	Size int64 // where the content ends, in bytes
	Row  int64 // the bytes of one row along axis 0: item size x the other axes
}

func (e *PartialRowError) Error() string {
	return fmt.Sprintf("writefile: truncated, the content ends at %d bytes, inside a row of %d bytes: nothing committed", e.Size, e.Row)
}

// Unwrap gives the errno the file system answers.
func (e *PartialRowError) Unwrap() error { return syscall.EINVAL }

// partialRow is the refusal of a commit of h's content, nil if it may commit. An
// untruncated handle's writes that end inside a row are patches of the base, grown by
// whole rows as documented, and commit.
func (h *File) partialRow() error {
	if !h.truncated || h.arr == nil {
		return nil
	}
	if row := rowBytes(h.arr); row > 0 && h.end%row != 0 {
		return &PartialRowError{Size: h.end, Row: row}
	}
	return nil
}

// Close ends the handle: staged changes not committed are dropped, giving their memory
// and spill slots back to the store. The handle must not be used afterwards.
func (h *File) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.text != nil {
		h.text.buf, h.text.base = nil, nil
		return
	}
	h.arr.Discard()
}

// Close ends the handle: staged changes not committed are dropped, and its base may be
// renamed again.
func (h *Handle) Close() {
	h.File.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unpin()
}

// Commit commits the handle's changes, if any, as a new version on top of its base; the
// handle then continues from the new version, whose name it returns ("" if nothing was
// committed). A handle opened on the current version commits on top of the version
// current at commit time instead, when that holds the handle's dataset as its base does
// (another handle committed another dataset); when it changed that dataset, the new
// version is a sibling off the handle's base. explicit is fsync's request: it commits whatever was written. Without it
// (close) only data that differs from the base commits, so that a write-back of unchanged
// pages (mmap) makes no empty version. A handle that truncated and whose content ends
// inside a row commits nothing: PartialRowError, its changes kept.
func (h *Handle) Commit(explicit bool) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty() {
		return "", nil
	}
	if err := h.partialRow(); err != nil {
		return "", fmt.Errorf("%s/%s: %w", h.base, h.rel, err)
	}
	ch := h.change(explicit)
	if h.text != nil {
		if !explicit && h.text.same() {
			h.wrote = false
			return "", nil // a write-back of the base's text: no new version
		}
		strs, err := h.text.strings()
		if err != nil {
			return "", fmt.Errorf("%s/%s: %w", h.base, h.rel, err)
		}
		ch.Strings = strs
	} else {
		ch.Array = h.arr
	}
	res, err := h.c.Commit(ch)
	if err != nil {
		return "", err
	}
	h.wrote = false
	if h.text != nil {
		h.text.committed(ch.Strings.Shape)
	}
	if res.Skipped {
		return "", nil
	}
	h.advance(res.Name)
	return res.Name, nil
}
