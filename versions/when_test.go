package versions

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/internal/timearg"
)

func TestCanonicalTimestamp(t *testing.T) {
	want := time.Date(2024, 1, 1, 2, 30, 0, 0, time.UTC)
	require.Equal(t, "2024-01-01 02:30:00.000000+0000", CanonicalTimestamp(want))
	require.Equal(t, "2024-01-01 02:30:00.000000+0000", CanonicalTimestamp(want.In(time.FixedZone("", 3600))))
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
		at, err := timearg.Parse(tc.at)
		require.NoError(t, err)
		v, ok, err := f.VersionAt(at)
		require.NoError(t, err)
		require.Equal(t, tc.want != "", ok, tc.at)
		require.Equal(t, tc.want, v.Name, tc.at)
	}
}
