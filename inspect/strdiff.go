package inspect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vh5fs/vh5fs/versions"
)

// diffStrings compares two versions of a variable-length string dataset element by
// element, filling ed as DiffElements does for numeric ones: elements correspond by their
// index within both shapes, counted in C order; the rest are added or removed. Both texts
// (versions.TextForm) are read once, side by side, through small buffers: nothing but the
// value ranges is kept, so a million elements cost no more than the texts the Datasets
// already hold.
func diffStrings(d1, d2 *versions.Dataset, ed *ElementDiff) error {
	return diffTexts(newLineReader(d1.Path, io.NewSectionReader(d1, 0, d1.Size()), d1.Shape),
		newLineReader(d2.Path, io.NewSectionReader(d2, 0, d2.Size()), d2.Shape), ed)
}

// diffTexts is diffStrings on the texts a and b read.
func diffTexts(a, b *lineReader, ed *ElementDiff) error {
	shape1, shape2 := a.shape, b.shape
	n := len(shape1)
	ed.Strings = true
	for _, r := range []*ValueRange{&ed.Old, &ed.New, &ed.AddedRange, &ed.RemovedRange} {
		r.kind = 's'
	}
	pair := func(inA, inB bool) error {
		var la, lb []byte
		var err error
		if inA {
			if la, err = a.next(); err != nil {
				return err
			}
		}
		if inB {
			if lb, err = b.next(); err != nil {
				return err
			}
		}
		switch {
		case inA && inB:
			if bytes.Equal(la, lb) { // the same JSON is the same string
				return nil
			}
			sa, err := a.decode(la)
			if err != nil {
				return err
			}
			sb, err := b.decode(lb)
			if err != nil {
				return err
			}
			if sa != sb { // different JSON may still spell the same string
				ed.Changed++
				ed.Old.addString(sa)
				ed.New.addString(sb)
			}
		case inA:
			s, err := a.decode(la)
			if err != nil {
				return err
			}
			ed.RemovedRange.addString(s)
		case inB:
			s, err := b.decode(lb)
			if err != nil {
				return err
			}
			ed.AddedRange.addString(s)
		}
		return nil
	}
	if n == 0 { // a scalar, one element, or a null dataspace (nil shape), none
		inA, inB := shape1 != nil, shape2 != nil
		switch {
		case inA && inB:
			ed.Compared = 1
		case inA:
			ed.Removed = 1
		case inB:
			ed.Added = 1
		}
		if err := pair(inA, inB); err != nil {
			return err
		}
		return errors.Join(a.end(), b.end())
	}
	overlap, union := make([]int64, n), make([]int64, n)
	for i := range overlap {
		overlap[i] = min(shape1[i], shape2[i])
		union[i] = max(shape1[i], shape2[i])
	}
	ed.Compared = count(overlap)
	ed.Added = count(shape2) - ed.Compared
	ed.Removed = count(shape1) - ed.Compared
	// Each text lists its shape's elements in C order, which is the order of the union's
	// rows: a row of the union is a row of a version when its index on the leading axes is
	// inside that version's shape, and then holds that version's last-axis length.
	rowLen := func(shape, row []int64) int64 {
		for i := range n - 1 {
			if row[i] >= shape[i] {
				return 0
			}
		}
		return shape[n-1]
	}
	err := eachRow(make([]int64, n), union, func(row []int64, _, _ int64) error {
		n1, n2 := rowLen(shape1, row), rowLen(shape2, row)
		for k := range max(n1, n2) {
			if err := pair(k < n1, k < n2); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return errors.Join(a.end(), b.end())
}

// lineReader reads a string dataset's text one element (line) at a time.
type lineReader struct {
	name  string // the dataset, for errors
	shape []int64
	r     *bufio.Reader
	long  []byte // a line longer than r's buffer, gathered
	k     int64  // elements read
}

func newLineReader(name string, text io.Reader, shape []int64) *lineReader {
	return &lineReader{name: name, shape: shape, r: bufio.NewReaderSize(text, 64<<10)}
}

// next is the next element's JSON, without its newline; valid until the next call.
func (l *lineReader) next() ([]byte, error) {
	b, err := l.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = l.r.ReadSlice('\n')
			l.long = append(l.long, b...)
		}
		b = l.long
	}
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%s: the text ends at element %d of %d", l.name, l.k, count(l.shape))
	case err != nil:
		return nil, fmt.Errorf("%s: element %d: %w", l.name, l.k, err)
	}
	l.k++
	return b[:len(b)-1], nil
}

// decode is the string line (from the latest next) spells.
func (l *lineReader) decode(line []byte) (string, error) {
	var s string
	if err := json.Unmarshal(line, &s); err != nil {
		return "", fmt.Errorf("%s: element %d: %w", l.name, l.k-1, err)
	}
	return s, nil
}

// end checks that the text held no more elements than the shape.
func (l *lineReader) end() error {
	if _, err := l.r.ReadByte(); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		return fmt.Errorf("%s: %w", l.name, err)
	}
	return fmt.Errorf("%s: the text holds more than the %d elements of its shape", l.name, l.k)
}

// lineIndex is where each line of a string dataset's text starts, and where the last ends:
// 4 bytes a line (8 for texts of 4 GiB or more), no more than the text itself (a line is at
// least `""` and its newline).
type lineIndex struct {
	small []uint32
	large []int64
}

// offset is where line k starts (the text's end for k past the last line).
func (x *lineIndex) offset(k int64) int64 {
	if x.large != nil {
		return x.large[min(k, int64(len(x.large))-1)]
	}
	return int64(x.small[min(k, int64(len(x.small))-1)])
}

type lineIndexKey struct{}

// linesOf is d's lineIndex, made once and kept with d (versions.Dataset.Derived): the
// chunks DiffDataset compares are then read as byte ranges of the text instead of
// splitting the whole text for each.
func linesOf(d *versions.Dataset) (*lineIndex, error) {
	v, err := d.Derived(lineIndexKey{}, func() (any, error) {
		return indexLines(d.Path, io.NewSectionReader(d, 0, d.Size()), d.Size())
	})
	if err != nil {
		return nil, err
	}
	return v.(*lineIndex), nil
}

// indexLines indexes the lines of text, of size bytes.
func indexLines(name string, text io.Reader, size int64) (*lineIndex, error) {
	x := &lineIndex{}
	big := size > math.MaxUint32
	r := bufio.NewReaderSize(text, 64<<10)
	off := int64(0)
	for {
		if big {
			x.large = append(x.large, off)
		} else {
			x.small = append(x.small, uint32(off))
		}
		b, err := r.ReadSlice('\n')
		n := len(b)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = r.ReadSlice('\n')
			n += len(b)
		}
		off += int64(n)
		switch {
		case errors.Is(err, io.EOF) && n > 0:
			return nil, fmt.Errorf("%s: the text's last line has no newline", name)
		case errors.Is(err, io.EOF):
			return x, nil
		case err != nil:
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
}
