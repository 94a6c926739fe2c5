package lifecycle

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestBatchDeleteGolden deletes each golden's versions one body at a time (DeleteBody,
// each in its own open of the file, as a mount's rmdirs come), checks that h5py then
// reads every listed version as after the whole deletion, and that one Reclaim (or, in
// the second run, the next Delete, of nothing more) makes the whole file versioned-hdf5's
// delete_versions made: conform.Files against the golden.
func TestBatchDeleteGolden(t *testing.T) {
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	require.NotEmpty(t, dels)
	unused := 0
	for _, d := range dels {
		if d.Commit != nil {
			continue
		}
		for _, finish := range []string{"reclaim", "delete"} {
			t.Run(d.Name+"/"+finish, func(t *testing.T) {
				file := fixture.Copy(t, d.Before)
				var pending []string
				for _, name := range d.Names {
					f, err := versions.OpenRW(file)
					require.NoError(t, err)
					p, err := DeleteBody(f, []string{name})
					require.NoError(t, err)
					for _, g := range p.Groups {
						require.Equal(t, Drop, g.Action, "the body drops data groups, never compacts them")
					}
					require.NoError(t, f.Close())
					pending = append(pending, p.Pending...)
				}
				got, err := Pending(file)
				require.NoError(t, err)
				require.Subset(t, got, pending)
				require.Subset(t, pending, got)
				if conform.Files(file, d.After) != nil {
					unused++ // the bodies left unused chunks: not yet the library's file
				}
				require.Equal(t, h5pyDigests(t, d.After), h5pyDigests(t, file), "the bodies alone read as the deletion")

				f, err := versions.OpenRW(file)
				require.NoError(t, err)
				switch finish {
				case "reclaim":
					p, err := Reclaim(f)
					require.NoError(t, err)
					if len(pending) > 0 {
						require.NotNil(t, p)
						require.Len(t, p.Groups, len(got))
					}
				case "delete":
					_, err := Delete(f, nil)
					require.NoError(t, err)
				}
				require.NoError(t, f.Close())
				require.NoError(t, conform.Files(file, d.After))
				_, err = os.Stat(PendingPath(file))
				require.ErrorIs(t, err, os.ErrNotExist, "the pending set is forgotten")
			})
		}
	}
	require.Positive(t, unused, "some golden's bodies leave chunks to reclaim")
}

// TestReclaimNothingPending: with no sidecar, Reclaim writes nothing.
func TestReclaimNothingPending(t *testing.T) {
	src := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_middle-after.h5"))
	before, err := os.ReadFile(src)
	require.NoError(t, err)
	f, err := versions.OpenRW(src)
	require.NoError(t, err)
	p, err := Reclaim(f)
	require.NoError(t, err)
	require.Nil(t, p)
	require.NoError(t, f.Close())
	after, err := os.ReadFile(src)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// TestReclaimFailsWhole: a reclaim that fails before its sync leaves the file as the
// bodies left it and the set pending; the next reclaim completes it.
func TestReclaimFailsWhole(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_several-before.h5"))
	for _, name := range []string{"v2", "v4", "v5"} {
		f, err := versions.OpenRW(file)
		require.NoError(t, err)
		_, err = DeleteBody(f, []string{name})
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	bodies := h5pyDigests(t, file)
	injected := errors.New("injected failure")
	failAt = func(p string) error {
		if p == "publish" {
			return injected
		}
		return nil
	}
	defer func() { failAt = func(string) error { return nil } }()
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	_, err = Reclaim(f)
	require.ErrorIs(t, err, injected)
	require.ErrorContains(t, err, "nothing reclaimed")
	f.Close()
	failAt = func(string) error { return nil }
	_, err = os.Stat(file + h5.JournalSuffix)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, bodies, h5pyDigests(t, file))
	pending, err := Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending)

	f, err = versions.OpenRW(file)
	require.NoError(t, err)
	_, err = Reclaim(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, conform.Files(file, filepath.Join(fixture.Dir(), "golden_delete_several-after.h5")))
}

// TestDeleteBodyRefuses: the body refuses what Delete refuses, before anything is
// written or recorded.
func TestDeleteBodyRefuses(t *testing.T) {
	file := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_middle-before.h5"))
	before, err := os.ReadFile(file)
	require.NoError(t, err)
	f, err := versions.OpenRW(file)
	require.NoError(t, err)
	for _, tc := range []struct {
		names []string
		want  error
	}{
		{[]string{versions.FirstVersion}, ErrFirstVersion},
		{[]string{"nope"}, ErrNoVersion},
	} {
		_, err = DeleteBody(f, tc.names)
		require.ErrorIs(t, err, tc.want)
	}
	require.NoError(t, f.Close())
	after, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, before, after)
	_, err = os.Stat(PendingPath(file))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestReclaimBlocked: a pending data group whose compaction is refused does not stop the
// others, nor a later deletion that does not hold it: it stays pending, alone, named with
// why (Plan.Blocked, CheckPending), every version reading as before; once it can be
// planned, the next reclaim completes the file as the library's.
func TestReclaimBlocked(t *testing.T) {
	refused := errors.New("refused for the test")
	for _, tc := range []struct {
		name   string
		finish func(f *versions.File) (*Plan, error)
	}{
		{"reclaim", Reclaim},
		{"delete of nothing more", func(f *versions.File) (*Plan, error) { return Delete(f, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, filepath.Join(fixture.Dir(), "golden_delete_several-before.h5"))
			for _, name := range []string{"v2", "v4", "v5"} {
				f, err := versions.OpenRW(file)
				require.NoError(t, err)
				_, err = DeleteBody(f, []string{name})
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			pending, err := Pending(file)
			require.NoError(t, err)
			require.Greater(t, len(pending), 1, "the test needs a group besides the blocked one")
			blocked := pending[0]
			bodies := h5pyDigests(t, file)
			failAt = func(p string) error {
				if p == "plan "+blocked {
					return refused
				}
				return nil
			}
			defer func() { failAt = func(string) error { return nil } }()

			f, err := versions.Open(file)
			require.NoError(t, err)
			bs, err := CheckPending(f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.Len(t, bs, 1)
			require.Equal(t, blocked, bs[0].Group)
			require.ErrorIs(t, bs[0].Err, refused)

			f, err = versions.OpenRW(file)
			require.NoError(t, err)
			p, err := tc.finish(f)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.Len(t, p.Blocked, 1)
			require.Equal(t, "data group "+blocked+": refused for the test", p.Blocked[0].String())
			left, err := Pending(file)
			require.NoError(t, err)
			require.Equal(t, []string{blocked}, left, "the blocked group alone stays pending")
			require.Equal(t, bodies, h5pyDigests(t, file), "every version reads as before")

			failAt = func(string) error { return nil }
			f, err = versions.OpenRW(file)
			require.NoError(t, err)
			p, err = Reclaim(f)
			require.NoError(t, err)
			require.Empty(t, p.Blocked)
			require.NoError(t, f.Close())
			require.NoError(t, conform.Files(file, filepath.Join(fixture.Dir(), "golden_delete_several-after.h5")))
			_, err = os.Stat(PendingPath(file))
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}
