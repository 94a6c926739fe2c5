package named

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/versions"
)

func TestCodec(t *testing.T) {
	r := Refs{
		Tags:     map[string]Target{"release-1": {"v2", "2024-01-01 01:00:00.000000+0000"}, "a": {"v1", "t1"}},
		Branches: map[string]Target{"dev": {"v3", "t3"}},
	}
	b, err := r.Encode()
	require.NoError(t, err)
	require.Equal(t, `{"format":1,"tags":{"a":{"version":"v1","timestamp":"t1"},"release-1":{"version":"v2","timestamp":"2024-01-01 01:00:00.000000+0000"}},"branches":{"dev":{"version":"v3","timestamp":"t3"}}}`, string(b), "canonical: keys sorted")
	got, err := Decode(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
	_, err = Decode([]byte(`{"format":2,"tags":{}}`))
	require.ErrorIs(t, err, versions.ErrUnsupported, "a later format is refused, never misread")
	_, err = Decode([]byte(`not json`))
	require.ErrorContains(t, err, Attr)
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"release-1": true, "v2.0_rc": true, "A": true,
		"": false, ".hidden": false, "-x": false, "a/b": false, "a b": false, "(dangling)": false, "é": false,
	} {
		err := CheckName(name)
		if ok {
			require.NoError(t, err, name)
		} else {
			require.ErrorIs(t, err, ErrName, name)
		}
	}
}

// TestLiveHoldingRenamed: a name is live only for the version of its name and timestamp;
// tags hold that version alone; a rename carries every name of the version along.
func TestLiveHoldingRenamed(t *testing.T) {
	v2 := versions.Version{Name: "v2", Timestamp: "t2"}
	again := versions.Version{Name: "v2", Timestamp: "t9"} // deleted by another program, then made again
	r := Refs{Tags: map[string]Target{"b": TargetOf(v2), "a": TargetOf(v2), "c": {"v3", "t3"}},
		Branches: map[string]Target{"dev": TargetOf(v2)}}
	require.True(t, Live([]versions.Version{v2}, r.Tags["a"]))
	require.False(t, Live([]versions.Version{again}, r.Tags["a"]), "never followed to another version of the name")
	require.Equal(t, []string{"a", "b"}, r.Holding(v2))
	require.Empty(t, r.Holding(again))
	moved := r.Renamed("v2", "w2")
	require.Equal(t, Target{"w2", "t2"}, moved.Tags["a"])
	require.Equal(t, Target{"w2", "t2"}, moved.Branches["dev"])
	require.Equal(t, Target{"v3", "t3"}, moved.Tags["c"])
	require.Equal(t, Target{"v2", "t2"}, r.Tags["a"], "r itself is left as it was")
}

// TestHeadHoldersTaken: a branch resolves to its head only while that version lives;
// Holders names the tags and branches on a version, tags first; tags and branches share
// their names.
func TestHeadHoldersTaken(t *testing.T) {
	v2 := versions.Version{Name: "v2", Timestamp: "t2"}
	r := Refs{Tags: map[string]Target{"rel": TargetOf(v2)},
		Branches: map[string]Target{"dev": TargetOf(v2), "old": {"v1", "t1"}, "gone": {"v9", "t9"}}}
	lookup := func(name string) (versions.Version, bool, error) {
		switch name {
		case "v2":
			return v2, true, nil
		case "v1":
			return versions.Version{Name: "v1", Timestamp: "t1-again"}, true, nil
		}
		return versions.Version{}, false, nil
	}
	for _, tc := range []struct {
		branch string
		want   string
		err    error
	}{
		{"dev", "v2", nil},
		{"old", "", versions.ErrNotFound}, // v1 made again: never followed
		{"gone", "", versions.ErrNotFound},
		{"nope", "", ErrNotFound},
	} {
		v, err := r.Head(tc.branch, lookup)
		if tc.err != nil {
			require.ErrorIs(t, err, tc.err, tc.branch)
			continue
		}
		require.NoError(t, err, tc.branch)
		require.Equal(t, tc.want, v.Name)
	}
	require.Equal(t, []string{"tag rel", "branch dev"}, r.Holders(v2))
	require.Equal(t, []string{"dev"}, r.Heads(v2))
	require.True(t, r.Taken("rel"))
	require.True(t, r.Taken("dev"))
	require.False(t, r.Taken("v2"))
}

// TestFree: a new tag or branch takes a name no tag, branch or committed version has.
func TestFree(t *testing.T) {
	r := Refs{Tags: map[string]Target{"rel": {"v1", "t1"}}, Branches: map[string]Target{"dev": {"v2", "t2"}}}
	vs := []versions.Version{{Name: "v1", Timestamp: "t1"}, {Name: "v2", Timestamp: "t2"}, {Name: "20261202T140520.123456Z"}}
	for _, tc := range []struct {
		name string
		want error
	}{
		{"release-2", nil},
		{"V1", nil}, // version names are case-sensitive, as HDF5's links are
		{"rel", ErrExists},
		{"dev", ErrExists},
		{"v2", ErrVersionName},
		{"20261202T140520.123456Z", ErrVersionName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.Free(tc.name, vs)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
		})
	}
}
