package inspect

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/vh5fs/vh5fs/versions"
)

// ElementDiff is the element-level comparison of one dataset between two versions, read
// from the chunks DiffDataset found different: how many elements changed and the range of
// their old and new values (numeric dtypes only).
type ElementDiff struct {
	Compared int64 // elements in both versions' shapes
	Changed  int64 // of Compared, the ones whose bytes differ
	Added    int64 // elements only in the newer shape
	Removed  int64 // elements only in the older shape
	// Old and New range over the changed elements; AddedRange and RemovedRange over the
	// added and removed ones. Empty for dtypes without an order (strings, compounds).
	Old, New, AddedRange, RemovedRange ValueRange
	// Incomparable: the dtype or the number of axes changed, so no element corresponds.
	Incomparable bool
}

// DiffElements compares dd's differing chunks element by element (dd from DiffDataset of
// the same versions). Only those chunks are read.
func DiffElements(f *versions.File, v1, v2 string, dd DatasetDiff) (ElementDiff, error) {
	var ed ElementDiff
	if dd.Kind != Modified {
		ed.Compared = count(dd.Shape2)
		return ed, nil
	}
	d1, err := f.VersionDataset(v1, dd.Path)
	if err != nil {
		return ed, err
	}
	d2, err := f.VersionDataset(v2, dd.Path)
	if err != nil {
		return ed, err
	}
	if d1.Type.DType != d2.Type.DType || len(d1.Shape) != len(d2.Shape) || d1.Strings || d2.Strings {
		ed.Incomparable = d1.Type.DType != d2.Type.DType || len(d1.Shape) != len(d2.Shape)
		if !ed.Incomparable { // variable-length strings: whole texts differ, not elements
			ed.Compared = min(count(d1.Shape), count(d2.Shape))
		}
		return ed, nil
	}
	overlap := make([]int64, len(d1.Shape))
	for i := range overlap {
		overlap[i] = min(d1.Shape[i], d2.Shape[i])
	}
	ed.Compared = count(overlap)
	ed.Added = count(d2.Shape) - ed.Compared
	ed.Removed = count(d1.Shape) - ed.Compared
	kind := valueKind(d1.Type.DType)
	for _, r := range []*ValueRange{&ed.Old, &ed.New, &ed.AddedRange, &ed.RemovedRange} {
		r.kind = kind
		r.setOrder(d1.Type.DType)
	}
	isz := int64(d1.Type.Size)
	for _, ch := range dd.Changed {
		if len(d1.Shape) == 0 {
			break
		}
		// A chunk's box in both versions: its Stop is one version's extent only.
		stop := make([]int64, len(ch.Start))
		for i := range stop {
			stop[i] = max(d1.Shape[i], d2.Shape[i])
			if ch.Grid != nil && dd.Chunks != nil {
				stop[i] = min(stop[i], ch.Start[i]+dd.Chunks[i])
			}
		}
		err := eachRow(ch.Start, stop, func(row []int64, lo, hi int64) error {
			a, err := readRow(d1, row, lo, hi)
			if err != nil {
				return err
			}
			b, err := readRow(d2, row, lo, hi)
			if err != nil {
				return err
			}
			for k := int64(0); k < hi-lo; k++ {
				ea, eb := elemAt(a, k, isz), elemAt(b, k, isz)
				switch {
				case ea != nil && eb != nil:
					if !bytes.Equal(ea, eb) {
						ed.Changed++
						ed.Old.add(ea)
						ed.New.add(eb)
					}
				case eb != nil:
					ed.AddedRange.add(eb)
				case ea != nil:
					ed.RemovedRange.add(ea)
				}
			}
			return nil
		})
		if err != nil {
			return ed, err
		}
	}
	if len(d1.Shape) == 0 && len(dd.Changed) > 0 { // scalars: one element
		a, b := make([]byte, isz), make([]byte, isz)
		if _, err := d1.ReadAt(a, 0); err != nil {
			return ed, err
		}
		if _, err := d2.ReadAt(b, 0); err != nil {
			return ed, err
		}
		if !bytes.Equal(a, b) {
			ed.Changed, ed.Compared = 1, 1
			ed.Old.add(a)
			ed.New.add(b)
		}
	}
	return ed, nil
}

func count(shape []int64) int64 {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	return n
}

// eachRow calls fn for every row of the box [start, stop) along the last axis: row is
// the index on the other axes (row[last] unused), [lo, hi) the range on the last.
func eachRow(start, stop []int64, fn func(row []int64, lo, hi int64) error) error {
	n := len(start)
	for i := range start {
		if stop[i] <= start[i] {
			return nil
		}
	}
	idx := slices.Clone(start)
	for {
		if err := fn(idx, start[n-1], stop[n-1]); err != nil {
			return err
		}
		i := n - 2
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < stop[i] {
				break
			}
			idx[i] = start[i]
		}
		if i < 0 {
			return nil
		}
	}
}

