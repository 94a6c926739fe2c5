package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestDeleteProgress: a deletion with a progress hook tells of every data group planned,
// then every chunk moved and group written, then the sync, in that order, with counts that
// end at the plan's; the file is the golden's, as without the hook. A reclaim after a
// body tells the same of the pending groups.
func TestDeleteProgress(t *testing.T) {
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	for _, d := range dels {
		if d.Commit != nil {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			for _, batched := range []bool{false, true} {
				file := fixture.Copy(t, d.Before)
				f, err := versions.OpenRW(file)
				require.NoError(t, err)
				var steps []Step
				record := func(s Step) { steps = append(steps, s) }
				var p *Plan
				if batched {
					_, err = DeleteBody(f, d.Names)
					require.NoError(t, err)
					p, err = ReclaimProgress(f, record)
				} else {
					p, err = DeleteProgress(f, d.Names, record)
				}
				require.NoError(t, err)
				require.NoError(t, f.Close())
				require.NoError(t, conform.Files(file, d.After), "batched %v", batched)
				checkSteps(t, p, steps, batched)
			}
		})
	}
}

// checkSteps checks the steps a progress hook heard against the plan carried out.
// A reclaim that would change nothing writes nothing (Reclaim).
func checkSteps(t *testing.T, p *Plan, steps []Step, reclaim bool) {
	t.Helper()
	if p == nil { // nothing pending: nothing planned
		require.Empty(t, steps)
		return
	}
	written, moves := int64(0), int64(p.Moves())
	changes := false
	for _, g := range p.Groups {
		if g.Action != Keep {
			written++
		}
		changes = changes || g.Action == Drop || g.Moves > 0 || g.Dropped > 0 || g.rows != nil
	}
	last := Step{Phase: Planning}
	for _, s := range steps {
		require.GreaterOrEqual(t, s.Phase, last.Phase, "phases in order: %+v after %+v", s, last)
		switch s.Phase {
		case Planning:
			require.Equal(t, int64(len(p.Groups)), s.Total)
			require.Equal(t, last.Done+1, s.Done, "one step per group planned")
		case Compacting:
			require.Equal(t, written, s.Total)
			require.Equal(t, moves, s.Moves)
			require.LessOrEqual(t, s.Moved, s.Moves)
			require.NotEmpty(t, s.Group)
		}
		last = s
	}
	require.NotEmpty(t, steps)
	planned := steps[0]
	for _, s := range steps {
		if s.Phase == Planning {
			planned = s
		}
	}
	require.Equal(t, planned.Total, planned.Done, "every group planned")
	if reclaim && !changes {
		require.Equal(t, Planning, last.Phase, "a reclaim that changes nothing writes nothing")
		return
	}
	require.Equal(t, Syncing, last.Phase, "the sync comes last")
	if written == 0 {
		return // a deletion whose publish has nothing to write
	}
	end := steps[len(steps)-2]
	require.Equal(t, Compacting, end.Phase)
	require.Equal(t, written, end.Done, "every group written")
	require.Equal(t, moves, end.Moved, "every chunk moved")
}
