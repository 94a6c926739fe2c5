package modify

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func f8(x float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(x)) }
func f4(x float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)) }
func i4(x int32) []byte   { return binary.LittleEndian.AppendUint32(nil, uint32(x)) }
func i8(x int64) []byte   { return binary.LittleEndian.AppendUint64(nil, uint64(x)) }

// TestConvert: numpy's astype for the casts modify_metadata makes, then the old fill
// value replaced by the new one.
func TestConvert(t *testing.T) {
	for _, c := range []struct {
		name, from, to   string
		oldFill, newFill []byte // in to's bytes; nil: no replacement
		in, want         []byte
	}{
		{"f8 to f4 rounds", "<f8", "<f4", nil, nil, f8(0.1), f4(0.1)},
		{"f8 to f4 overflows to inf", "<f8", "<f4", nil, nil, f8(1e300), f4(float32(math.Inf(1)))},
		{"f8 to i4 truncates toward zero", "<f8", "<i4", nil, nil, f8(-2.7), i4(-2)},
		{"i8 to i4 wraps", "<i8", "<i4", nil, nil, i8(1<<32 + 5), i4(5)},
		{"i4 to f8", "<i4", "<f8", nil, nil, i4(-7), f8(-7)},
		{"f8 to bool", "<f8", "|b1", nil, nil, f8(math.NaN()), []byte{1}},
		{"i8 to big-endian i8", "<i8", ">i8", nil, nil, i8(1), []byte{0, 0, 0, 0, 0, 0, 0, 1}},
		{"fill replaced", "<f8", "<f8", f8(0), f8(-1), f8(0), f8(-1)},
		{"negative zero is the fill", "<f8", "<f8", f8(0), f8(-1), f8(math.Copysign(0, -1)), f8(-1)},
		{"others kept", "<f8", "<f8", f8(0), f8(-1), f8(3), f8(3)},
		{"NaN fill replaces nothing", "<f8", "<f8", f8(math.NaN()), f8(-1), f8(math.NaN()), f8(math.NaN())},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, err := parseType(c.from)
			require.NoError(t, err)
			to, err := parseType(c.to)
			require.NoError(t, err)
			// oldFill is given in to's dtype here: convert it back only for same-dtype cases.
			conv, err := newConverter(from, to, c.oldFill, c.newFill, c.oldFill != nil)
			require.NoError(t, err)
			out := make([]byte, to.size)
			conv.run(out, c.in, 1)
			require.Equal(t, c.want, out)
		})
	}
	_, err := newConverter(elemType{dtype: "|S4", kind: 'S', size: 4}, elemType{dtype: "<f8", kind: 'f', size: 8}, nil, nil, false)
	require.ErrorContains(t, err, "only integers, floats and bool convert")
}
