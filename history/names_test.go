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
	require.Equal(t, map[string][]string{"v2": {"tag release-1"}, "v3": {"tag keep"}}, held)

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

// TestBranchesHold: a branch takes a name no tag has, moves (MoveBranch), holds its head
// against deletions and policies, resolves as a version does, and goes with DeleteBranch,
// leaving its versions.
func TestBranchesHold(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
	require.NoError(t, onWriteSide(t, file, func(c *commit.Committer) error {
		require.NoError(t, history.Branch(c, "dev", "v2"))
		require.ErrorIs(t, history.Branch(c, "dev", "v3"), named.ErrExists)
		require.ErrorIs(t, history.Tag(c, "dev", "v3"), named.ErrExists, "tags and branches share their names")
		require.NoError(t, history.Tag(c, "rel", "v1"))
		require.ErrorIs(t, history.Branch(c, "rel", "v3"), named.ErrExists)
		require.ErrorIs(t, history.Branch(c, "x", "v9"), versions.ErrNotFound)
		require.ErrorIs(t, history.MoveBranch(c, "nope", "v1"), named.ErrNotFound)
		return nil
	}))
	f, err := versions.Open(file)
	require.NoError(t, err)
	head, err := history.BranchHead(f, "dev")
	require.NoError(t, err)
	require.Equal(t, "v2", head.Name)
	for name, want := range map[string]string{"dev": "v2", "rel": "v1", "v3": "v3"} {
		got, err := history.Resolve(f, name)
		require.NoError(t, err)
		require.Equal(t, want, got, name)
	}
	_, err = history.Resolve(f, "nope")
	require.ErrorIs(t, err, versions.ErrNotFound)
	_, held, err := history.Select(f, lifecycle.Policy{KeepLast: 1})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"v1": {"tag rel"}, "v2": {"branch dev"}}, held)
	f.Close()

	err = onWriteSide(t, file, func(c *commit.Committer) error {
		_, err := history.Delete(c, []string{"v2"}, history.DeleteOptions{})
		return err
	})
	require.ErrorIs(t, err, named.ErrHeld)
	require.ErrorContains(t, err, "version v2: held by a branch dev: delete the branch first (vh5fs branch -d")

	// Moved off v2, the branch no longer holds it; deleted, the branch leaves its head.
	require.ErrorIs(t, onWriteSide(t, file, func(c *commit.Committer) error {
		require.NoError(t, history.MoveBranch(c, "dev", "v3"))
		if _, err := history.Delete(c, []string{"v2"}, history.DeleteOptions{}); err != nil {
			return err
		}
		require.NoError(t, history.DeleteBranch(c, "dev"))
		return history.DeleteBranch(c, "dev")
	}), named.ErrNotFound, "deleted once")
	f, err = versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	_, err = history.BranchHead(f, "dev")
	require.ErrorIs(t, err, named.ErrNotFound)
	_, ok, err := f.Version("v3")
	require.NoError(t, err)
	require.True(t, ok)
}

// TestNamesNotVersions: no tag or branch takes a committed version's name, whichever way
// it is made (vh5fs tag and branch and the mount's ln -s and mkdir all call Tag and
// Branch); the names stay as they were.
func TestNamesNotVersions(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
	for _, tc := range []struct {
		name string
		make func(c *commit.Committer) error
	}{
		{"tag v2 at v3", func(c *commit.Committer) error { return history.Tag(c, "v2", "v3") }},
		{"tag v3 at v3", func(c *commit.Committer) error { return history.Tag(c, "v3", "v3") }},
		{"branch v1 at v4", func(c *commit.Committer) error { return history.Branch(c, "v1", "v4") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := onWriteSide(t, file, tc.make)
			require.ErrorIs(t, err, named.ErrVersionName)
			require.ErrorContains(t, err, "the name is a version's name")
		})
	}
	f, err := versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	r, _, err := history.Names(f)
	require.NoError(t, err)
	require.True(t, r.Empty(), "no name was made")
}
