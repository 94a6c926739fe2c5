// Package h5json renders HDF5 values as vh5fs writes them in JSON — attribute values, fill
// elements, floats (NaN and the infinities as strings) — and as messages show them: the
// one form that xattrs, stage specs, diffs and Zarr metadata share.
package h5json

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
)

// AttrText is the JSON text of an HDF5 attribute's value, as user.hdf5.* shows it.
func AttrText(a h5.Attr) ([]byte, error) { return Marshal(Attr(a)) }

// Marshal is json.Marshal without HTML escaping: "<f8" stays readable.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Attr is the JSON form of a decoded HDF5 attribute's value, as user.hdf5.* xattrs, stage
// specs, diffs and Zarr metadata carry it: arrays nest by shape; NaN and infinities become
// the strings "NaN", "Infinity", "-Infinity"; values of other types are {"dtype": ...,
// "bytes_b64": ...} in the file's byte order.
func Attr(a h5.Attr) any {
	var flat []any
	switch v := a.Value.(type) {
	case []string:
		flat = toAny(v)
	case []int64:
		flat = toAny(v)
	case []uint64:
		flat = toAny(v)
	case []bool:
		flat = toAny(v)
	case []float64:
		for _, f := range v {
			flat = append(flat, Float(f))
		}
	case float64:
		return Float(v)
	case []byte:
		return map[string]any{"dtype": a.Type.DType, "shape": a.Shape, "bytes_b64": base64.StdEncoding.EncodeToString(v)}
	default:
		return v
	}
	return nest(flat, a.Shape)
}

func toAny[T any](v []T) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

func nest(flat []any, shape []int64) any {
	if len(shape) <= 1 {
		if flat == nil {
			return []any{}
		}
		return flat
	}
	inner := int64(1)
	for _, s := range shape[1:] {
		inner *= s
	}
	out := make([]any, 0, shape[0])
	for i := int64(0); i < shape[0]; i++ {
		out = append(out, nest(flat[i*inner:(i+1)*inner], shape[1:]))
	}
	return out
}

// Float is f as vh5fs writes floats in JSON (xattrs, Zarr metadata): NaN and the
// infinities as the strings numpy and Zarr v2 use, which JSON numbers cannot hold.
func Float(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// Fill is the JSON form of a fill element b of numpy dtype dt, as user.vh5fs.fillvalue
// shows it: a number (NaN and the infinities as Float's strings), a bool, [re, im] for
// complex, {"bytes_b64": ...} for everything else.
func Fill(dt string, b []byte) any {
	if len(dt) < 3 || len(b) == 0 {
		return map[string]any{"bytes_b64": base64.StdEncoding.EncodeToString(b)}
	}
	var order binary.ByteOrder = binary.LittleEndian
	if dt[0] == '>' {
		order = binary.BigEndian
	}
	size, _ := strconv.Atoi(dt[2:])
	switch dt[1] {
	case 'b':
		return b[0] != 0
	case 'i', 'u':
		u := Uint(order, b, size)
		if dt[1] == 'u' {
			return u
		}
		shift := 64 - 8*size
		return int64(u<<shift) >> shift
	case 'f':
		switch size {
		case 4:
			return Float(float64(math.Float32frombits(order.Uint32(b))))
		case 8:
			return Float(math.Float64frombits(order.Uint64(b)))
		}
	case 'c':
		switch size {
		case 8:
			return []any{Float(float64(math.Float32frombits(order.Uint32(b)))), Float(float64(math.Float32frombits(order.Uint32(b[4:]))))}
		case 16:
			return []any{Float(math.Float64frombits(order.Uint64(b))), Float(math.Float64frombits(order.Uint64(b[8:])))}
		}
	}
	return map[string]any{"bytes_b64": base64.StdEncoding.EncodeToString(b)}
}

// FillText is a fill element b of numpy dtype dt as a message shows a value: 0, -1.5, NaN,
// Infinity, true, 1.5+2j, fixed-length bytes quoted ("", "abc"), and anything else as hex
// (0x...).
func FillText(dt string, b []byte) string {
	if len(dt) >= 3 && dt[1] == 'S' {
		return strconv.Quote(string(bytes.TrimRight(b, "\x00")))
	}
	bits := 64 // a float32's value in its shortest form: 0.1, not 0.10000000149011612
	if dt == "<f4" || dt == ">f4" || dt == "<c8" || dt == ">c8" {
		bits = 32
	}
	text := func(v any) string {
		switch x := v.(type) {
		case string:
			return x // NaN, Infinity, -Infinity
		case float64:
			return strconv.FormatFloat(x, 'g', -1, bits)
		}
		return fmt.Sprint(v)
	}
	switch v := Fill(dt, b).(type) {
	case map[string]any:
		return fmt.Sprintf("0x%x", b)
	case []any: // complex
		im := text(v[1])
		if !strings.HasPrefix(im, "-") {
			im = "+" + im
		}
		return text(v[0]) + im + "j"
	default:
		return text(v)
	}
}

// Uint is the integer element of size bytes (1, 2, 4 or 8; 0 for any other size) at the
// start of b, in order, unsigned: the one decode of an integer (or bool) element that
// values, diffs and dtype conversions share; a signed element is its sign extension.
func Uint(order binary.ByteOrder, b []byte, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(order.Uint16(b))
	case 4:
		return uint64(order.Uint32(b))
	case 8:
		return order.Uint64(b)
	}
	return 0
}
