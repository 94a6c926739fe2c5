package fsnode

import (
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/stage"
)

// Reclaimer is the batched reclaim of what deletions through a read-write mount leave
// (rmdir writes a deletion's body, delete.go): its schedule is history's policy
// (history.Reclaimer); the mount makes one, tells it of each deletion and closes it at
// unmount.
type Reclaimer = history.Reclaimer

// NewReclaimer returns the reclaimer of c's file, whose stages s manages (nil: none).
func NewReclaimer(c *commit.Committer, s *stage.Manager) *Reclaimer {
	if s == nil { // no stages: a nil interface, not a nil *stage.Manager in one
		return history.NewReclaimer(c, nil)
	}
	return history.NewReclaimer(c, s)
}
