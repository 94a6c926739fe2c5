package commit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// TestCommitOnBranch: a commit on a branch publishes its version without making it
// current and moves the branch in the same transaction; FollowHead follows the branch's
// head, not the current version; commits on the current version leave the branch alone;
// a missing or dangling branch refuses the commit and writes nothing. nested's history:
// base -> added -> dropped (current).
func TestCommitOnBranch(t *testing.T) {
	file := fixture.Copy(t, fixture.Dir()+"/nested.h5")
	f, c := openCommitter(t, file, Options{})
	const level, phase = "sensors/south/level", "phase"
	stage := func(version, ds string, b byte) Change { return stageByte(t, f, version, ds, b) }
	setBranch := func(name string, t0 named.Target) {
		t.Helper()
		require.NoError(t, c.EditNames(func(r named.Refs, _ []versions.Version) (named.Refs, error) {
			if r.Branches == nil {
				r.Branches = map[string]named.Target{}
			}
			r.Branches[name] = t0
			return r, nil
		}))
	}
	version := func(name string) versions.Version {
		t.Helper()
		v, ok, err := f.Version(name)
		require.NoError(t, err)
		require.True(t, ok, name)
		return v
	}
	branch := func() named.Target {
		t.Helper()
		r, err := named.Read(f.HDF5())
		require.NoError(t, err)
		return r.Branches["dev"]
	}
	current := func() string {
		t.Helper()
		cur, err := f.CurrentVersion()
		require.NoError(t, err)
		return cur
	}
	setBranch("dev", named.TargetOf(version("added")))

	// Staged on the branch's head before it moves, as two handles opened through the
	// branch would be.
	first, second := stage("added", phase, 0x42), stage("added", level, 0x17)
	first.Branch, first.FollowHead = "dev", true
	second.Branch, second.FollowHead = "dev", true

	res, err := c.Commit(first)
	require.NoError(t, err)
	require.Equal(t, "added", res.Base)
	require.Equal(t, "dropped", current(), "a commit on a branch leaves current_version")
	require.Equal(t, named.TargetOf(version(res.Name)), branch(), "the branch moves to the new version")
	require.Equal(t, "added", version(res.Name).PrevVersion)

	res2, err := c.Commit(second)
	require.NoError(t, err)
	require.Equal(t, res.Name, res2.Base, "FollowHead follows the branch's head")
	require.Equal(t, named.TargetOf(version(res2.Name)), branch())
	require.Equal(t, "dropped", current())

	// A commit on the current version (as versioned-hdf5's own) moves current alone.
	res3, err := c.Commit(stage("dropped", level, 0x05))
	require.NoError(t, err)
	require.Equal(t, res3.Name, current())
	require.Equal(t, named.TargetOf(version(res2.Name)), branch())

	vs, err := f.Versions()
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		branch string
		target named.Target
		want   error
	}{
		{"no such branch", "nope", named.Target{}, named.ErrNotFound},
		{"dangling branch", "dev", named.Target{Version: res2.Name, Timestamp: "1999-01-01 00:00:00.000000+0000"}, versions.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.target != (named.Target{}) {
				setBranch(tc.branch, tc.target)
			}
			ch := stage(res2.Name, phase, 0x33)
			ch.Branch, ch.FollowHead = tc.branch, true
			_, err := c.Commit(ch)
			require.ErrorIs(t, err, tc.want)
			after, err := f.Versions()
			require.NoError(t, err)
			require.Len(t, after, len(vs), "nothing committed")
			require.Equal(t, res3.Name, current())
		})
	}
}
