package decoded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStaging: a staging file counts against the limit while it exists, survives an Open
// while its holder has it, and is removed by the next Open once its holder is gone (as a
// crash leaves it).
func TestStaging(t *testing.T) {
	for _, tc := range []struct {
		name     string
		closeIt  bool // the holder closed it without removing it: a crash
		survives bool
	}{
		{"held", false, true},
		{"left by a crash", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Open(dir, 1<<20)
			require.NoError(t, err)
			defer c.Close()
			f, err := c.Staging()
			require.NoError(t, err)
			require.Equal(t, dir, filepath.Dir(f.Name()))
			_, err = f.WriteAt(data(600<<10, 1), 0)
			require.NoError(t, err)
			require.ErrorIs(t, c.evict(600<<10), ErrTooLarge, "the staging file's bytes count")
			if tc.closeIt {
				require.NoError(t, f.Close())
			} else {
				defer f.Close()
			}
			c2, err := Open(dir, 1<<20)
			require.NoError(t, err)
			defer c2.Close()
			_, err = os.Stat(f.Name())
			require.Equal(t, tc.survives, err == nil, "staging file after Open: %v", err)
		})
	}
}
