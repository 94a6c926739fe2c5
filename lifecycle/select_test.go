package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/versions"
)

func TestSelect(t *testing.T) {
	day := func(d int) string {
		return time.Date(2024, 1, d, 0, 0, 0, 0, time.UTC).Format("2006-01-02 15:04:05.000000-0700")
	}
	// a..e one a day; f shares e's timestamp (ties go by name); c is current.
	vs := []versions.Version{{Name: "e", Timestamp: day(5)}, {Name: "a", Timestamp: day(1)}, {Name: "f", Timestamp: day(5)},
		{Name: "b", Timestamp: day(2)}, {Name: "c", Timestamp: day(3)}, {Name: "d", Timestamp: day(4)}}
	for _, tc := range []struct {
		name    string
		current string
		p       Policy
		want    []string
	}{
		{"keep last 2", "f", Policy{KeepLast: 2}, []string{"a", "b", "c", "d"}},
		{"keep last 2, current older", "c", Policy{KeepLast: 2}, []string{"a", "b", "d"}},
		{"keep last all", "f", Policy{KeepLast: 9}, nil},
		{"keep every 2", "f", Policy{KeepEvery: 2}, []string{"a", "c", "e"}},
		{"keep every 2, current c", "c", Policy{KeepEvery: 2}, []string{"a", "e"}},
		{"keep every 1", "f", Policy{KeepEvery: 1}, nil},
		{"before day 3", "f", Policy{Before: time.Date(2024, 1, 3, 0, 0, 0, 0, time.UTC)}, []string{"a", "b"}},
		{"before day 4, current c", "c", Policy{Before: time.Date(2024, 1, 4, 0, 0, 0, 0, time.UTC)}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Select(vs, tc.current, tc.p))
		})
	}
}
