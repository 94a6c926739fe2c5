package writefile

import (
	"bytes"
	"slices"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/versions"
)

// text is a variable-length string dataset's file content, in the form it reads as
// (versions.TextForm: one JSON string per line, elements in C order): a plain file's
// bytes, held whole in memory since any write can move every line after it, parsed only
// when committed (ParseStrings). The count of its values then sets axis 0; the other axes
// stay.
type text struct {
	buf   []byte
	base  []byte // the committed text it started from, to tell a write-back of the same bytes
	dirty bool   // changed since it was opened or committed
	ascii bool   // the dataset holds ASCII strings (h5py's bytes), else UTF-8
	shape []int64
}

// openText starts the text of d, a TextWritable dataset of a version.
func openText(d *versions.Dataset) (*text, error) {
	buf := make([]byte, d.Size())
	if _, err := d.ReadAt(buf, 0); err != nil {
		return nil, err
	}
	return &text{buf: buf, base: slices.Clone(buf), ascii: !d.Type.UTF8, shape: slices.Clone(d.Shape)}, nil
}

// NewText returns a File of a string dataset that holds buf (a dataset created in a
// stage, or restored from one saved): ascii as for its charset, shape its shape but for
// axis 0, which the lines set.
func NewText(buf []byte, ascii bool, shape []int64) *File {
	f := &File{text: &text{buf: buf, ascii: ascii, shape: slices.Clone(shape), dirty: true}}
	f.sz.Store(int64(len(buf)))
	return f
}

// TextHeld is a string dataset's text (nil for other files), for a caller holding the
// file (Hold), which must not change it.
func (h *File) TextHeld() []byte {
	if h.text == nil {
		return nil
	}
	return h.text.buf
}

// StringsHeld parses a string dataset's text into the values a commit takes, for a
// caller holding the file (Hold): a TextError (EINVAL) for text that is not one JSON
// string per line of values the dataset holds.
func (h *File) StringsHeld() (*commit.Strings, error) { return h.text.strings() }

// RestoreText returns a File of the same string dataset as h holding buf with shape, as
// a stage saved it.
func (h *File) RestoreText(buf []byte, shape []int64) *File {
	h.mu.Lock()
	defer h.mu.Unlock()
	return NewText(buf, h.text.ascii, shape)
}

// Shape is the file's shape as staged: for text, its shape as last committed or opened.
func (h *File) Shape() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ShapeHeld()
}

// ShapeHeld is Shape for a caller holding the file (Hold).
func (h *File) ShapeHeld() []int64 {
	if h.text != nil {
		return slices.Clone(h.text.shape)
	}
	return h.arr.Shape()
}

func (t *text) readAt(p []byte, off int64) int {
	if off >= int64(len(t.buf)) {
		return 0
	}
	return copy(p, t.buf[off:])
}

// writeAt writes p at off, growing the text (a gap holds NUL bytes, which no line may:
// the commit refuses them).
func (t *text) writeAt(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(t.buf)) {
		t.buf = append(t.buf, make([]byte, end-int64(len(t.buf)))...)
	}
	copy(t.buf[off:], p)
	t.dirty = true
}

func (t *text) truncate(size int64) {
	if size <= int64(len(t.buf)) {
		t.buf = t.buf[:size]
	} else {
		t.buf = append(t.buf, make([]byte, size-int64(len(t.buf)))...)
	}
	t.dirty = true
}

// same reports whether the text is the committed text it started from.
func (t *text) same() bool { return t.base != nil && bytes.Equal(t.buf, t.base) }

// strings parses the text into the dataset's new values.
func (t *text) strings() (*commit.Strings, error) {
	rowLen := chunkplan.Elements(t.shape[1:])
	vals, err := ParseStrings(t.buf, t.ascii, rowLen)
	if err != nil {
		return nil, err
	}
	shape := slices.Clone(t.shape)
	if rowLen > 0 {
		shape[0] = int64(len(vals)) / rowLen
	}
	return &commit.Strings{Shape: shape, Values: vals}, nil
}

// committed records that the text was committed with shape.
func (t *text) committed(shape []int64) {
	t.base, t.shape, t.dirty = slices.Clone(t.buf), shape, false
}
