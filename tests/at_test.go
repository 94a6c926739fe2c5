package tests

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAtDirectory: at/TIME is a link to the version current at TIME, in every form --at
// takes; times before the first version and names that are no time do not exist; at/
// lists nothing and nothing in it changes. basic_1d's versions v1..v4 are stamped
// 2024-01-01 00:00, 01:00, 02:00 and 03:00 UTC.
func TestAtDirectory(t *testing.T) {
	file := copyPath(t, fixturePath("basic_1d.h5"))
	for _, opts := range []string{"ro", "rw"} {
		t.Run(opts, func(t *testing.T) {
			m := mount(t, file, opts)
			defer m.unmount(t)
			at := filepath.Join(m.Dir, "at")
			for _, tc := range []struct{ name, want string }{
				{"2024-01-01T01:00Z", "v2"},               // a version's own timestamp
				{"2024-01-01 01:00:00.000000+0000", "v2"}, // the canonical form
				{"2024-01-01T01:30Z", "v2"},               // between two versions
				{"2024-01-01T03:30+01:00", "v3"},          // with a zone: 02:30 UTC
				{"2024-01-01T02:59:59.999999Z", "v3"},     // just before v4
				{"2030-06-01", "v4"},                      // a date alone, after the last
				{"2024-01-01T00:00:00.000000001Z", "v1"},  // the first, a moment after its stamp
			} {
				got, err := os.Readlink(filepath.Join(at, tc.name))
				require.NoError(t, err, tc.name)
				require.Equal(t, "../versions/"+tc.want, got, tc.name)
			}
			// The link leads to the version's tree.
			viaAt, err := os.ReadFile(filepath.Join(at, "2024-01-01T01:30Z", "x"))
			require.NoError(t, err)
			direct, err := os.ReadFile(filepath.Join(m.Dir, "versions", "v2", "x"))
			require.NoError(t, err)
			require.Equal(t, direct, viaAt)
			for _, name := range []string{"2023-12-31T23:59Z", "yesterday", "v2"} {
				_, err := os.Lstat(filepath.Join(at, name))
				require.ErrorIs(t, err, os.ErrNotExist, name)
			}
			ents, err := os.ReadDir(at)
			require.NoError(t, err)
			require.Empty(t, ents, "times are looked up, not listed")
			root, err := os.ReadDir(m.Dir)
			require.NoError(t, err)
			var names []string
			for _, e := range root {
				names = append(names, e.Name())
			}
			require.Contains(t, names, "at")
			want := syscall.EROFS
			if opts == "rw" {
				want = syscall.EPERM
			}
			require.ErrorIs(t, os.Mkdir(filepath.Join(at, "2024-01-01"), 0o755), os.ErrExist, "a time names its link")
			require.ErrorIs(t, os.Mkdir(filepath.Join(at, "release"), 0o755), want)
			require.ErrorIs(t, os.Symlink("../versions/v1", filepath.Join(at, "release")), want)
			require.ErrorIs(t, os.Remove(filepath.Join(at, "2024-01-01T01:30Z")), want)
		})
	}
}
