package modify

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// TestStringCasts: casts between strings and numbers, and a string fill value, are
// refused in one line naming both dtypes, before anything is written.
func TestStringCasts(t *testing.T) {
	str := fixture.Copy(t, "../tests/testdata/fixtures/modify/golden_modify_str_1d-before.h5")
	_, err := File(str, "names", Options{DType: "<f8"}, false)
	require.ErrorContains(t, err, "--dtype <f8: names holds variable-length strings (O); casts between strings and numbers are not supported")
	_, err = File(str, "names", Options{FillValue: "x"}, false)
	require.ErrorIs(t, err, ErrUnsupported)
	num := fixture.Copy(t, "../tests/testdata/fixtures/modify/golden_modify_rechunk_1d-before.h5")
	_, err = File(num, "x", Options{DType: "O"}, false)
	require.ErrorContains(t, err, "--dtype O: x holds <f8 numbers; casts between numbers and variable-length strings are not supported")
	res, err := File(str, "names", Options{Chunks: []int64{5}, Compression: "gzip", GzipLevel: -1}, true)
	require.NoError(t, err)
	require.Equal(t, []string{"chunks (4,) -> (5,)", "compression none -> gzip=4"}, res.Changes())
}
