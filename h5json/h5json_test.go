package h5json

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
)

func TestJSONForms(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"nan", Float(math.NaN()), `"NaN"`},
		{"inf", Float(math.Inf(1)), `"Infinity"`},
		{"-inf", Float(math.Inf(-1)), `"-Infinity"`},
		{"float", Float(1.5), `1.5`},
		{"no html escaping", "<f8", `"<f8"`},
		{"nested attr", Attr(h5.Attr{Value: []int64{1, 2, 3, 4}, Shape: []int64{2, 2}}), `[[1,2],[3,4]]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.v)
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

// TestFillText: fill values in messages read as values, not as their bytes.
func TestFillText(t *testing.T) {
	f8 := func(f float64) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		return b
	}
	f4 := make([]byte, 4)
	binary.LittleEndian.PutUint32(f4, math.Float32bits(0.1))
	for _, tc := range []struct {
		dtype string
		fill  []byte
		want  string
	}{
		{"<f8", []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, "NaN"},
		{"<f8", f8(0), "0"},
		{"<f8", f8(-1.5), "-1.5"},
		{"<f8", f8(math.Inf(-1)), "-Infinity"},
		{"<f4", f4, "0.1"},
		{">i2", []byte{0xff, 0xfe}, "-2"},
		{"<u8", []byte{255, 255, 255, 255, 255, 255, 255, 255}, "18446744073709551615"},
		{"|b1", []byte{1}, "true"},
		{"<c16", append(f8(1.5), f8(-2)...), "1.5-2j"},
		{"|S4", []byte("ab\x00\x00"), `"ab"`},
		{"|S2", []byte{0, 0}, `""`},
		{"|V2", []byte{0xab, 0xcd}, "0xabcd"},
	} {
		t.Run(tc.dtype+"/"+tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, FillText(tc.dtype, tc.fill))
		})
	}
}
