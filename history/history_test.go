package history_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/modify"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

// keepStage saves a stage named name, based on base, beside file, as a mount leaves one.
func keepStage(t *testing.T, file, name, base string) {
	t.Helper()
	dir := filepath.Join(stagedir.Of(file), name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, stagedir.TreeFile), []byte(`{"base":"`+base+`"}`), 0o644))
}

// onWriteSide runs fn on the write side of file, as vh5fs delete does.
func onWriteSide(t *testing.T, file string, fn func(c *commit.Committer) error) error {
	t.Helper()
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	defer f.Close()
	c, err := commit.Open(f, commit.Options{})
	require.NoError(t, err)
	defer c.Close()
	return fn(c)
}

// TestStagesRefuse: every history edit a stage is in the way of is refused by the one
// check (stagedir.ErrInUse), in one line that names the stage and what is left undone, and
// the file is not touched; an edit no stage is in the way of runs.
func TestStagesRefuse(t *testing.T) {
	middle := filepath.Join(fixture.Dir(), "golden_delete_middle-before.h5")
	rechunk := filepath.Join(fixture.Dir(), "modify", "golden_modify_rechunk_2d-before.h5")
	for _, tc := range []struct {
		name, src, base string
		edit            func(file string) error
		want            string // "" for success
	}{
		{"delete the base", middle, "v4", func(file string) error {
			return onWriteSide(t, file, func(c *commit.Committer) error {
				_, err := history.Delete(c, []string{"v2", "v4"}, history.DeleteOptions{})
				return err
			})
		}, ") is based on version v4: commit or remove the stage first; nothing deleted"},
		{"delete another", middle, "v4", func(file string) error {
			return onWriteSide(t, file, func(c *commit.Committer) error {
				_, err := history.Delete(c, []string{"v2"}, history.DeleteOptions{Pending: true})
				return err
			})
		}, ") records raw_data slots a deletion moves: commit or remove the stage first; nothing deleted"},
		{"plan a deletion", middle, "v4", func(file string) error {
			f, err := versions.Open(file)
			require.NoError(t, err)
			defer f.Close()
			_, err = history.PlanDelete(f, []string{"v2"}, nil)
			return err
		}, "records raw_data slots a deletion moves"},
		{"rename the base", middle, "v4", func(file string) error {
			return onWriteSide(t, file, func(c *commit.Committer) error { return history.Rename(c, "v4", "w4") })
		}, ") is based on version v4: commit or remove the stage first; nothing renamed"},
		{"rename another", middle, "v4", func(file string) error {
			return onWriteSide(t, file, func(c *commit.Committer) error { return history.Rename(c, "v2", "w2") })
		}, ""},
		{"modify", rechunk, "v1", func(file string) error {
			_, err := history.Modify(file, "g/z", modify.Options{Chunks: []int64{5, 3}}, false)
			return err
		}, "stages are kept beside the file (s1)"},
		{"modify, dry", rechunk, "v1", func(file string) error {
			_, err := history.Modify(file, "g/z", modify.Options{Chunks: []int64{5, 3}}, true)
			return err
		}, "nothing modified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, tc.src)
			keepStage(t, file, "s1", tc.base)
			before, err := os.ReadFile(file)
			require.NoError(t, err)
			err = tc.edit(file)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, stagedir.ErrInUse)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, file+": stage s1 (")
			after, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, before, after, "a refused edit leaves the file as it was")
		})
	}
}

// TestReclaimServedStages: a stage a mount serves defers the reclaim as a saved one does.
func TestReclaimServedStages(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_middle-before.h5"))
	require.NoError(t, onWriteSide(t, file, func(c *commit.Committer) error {
		_, err := history.Delete(c, []string{"v2"}, history.DeleteOptions{Pending: true})
		return err
	}))
	pending, err := history.Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending, "the body alone leaves the chunks pending")
	err = onWriteSide(t, file, func(c *commit.Committer) error {
		_, err := history.Reclaim(c, []string{"work"}, nil)
		return err
	})
	var in *stagedir.InUseError
	require.ErrorAs(t, err, &in)
	require.Equal(t, []string{"work"}, in.Names())
	require.NoError(t, onWriteSide(t, file, func(c *commit.Committer) error {
		p, err := history.Reclaim(c, nil, nil)
		require.NotNil(t, p)
		return err
	}))
	pending, err = history.Pending(file)
	require.NoError(t, err)
	require.Empty(t, pending)
}