// readRow reads the elements [lo, hi) of a row of d as far as d's shape reaches; nil when
// the row is outside it.
func readRow(d *versions.Dataset, row []int64, lo, hi int64) ([]byte, error) {
	n := len(d.Shape)
	off := int64(0)
	for i := 0; i < n-1; i++ {
		if row[i] >= d.Shape[i] {
			return nil, nil
		}
		off = off*d.Shape[i] + row[i]
	}
	hi = min(hi, d.Shape[n-1])
	if hi <= lo {
		return nil, nil
	}
	isz := int64(d.Type.Size)
	off = (off*d.Shape[n-1] + lo) * isz
	buf := make([]byte, (hi-lo)*isz)
	got, err := d.ReadAt(buf, off)
	if err != nil {
		return nil, err
	}
	if int64(got) != int64(len(buf)) {
		return nil, fmt.Errorf("%s: short read at %d: %d of %d bytes", d.Path, off, got, len(buf))
	}
	return buf, nil
}

func elemAt(row []byte, k, isz int64) []byte {
	if (k+1)*isz > int64(len(row)) {
		return nil
	}
	return row[k*isz : (k+1)*isz]
}

// ValueRange is the smallest and largest of the values added to it.
type ValueRange struct {
	kind     byte // 'f', 'i', 'u', 'b' (bool) or 0: no order
	order    binary.ByteOrder
	n        int64
	fmin     float64
	fmax     float64
	imin     int64
	imax     int64
	umin     uint64
	umax     uint64
	sawNaN   bool
	notEmpty bool
}

// valueKind is the kind of a numpy dtype string's values (0 when they have no order).
func valueKind(dtype string) byte {
	if len(dtype) < 3 {
		return 0
	}
	size, err := strconv.Atoi(dtype[2:])
	if err != nil {
		return 0
	}
	switch k := dtype[1]; {
	case k == 'f' && (size == 4 || size == 8):
		return 'f'
	case (k == 'i' || k == 'u') && (size == 1 || size == 2 || size == 4 || size == 8):
		return k
	case k == 'b' && size == 1:
		return 'u'
	}
	return 0
}

func (r *ValueRange) add(e []byte) {
	r.n++
	if r.kind == 0 {
		return
	}
	if r.order == nil {
		r.order = binary.LittleEndian
	}
	var u uint64
	switch len(e) {
	case 1:
		u = uint64(e[0])
	case 2:
		u = uint64(r.order.Uint16(e))
	case 4:
		u = uint64(r.order.Uint32(e))
	case 8:
		u = r.order.Uint64(e)
	}
	first := !r.notEmpty
	r.notEmpty = true
	switch r.kind {
	case 'f':
		v := math.Float64frombits(u)
		if len(e) == 4 {
			v = float64(math.Float32frombits(uint32(u)))
		}
		if math.IsNaN(v) {
			r.sawNaN = true
			return
		}
		if first || v < r.fmin {
			r.fmin = v
		}
		if first || v > r.fmax {
			r.fmax = v
		}
	case 'i':
		shift := 64 - 8*uint(len(e))
		v := int64(u<<shift) >> shift // sign-extend
		if first || v < r.imin {
			r.imin = v
		}
		if first || v > r.imax {
			r.imax = v
		}
	case 'u':
		if first || u < r.umin {
			r.umin = u
		}
		if first || u > r.umax {
			r.umax = u
		}
	}
}

// setOrder takes the byte order of the dtype's elements ('>' big-endian, else little).
func (r *ValueRange) setOrder(dtype string) {
	if len(dtype) > 0 && dtype[0] == '>' {
		r.order = binary.BigEndian
	} else {
		r.order = binary.LittleEndian
	}
}

// String is "lo..hi", a single value when lo == hi, "" when the values have no order or
// none was added; NaNs are noted.
func (r ValueRange) String() string {
	if r.kind == 0 || r.n == 0 {
		return ""
	}
	var lo, hi string
	switch {
	case r.kind == 'f' && !r.notEmpty:
		return "NaN"
	case r.kind == 'f':
		lo, hi = strconv.FormatFloat(r.fmin, 'g', -1, 64), strconv.FormatFloat(r.fmax, 'g', -1, 64)
	case r.kind == 'i':
		lo, hi = strconv.FormatInt(r.imin, 10), strconv.FormatInt(r.imax, 10)
	default:
		lo, hi = strconv.FormatUint(r.umin, 10), strconv.FormatUint(r.umax, 10)
	}
	s := lo
	if hi != lo {
		s = lo + ".." + hi
	}
	if r.sawNaN {
		s += " and NaN"
	}
	return s
}
