package inspect

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/versions"
)

// ElementDiff is the element-level comparison of one dataset between two versions, read
// from the chunks DiffDataset found different: how many elements changed and the range of
// their old and new values (numeric dtypes and variable-length strings).
type ElementDiff struct {
	Compared int64 // elements in both versions' shapes
	Changed  int64 // of Compared, the ones whose bytes (strings: decoded values) differ
	Added    int64 // elements only in the newer shape
	Removed  int64 // elements only in the older shape
	// Old and New range over the changed elements; AddedRange and RemovedRange over the
	// added and removed ones. Empty for dtypes without an order (compounds, fixed bytes).
	Old, New, AddedRange, RemovedRange ValueRange
	// Incomparable: the dtype or the number of axes changed, so no element corresponds.
	Incomparable bool
	// Strings: variable-length strings, compared by value; the ranges are of strings.
	Strings bool
}

// elemBatch bounds the bytes of changed chunks DiffElements reads from one version before
// it reads them from the other: one version's chunk map is held at a time (see release),
// so each batch loads each map once.
const elemBatch = 32 << 20

// DiffElements compares dd's differing chunks element by element (dd from DiffDataset of
// the same versions). Only those chunks are read: a batch of them from v2, then from v1.
func DiffElements(f *versions.File, v1, v2 string, dd DatasetDiff) (ElementDiff, error) {
	var ed ElementDiff
	if dd.Kind != Modified {
		ed.Compared = count(dd.Shape2)
		return ed, nil
	}
	// v2's dataset first, for its shape and type: DiffDataset left it in f's cache.
	d2, err := f.VersionDataset(v2, dd.Path)
	if err != nil {
		return ed, err
	}
	shape2, dtype2, strings2 := d2.Shape, d2.Type.DType, d2.Strings
	if len(shape2) > 0 && !strings2 { // strings compare with both texts at hand
		n := gridChunks(d2.Shape, d2.Chunks)
		d2 = nil
		release(f, v2, n)
	}
	d1, err := f.VersionDataset(v1, dd.Path)
	if err != nil {
		return ed, err
	}
	if d1.Type.DType != dtype2 || len(d1.Shape) != len(shape2) || d1.Strings != strings2 {
		ed.Incomparable = true
		return ed, nil
	}
	if d1.Strings { // both texts are held whole by their Datasets anyway
		err := diffStrings(d1, d2, &ed)
		return ed, err
	}
	shape1 := d1.Shape
	overlap := make([]int64, len(shape1))
	for i := range overlap {
		overlap[i] = min(shape1[i], shape2[i])
	}
	ed.Compared = count(overlap)
	ed.Added = count(shape2) - ed.Compared
	ed.Removed = count(shape1) - ed.Compared
	kind := valueKind(dtype2)
	for _, r := range []*ValueRange{&ed.Old, &ed.New, &ed.AddedRange, &ed.RemovedRange} {
		r.kind = kind
		r.setOrder(dtype2)
	}
	isz := int64(d1.Type.Size)
	if len(shape1) == 0 {
		if dd.NumChanged() > 0 { // scalars: one element (no chunk map was let go)
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
	d1, d2 = nil, nil // loaded batch by batch below
	// A chunk's box in both versions: its Stop is one version's extent only.
	box := func(ch ChunkChange) []int64 {
		stop := make([]int64, len(ch.Start))
		for i := range stop {
			stop[i] = max(shape1[i], shape2[i])
			if ch.Grid != nil && dd.Chunks != nil {
				stop[i] = min(stop[i], ch.Start[i]+dd.Chunks[i])
			}
		}
		return stop
	}
	// Batches of changes, [from, to) in the order of Changes, of up to elemBatch bytes.
	from, size, total := 0, int64(0), dd.NumChanged()
	var bounds [][2]int
	i := 0
	for ch := range dd.Changes() {
		ext := sub(box(ch), ch.Start)
		size += count(ext[:len(ext)-1]) * (ext[len(ext)-1]*isz + 4) // the bytes, each row's length
		if i++; size >= elemBatch || i == total {
			bounds = append(bounds, [2]int{from, i})
			from, size = i, 0
		}
	}
	for _, bd := range bounds {
		batch := dd.changesIn(bd[0], bd[1])
		a, err := readRows(f, v1, dd.Path, batch, box)
		if err != nil {
			return ed, err
		}
		b, err := readRows(f, v2, dd.Path, batch, box)
		if err != nil {
			return ed, err
		}
		offA, offB := int64(0), int64(0)
		for r := range a.lens {
			ra, rb := a.row(r, &offA), b.row(r, &offB)
			for k := int64(0); ; k++ {
				ea, eb := elemAt(ra, k, isz), elemAt(rb, k, isz)
				switch {
				case ea == nil && eb == nil:
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
				if ea == nil && eb == nil {
					break
				}
			}
		}
	}
	return ed, nil
}

func sub(a, b []int64) []int64 {
	out := make([]int64, len(a))
	for i := range a {
		out[i] = max(a[i]-b[i], 0)
	}
	return out
}

// rows is what readRows read: the rows of a batch of boxes, one after the other in data.
type rows struct {
	data []byte
	lens []int32 // bytes of each row; -1 for a row outside the dataset's shape
}

// row is row i, which starts at *off in data (rows are taken in order); *off moves past it.
func (r *rows) row(i int, off *int64) []byte {
	if r.lens[i] < 0 {
		return nil
	}
	b := r.data[*off : *off+int64(r.lens[i])]
	*off += int64(r.lens[i])
	return b
}

// readRows reads the boxes of batch (from each chunk's Start to box's stop) from version
// v's dataset rel, row by row along the last axis, then lets the dataset's chunk map go
// if it is big (see release).
func readRows(f *versions.File, v, rel string, batch iter.Seq[ChunkChange], box func(ChunkChange) []int64) (rows, error) {
	var out rows
	d, err := f.VersionDataset(v, rel)
	if err != nil {
		return out, err
	}
	for ch := range batch {
		err := eachRow(ch.Start, box(ch), func(row []int64, lo, hi int64) error {
			b, err := readRow(d, row, lo, hi)
			if err != nil {
				return err
			}
			switch {
			case b == nil:
				out.lens = append(out.lens, -1)
				return nil
			case len(b) > math.MaxInt32:
				return fmt.Errorf("%s: a row of %d bytes", d.Path, len(b))
			}
			out.lens = append(out.lens, int32(len(b)))
			out.data = append(out.data, b...)
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	n := gridChunks(d.Shape, d.Chunks)
	d = nil
	release(f, v, n)
	return out, nil
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
	kind     byte // 'f', 'i', 'u', 'b' (bool), 's' (strings, by code point) or 0: no order
	order    binary.ByteOrder
	n        int64
	fmin     float64
	fmax     float64
	imin     int64
	imax     int64
	umin     uint64
	umax     uint64
	smin     string
	smax     string
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
	u := h5json.Uint(r.order, e, len(e))
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

// addString adds a string value (kind 's'): Go orders strings by their UTF-8 bytes, which
// is the code point order numpy and Python compare str by.
func (r *ValueRange) addString(s string) {
	if r.n == 0 || s < r.smin {
		r.smin = s
	}
	if r.n == 0 || s > r.smax {
		r.smax = s
	}
	r.n++
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
// none was added; NaNs are noted. Strings are JSON strings.
func (r ValueRange) String() string {
	if r.kind == 0 || r.n == 0 {
		return ""
	}
	var lo, hi string
	switch {
	case r.kind == 's':
		lo, hi = jsonString(r.smin), jsonString(r.smax)
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

// jsonString is s as a JSON string, spelled as the text of a string dataset spells it
// (versions.TextForm: no HTML escapes).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil { // cannot fail for a string
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
