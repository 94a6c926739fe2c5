package versions

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

func TestParseTime(t *testing.T) {
	want := time.Date(2024, 1, 1, 2, 30, 0, 0, time.UTC)
	for _, s := range []string{"2024-01-01 02:30:00", "2024-01-01T02:30:00Z", "2024-01-01 02:30:00.000000+0000",
		"2024-01-01 03:30:00+01:00", "2024-01-01 02:30", "2024-01-01T02:30Z", "2024-01-01T03:30+01:00", "2024-01-01T02:30"} {
		got, err := ParseTime(s)
		require.NoError(t, err, s)
		require.True(t, want.Equal(got), "%s: %v", s, got)
	}
	_, err := ParseTime("yesterday")
	require.ErrorContains(t, err, `"yesterday"`)
	require.Equal(t, "2024-01-01 02:30:00.000000+0000", CanonicalTimestamp(want))
}

// TestVersionAt checks versioned-hdf5's rule against a brute-force reading of each
// manifest: an exact timestamp gives its version, a time between timestamps the newest
// version strictly before it, a time before every version none.
func TestVersionAt(t *testing.T) {
	manifests, err := fixture.All()
	require.NoError(t, err)
	for _, m := range manifests {
		t.Run(m.File, func(t *testing.T) {
			f, err := Open(m.H5)
			require.NoError(t, err)
			defer f.Close()
			expect := func(at time.Time) (string, bool) {
				best, bestT := "", time.Time{}
				for _, mv := range m.Versions {
					vt := Version{Timestamp: mv.Timestamp}.Time()
					if mv.Timestamp == CanonicalTimestamp(at) {
						return mv.Name, true
					}
					if vt.Before(at) && (best == "" || vt.After(bestT) || (vt.Equal(bestT) && mv.Name > best)) {
						best, bestT = mv.Name, vt
					}
				}
				return best, best != ""
			}
			for _, mv := range m.Versions {
				vt := Version{Timestamp: mv.Timestamp}.Time()
				for _, at := range []time.Time{vt, vt.Add(-time.Microsecond), vt.Add(30 * time.Minute)} {
					name, ok := expect(at)
					v, gotOK, err := f.VersionAt(at)
					require.NoError(t, err)
					require.Equal(t, ok, gotOK, "at %v", at)
					require.Equal(t, name, v.Name, "at %v", at)
				}
			}
		})
	}
	f, err := Open(filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, err)
	defer f.Close()
	for _, tc := range []struct {
		at   string
		want string
	}{
		{"2024-01-01 02:30:00", "v3"},
		{"2024-01-01 02:00:00", "v3"},
		{"2024-01-01 01:59:59", "v2"},
		{"2030-01-01", "v4"},
		{"2023-12-31 23:59:59", ""},
	} {
		at, err := ParseTime(tc.at)
		require.NoError(t, err)
		v, ok, err := f.VersionAt(at)
		require.NoError(t, err)
		require.Equal(t, tc.want != "", ok, tc.at)
		require.Equal(t, tc.want, v.Name, tc.at)
	}
}
