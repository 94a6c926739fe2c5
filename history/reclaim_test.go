package history

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/versions"
)

// TestReclaimer: bodies written through the committer leave their data groups pending;
// the reclaimer does not run while a handle's changes are pinned, and Flush then Close
// make the file versioned-hdf5's deletion of the set, nothing left pending.
func TestReclaimer(t *testing.T) {
	for _, finish := range []string{"flush", "close"} {
		t.Run(finish, func(t *testing.T) {
			dir := fixture.Dir()
			file := fixture.Copy(t, filepath.Join(dir, "golden_delete_several-before.h5"))
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			defer f.Close()
			c, err := commit.Open(f, commit.Options{StageMem: mountopts.DefaultStageMem})
			require.NoError(t, err)
			defer c.Close()
			r := NewReclaimer(c, nil)
			r.quiet = 1 << 40 // no timed run: the test runs it
			for _, v := range []string{"v2", "v4", "v5"} {
				require.NoError(t, c.Rewrite(func(f *versions.File) error {
					_, err := lifecycle.DeleteBody(f, []string{v})
					return err
				}))
				r.Deleted()
			}
			pending, err := lifecycle.Pending(file)
			require.NoError(t, err)
			require.NotEmpty(t, pending)

			unpin := c.Pin("v3")
			require.True(t, r.run(false), "a pinned version defers the reclaim")
			pinned, err := lifecycle.Pending(file)
			require.NoError(t, err)
			require.Equal(t, pending, pinned)
			unpin()

			switch finish {
			case "flush":
				r.Flush()
				_, err = os.Stat(lifecycle.PendingPath(file))
				require.ErrorIs(t, err, os.ErrNotExist)
				r.Close() // nothing left: writes nothing
			case "close":
				r.Close()
				require.False(t, r.run(false), "no timed run after Close")
			}
			_, err = os.Stat(lifecycle.PendingPath(file))
			require.ErrorIs(t, err, os.ErrNotExist)
			c.Close()
			require.NoError(t, f.Close())
			require.NoError(t, conform.Files(file, filepath.Join(dir, "golden_delete_several-after.h5")))
		})
	}
}

// TestReclaimerUnreadablePending: a pending set that cannot be read is logged and tried
// again later; nothing is written meanwhile.
func TestReclaimerUnreadablePending(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_middle-before.h5"))
	require.NoError(t, os.WriteFile(lifecycle.PendingPath(file), []byte("{not json"), 0o644))
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	c, err := commit.Open(f, commit.Options{StageMem: mountopts.DefaultStageMem})
	require.NoError(t, err)
	r := NewReclaimer(c, nil)
	require.True(t, r.run(false), "tried again later")
	r.Close()
	c.Close()
	require.NoError(t, f.Close())
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
}
