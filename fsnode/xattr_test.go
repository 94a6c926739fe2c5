package fsnode

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseShape: user.vh5fs.shape takes a JSON list of integers; the rank and the
// lengths are the dataset's to check.
func TestParseShape(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int64
		ok   bool
	}{
		{"[3, 0, 7]", []int64{3, 0, 7}, true},
		{"[]", []int64{}, true},
		{"[-1]", []int64{-1}, true},
		{"[1,", nil, false},
		{`"3"`, nil, false},
		{"[1.5]", nil, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseShape([]byte(tc.in))
			if !tc.ok {
				require.ErrorIs(t, err, syscall.EINVAL)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
