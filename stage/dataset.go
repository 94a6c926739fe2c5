package stage

import (
	"fmt"
	"sync/atomic"

	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/writefile"
)

// Dataset is a dataset of a stage: one write handle that every open of it shares, and
// that never commits by itself. Once the dataset leaves its stage (deleted, or the stage
// committed, discarded or unmounted), reads and writes through it answer ErrStale.
type Dataset struct {
	path string
	// h is the dataset's state: replaced in place by SetSpec, which describes a created
	// dataset after its file was opened.
	h    atomic.Pointer[writefile.File]
	spec atomic.Pointer[Spec] // a dataset created in the stage; nil for one of the base
	gone atomic.Bool
	// restored: loaded with changes from a stage kept on disk (the array's own Dirty
	// starts afresh there); saved: its data file exists. GUARDED_BY(Stage.mu)
	restored, saved bool
}

func newDataset(p string, h *writefile.File, spec *Spec) *Dataset {
	d := &Dataset{path: p}
	d.h.Store(h)
	d.spec.Store(spec)
	return d
}

// swap gives d another state and description, returning the state it had.
func (d *Dataset) swap(h *writefile.File, spec *Spec) *writefile.File {
	d.spec.Store(spec)
	return d.h.Swap(h)
}

// errGone is the answer of a dataset that left its stage.
func (d *Dataset) errGone() error {
	return fmt.Errorf("stage dataset %s: no longer in its stage (deleted, or the stage was committed or discarded): %w", d.path, ErrStale)
}

// Path is the dataset's path inside the stage.
func (d *Dataset) Path() string { return d.path }

// Created reports whether the dataset was created in the stage.
func (d *Dataset) Created() bool { return d.spec.Load() != nil }

// Spec is a created dataset's description (nil for a dataset of the base).
func (d *Dataset) Spec() *Spec { return d.spec.Load() }

// Size is the dataset's size in bytes.
func (d *Dataset) Size() int64 { return d.h.Load().Size() }

// ReadAt reads the dataset's bytes as staged.
func (d *Dataset) ReadAt(p []byte, off int64) (int, error) {
	if d.gone.Load() {
		return 0, d.errGone()
	}
	return d.h.Load().ReadAt(p, off)
}

// WriteAt writes p at off, growing axis 0 past the end (writefile.File.WriteAt).
func (d *Dataset) WriteAt(p []byte, off int64) (int, error) {
	if d.gone.Load() {
		return 0, d.errGone()
	}
	return d.h.Load().WriteAt(p, off)
}

// Truncate resizes axis 0 to size bytes, a whole number of rows.
func (d *Dataset) Truncate(size int64) error {
	if d.gone.Load() {
		return d.errGone()
	}
	return d.h.Load().Truncate(size)
}

// Reshape resizes the dataset to shape.
func (d *Dataset) Reshape(shape []int64) error {
	if d.gone.Load() {
		return d.errGone()
	}
	return d.h.Load().Reshape(shape)
}

// Written reports whether anything was written since the dataset was opened or made.
func (d *Dataset) Written() bool { return d.h.Load().Written() }

// Hold locks the dataset's state and returns its array (writefile.File.Hold; nil for a
// string dataset's text).
func (d *Dataset) Hold() (*staged.Array, func()) { return d.h.Load().Hold() }

// Shape is the dataset's shape as staged (for text: as created, or as in the base).
func (d *Dataset) Shape() []int64 { return d.h.Load().Shape() }

// file is the dataset's state.
func (d *Dataset) file() *writefile.File { return d.h.Load() }

// changed reports whether the dataset differs from the base's. Called holding it.
func (d *Dataset) changed() bool {
	if d.Created() || d.restored {
		return true
	}
	return d.file().DirtyHeld()
}

// Close takes the dataset out of its stage: its staged chunks go back to the store.
func (d *Dataset) Close() {
	d.gone.Store(true)
	d.h.Load().Close()
}
