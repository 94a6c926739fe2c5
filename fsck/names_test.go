package fsck

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// TestNameNotes: a tag or branch whose version is gone, or whose name another version took
// since, is noted as dangling, with how to delete it; live names are not; the file has no
// finding either way.
func TestNameNotes(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	c, err := commit.Open(f, commit.Options{})
	require.NoError(t, err)
	v2, _, err := f.Version("v2")
	require.NoError(t, err)
	require.NoError(t, c.EditNames(func(named.Refs, []versions.Version) (named.Refs, error) {
		return named.Refs{
			Tags:     map[string]named.Target{"live": named.TargetOf(v2), "gone": {Version: "v9", Timestamp: "t9"}},
			Branches: map[string]named.Target{"dev": named.TargetOf(v2), "old": {Version: "v2", Timestamp: "1999-01-01 00:00:00.000000+0000"}},
		}, nil
	}))
	c.Close()
	require.NoError(t, f.Close())

	f, err = versions.Open(file)
	require.NoError(t, err)
	defer f.Close()
	notes, err := NameNotes(f)
	require.NoError(t, err)
	require.Equal(t, []string{
		"dangling: tag gone names version v9 of t9, which is gone (deleted by another program); vh5fs never follows it: delete it with vh5fs tag -d FILE gone",
		"dangling: branch old names version v2 of 1999-01-01 00:00:00.000000+0000, which is gone (deleted by another program); vh5fs never follows it: delete it with vh5fs branch -d FILE old",
	}, notes)
	findings, err := Check(file)
	require.NoError(t, err)
	require.Empty(t, findings, Summary(findings))
}

// TestShadowedNameNotes: a live tag or branch that a version of the same name shadows is
// noted, with how to rename it; a name on the version of its own name, and a dangling one
// (noted as such), are not noted as shadowed; the file has no finding either way.
func TestShadowedNameNotes(t *testing.T) {
	for _, tc := range []struct {
		name string
		refs func(v map[string]versions.Version) named.Refs
		want []string
	}{
		{"a tag shadowed by a version", func(v map[string]versions.Version) named.Refs {
			return named.Refs{Tags: map[string]named.Target{"v3": named.TargetOf(v["v2"])}}
		}, []string{"shadowed: tag v3 names version v2, but a version is called v3 too (of 2024-01-01 02:00:00.000000+0000), " +
			"which vh5fs commands take for v3 (MNT/tags/v3 still leads to v2): give the tag another name with vh5fs tag FILE NEWNAME v2, " +
			"then vh5fs tag -d FILE v3"}},
		{"a branch shadowed by a version", func(v map[string]versions.Version) named.Refs {
			return named.Refs{Branches: map[string]named.Target{"v1": named.TargetOf(v["v4"])}}
		}, []string{"shadowed: branch v1 names version v4, but a version is called v1 too (of 2024-01-01 00:00:00.000000+0000), " +
			"which vh5fs commands take for v1 (MNT/branches/v1 still leads to v4): give the branch another name with vh5fs branch FILE NEWNAME v4, " +
			"then vh5fs branch -d FILE v1"}},
		{"a tag on the version of its own name", func(v map[string]versions.Version) named.Refs {
			return named.Refs{Tags: map[string]named.Target{"v2": named.TargetOf(v["v2"])}}
		}, nil},
		{"a dangling tag is only dangling", func(v map[string]versions.Version) named.Refs {
			return named.Refs{Tags: map[string]named.Target{"v2": {Version: "v2", Timestamp: "1999-01-01 00:00:00.000000+0000"}}}
		}, []string{"dangling: tag v2 names version v2 of 1999-01-01 00:00:00.000000+0000, which is gone (deleted by another program); " +
			"vh5fs never follows it: delete it with vh5fs tag -d FILE v2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, filepath.Join(fixture.Dir(), "basic_1d.h5"))
			f, err := versions.OpenRW(file)
			require.NoError(t, err)
			c, err := commit.Open(f, commit.Options{})
			require.NoError(t, err)
			vs, err := f.Versions()
			require.NoError(t, err)
			byName := map[string]versions.Version{}
			for _, v := range vs {
				byName[v.Name] = v
			}
			// Written as another program (or an older vh5fs) could: no check of the names.
			require.NoError(t, c.EditNames(func(named.Refs, []versions.Version) (named.Refs, error) { return tc.refs(byName), nil }))
			c.Close()
			require.NoError(t, f.Close())

			f, err = versions.Open(file)
			require.NoError(t, err)
			defer f.Close()
			notes, err := NameNotes(f)
			require.NoError(t, err)
			require.Equal(t, tc.want, notes)
			findings, err := Check(file)
			require.NoError(t, err)
			require.Empty(t, findings, Summary(findings))
		})
	}
}
