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
