package history_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// TestTagsHold: a tag names a committed version once (a taken name is refused), holds it
// against deletions and policies, follows it through a rename, and goes with Untag.
func TestTagsHold(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
	tags := func() map[string]named.Target {
		f, err := versions.Open(file)
		require.NoError(t, err)
		defer f.Close()
		r, _, err := history.Names(f)
		require.NoError(t, err)
		return r.Tags
	}
	require.NoError(t, onWriteSide(t, file, func(c *commit.Committer) error {
		require.NoError(t, history.Tag(c, "release-1", "v2"))
		require.ErrorIs(t, history.Tag(c, "release-1", "v3"), named.ErrExists, "a tag never moves")
		require.ErrorIs(t, history.Tag(c, "x", "v9"), versions.ErrNotFound)
		require.ErrorIs(t, history.Tag(c, "a b", "v3"), named.ErrName)
		return history.Tag(c, "keep", "v3")
	}))
	require.Equal(t, named.Target{Version: "v2", Timestamp: "2024-01-01 01:00:00.000000+0000"}, tags()["release-1"])

	// Deletions and policies keep what tags hold.
	err := onWriteSide(t, file, func(c *commit.Committer) error {
		_, err := history.Delete(c, []string{"v1", "v2"}, history.DeleteOptions{})
		return err
	})
	require.ErrorIs(t, err, named.ErrHeld)
	require.ErrorContains(t, err, "version v2: held by a tag release-1: delete the tag first")
	f, err := versions.Open(file)
	require.NoError(t, err)
	_, err = history.PlanDelete(f, []string{"v3"}, nil)
	require.ErrorIs(t, err, named.ErrHeld, "-n says so too")
	del, held, err := history.Select(f, lifecycle.Policy{KeepLast: 1})
	require.NoError(t, err)
	f.Close()
	require.Equal(t, []string{"v1"}, del)
	require.Equal(t, map[string][]string{"v2": {"release-1"}, "v3": {"keep"}}, held)

	// A rename carries the tag; the tag goes with Untag, and the version can go then.
	require.NoError(t, onWriteSide(t, file, func(c *commit.Committer) error {
		require.NoError(t, history.Rename(c, "v2", "w2"))
		require.NoError(t, history.Untag(c, "release-1"))
		require.ErrorIs(t, history.Untag(c, "release-1"), named.ErrNotFound)
		_, err := history.Delete(c, []string{"w2"}, history.DeleteOptions{})
		return err
	}))
	require.Equal(t, map[string]named.Target{"keep": {Version: "v3", Timestamp: "2024-01-01 02:00:00.000000+0000"}}, tags())
	require.NoError(t, onWriteSide(t, file, func(c *commit.Committer) error { return history.Untag(c, "keep") }))
	require.Empty(t, tags())
	h, err := h5.Open(file)
	require.NoError(t, err)
	defer h.Close()
	_, ok, err := h.Attr(versions.VersionsGroup, named.Attr)
	require.NoError(t, err)
	require.False(t, ok, "the last untag leaves no attribute")
}
