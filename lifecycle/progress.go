package lifecycle

// Phase is a stage of a deletion or a reclaim that a Progress hears of.
type Phase int

// Phases, in the order they come.
const (
	// Planning: Done of Total data groups planned (their slots and mappings read).
	Planning Phase = iota
	// Compacting: Done of Total data groups written (compacted or dropped), Moved of
	// Moves chunks moved to their new slots, Group being the one in hand.
	Compacting
	// Syncing: the journaled sync that makes it durable; nothing to count.
	Syncing
)

// Step is where a deletion or a reclaim is.
type Step struct {
	Phase        Phase
	Done, Total  int64  // data groups
	Moved, Moves int64  // Compacting: chunks moved, of all the plan moves
	Group        string // Compacting: the data group being written
}

// Progress hears of a deletion's or a reclaim's steps: after each data group planned,
// after each chunk moved and each data group written, and once before the sync. It runs
// on the caller's goroutine, between the steps, so it must be quick.
type Progress func(Step)

func (p Progress) report(s Step) {
	if p != nil {
		p(s)
	}
}
