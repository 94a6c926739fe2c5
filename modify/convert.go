package modify

// Element conversion for a dtype change and fill-value replacement, as
// modify_metadata does them with numpy: np.asarray(data, dtype=new) (a C cast per
// element: integers truncated to the new width, floats rounded to the nearest, floats to
// integers toward zero, anything to bool as != 0), then every element equal to the old
// fill value (compared in the new dtype, so NaN never is, and -0.0 is 0.0) set to the new
// one.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
)

// elemType is a numpy dtype string DataSpec accepts, parsed.
type elemType struct {
	dtype string
	kind  byte // 'i', 'u', 'f', 'c', 'b', 'S'
	order binary.ByteOrder
	size  int
}

func parseType(dtype string) (elemType, error) {
	size, err := h5.ItemSize(dtype)
	if err != nil {
		return elemType{}, err
	}
	var order binary.ByteOrder = binary.LittleEndian
	if dtype[0] == '>' {
		order = binary.BigEndian
	}
	return elemType{dtype: dtype, kind: dtype[1], order: order, size: size}, nil
}

// number is one element's value: an integer (signed or not) or a float.
type number struct {
	i       int64
	u       uint64
	f       float64
	isFloat bool
	signed  bool
}

func (t elemType) load(b []byte) number {
	switch t.kind {
	case 'f':
		if t.size == 4 {
			return number{f: float64(math.Float32frombits(t.order.Uint32(b))), isFloat: true}
		}
		return number{f: math.Float64frombits(t.order.Uint64(b)), isFloat: true}
	case 'b':
		return number{u: uint64(b[0])}
	case 'i':
		shift := 64 - 8*t.size // sign extension
		return number{i: int64(h5json.Uint(t.order, b, t.size)<<shift) >> shift, signed: true}
	default: // 'u'
		return number{u: h5json.Uint(t.order, b, t.size)}
	}
}

func (t elemType) store(b []byte, n number) {
	switch t.kind {
	case 'f':
		var f64 float64
		var f32 float32
		switch {
		case n.isFloat:
			f64, f32 = n.f, float32(n.f)
		case n.signed:
			f64, f32 = float64(n.i), float32(n.i) // one rounding each, as C's casts
		default:
			f64, f32 = float64(n.u), float32(n.u)
		}
		if t.size == 4 {
			t.order.PutUint32(b, math.Float32bits(f32))
		} else {
			t.order.PutUint64(b, math.Float64bits(f64))
		}
		return
	case 'b':
		nz := n.i != 0 || n.u != 0
		if n.isFloat {
			nz = n.f != 0 // NaN is true, as in numpy
		}
		b[0] = 0
		if nz {
			b[0] = 1
		}
		return
	}
	var bits uint64
	switch {
	case n.isFloat && t.kind == 'u':
		bits = uint64(n.f)
	case n.isFloat:
		bits = uint64(int64(n.f))
	case n.signed:
		bits = uint64(n.i)
	default:
		bits = n.u
	}
	switch t.size {
	case 1:
		b[0] = byte(bits)
	case 2:
		t.order.PutUint16(b, uint16(bits))
	case 4:
		t.order.PutUint32(b, uint32(bits))
	default:
		t.order.PutUint64(b, bits)
	}
}

// numeric kinds convert into each other; complex and fixed bytes only keep their dtype.
func numeric(k byte) bool { return k == 'i' || k == 'u' || k == 'f' || k == 'b' }

// converter turns elements of from into elements of to, replacing the old fill value
// (oldFill, in from's bytes) with newFill (in to's bytes) when replace is set.
type converter struct {
	from, to     elemType
	replace      bool
	oldFill      []byte // the old fill value converted to `to`
	newFill      []byte
	same         bool // no dtype change: elements are copied
	floatCompare bool // equality by value (to is a float type)
}

func newConverter(from, to elemType, oldFill, newFill []byte, replace bool) (*converter, error) {
	c := &converter{from: from, to: to, newFill: newFill, same: from.dtype == to.dtype}
	if !c.same && !(numeric(from.kind) && numeric(to.kind)) {
		return nil, fmt.Errorf("dtype %s cannot become %s: only integers, floats and bool convert", from.dtype, to.dtype)
	}
	if replace {
		c.oldFill = make([]byte, to.size)
		c.convert(c.oldFill, oldFill)
		c.floatCompare = to.kind == 'f'
		// Nothing equals NaN: a NaN old fill replaces nothing (numpy's ==).
		c.replace = !(c.floatCompare && math.IsNaN(to.load(c.oldFill).f))
	}
	return c, nil
}

// identity reports whether elements are copied as they are.
func (c *converter) identity() bool { return c.same && !c.replace }

// convert converts one element.
func (c *converter) convert(dst, src []byte) {
	if c.same {
		copy(dst, src)
	} else {
		c.to.store(dst, c.from.load(src))
	}
}

// run converts n elements of src into dst.
func (c *converter) run(dst, src []byte, n int) {
	if c.identity() {
		copy(dst[:n*c.to.size], src)
		return
	}
	fs, ts := c.from.size, c.to.size
	for k := range n {
		d := dst[k*ts : (k+1)*ts]
		c.convert(d, src[k*fs:(k+1)*fs])
		if c.replace && c.isOldFill(d) {
			copy(d, c.newFill)
		}
	}
}

func (c *converter) isOldFill(e []byte) bool {
	if c.floatCompare {
		return c.to.load(e).f == c.to.load(c.oldFill).f
	}
	return string(e) == string(c.oldFill)
}

// parseFill reads a fill value given as text in t's bytes: a number for numeric types
// (true/false for bool), the bytes themselves (NUL-padded) for fixed bytes.
func parseFill(t elemType, s string) ([]byte, error) {
	b := make([]byte, t.size)
	bad := func(why string) ([]byte, error) {
		return nil, fmt.Errorf("%q: %s for dtype %s", s, why, t.dtype)
	}
	// numErr tells a number out of the dtype's range from text that is no number.
	numErr := func(err error, what string) ([]byte, error) {
		if errors.Is(err, strconv.ErrRange) {
			return bad("out of range")
		}
		return bad("not " + what)
	}
	switch t.kind {
	case 'f':
		f, err := strconv.ParseFloat(s, t.size*8)
		if err != nil {
			return numErr(err, "a number")
		}
		t.store(b, number{f: f, isFloat: true})
	case 'i':
		i, err := strconv.ParseInt(s, 10, t.size*8)
		if err != nil {
			return numErr(err, "an integer")
		}
		t.store(b, number{i: i, signed: true})
	case 'u':
		u, err := strconv.ParseUint(s, 10, t.size*8)
		if err != nil {
			return numErr(err, "a non-negative integer")
		}
		t.store(b, number{u: u})
	case 'b':
		switch strings.ToLower(s) {
		case "true", "1":
			b[0] = 1
		case "false", "0":
		default:
			return bad("not true, false, 1 or 0")
		}
	case 'S':
		if len(s) > t.size {
			return bad(fmt.Sprintf("longer than %d bytes", t.size))
		}
		copy(b, s)
	default:
		return bad("no fill value can be given")
	}
	return b, nil
}

// fillEqual reports whether two fill values of t are equal as numpy compares them.
func fillEqual(t elemType, a, b []byte) bool {
	if t.kind == 'f' {
		return t.load(a).f == t.load(b).f
	}
	return string(a) == string(b)
}
