package history

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/stagedir"
)

// Deletions through the mount come one rmdir at a time (rm -r versions/old*, a loop), and
// a whole deletion each (body and compaction) would move every later chunk again for
// every version deleted. So rmdir writes the body alone (lifecycle.DeleteBody: durable
// when rmdir returns, every listed version reading as before) and records the data
// groups it left unused chunks in; the Reclaimer compacts them all at once
// (lifecycle.Reclaim) once the deletions pause: the file Delete of the whole set makes.

// reclaimQuiet is how long after the last deletion the reclaim waits for another one.
const reclaimQuiet = time.Second

// reclaimMaxDelay bounds the wait between tries of a deferred or failed reclaim.
const reclaimMaxDelay = time.Minute

// Reclaimer runs the reclaim deletions through a read-write mount leave pending: after a
// quiet moment with no deletion (Deleted), again later while it cannot run (stages saved
// or files open for writing record raw_data slots, which it moves) or failed (logged),
// and at unmount (Close). A pending set an earlier mount left (a crash, a stage) is
// reclaimed the same way. It takes the locks every history edit takes
// (commit.Committer.Rewrite). What it cannot run stays in the file's pending set
// (lifecycle.Pending), for the next mount, vh5fs delete, compact or fsck --repair.
type Reclaimer struct {
	commit *commit.Committer
	stages Stages // nil without stages
	quiet  time.Duration

	// runMu is held for a whole run, which reads the stages and then rewrites: above the
	// stage manager's lock and Rewrite's in the lock order (docs/ARCHITECTURE.md).
	runMu sync.Mutex

	mu     sync.Mutex  // a leaf
	timer  *time.Timer // the next run; GUARDED_BY(mu)
	tries  int         // runs deferred or failed since the last deletion; GUARDED_BY(mu)
	closed bool        // Close was called: no more timed runs; GUARDED_BY(mu)
}

// Stages names the stages a mount serves (its stage.Manager): a reclaim waits while any
// is saved, as every history edit does (stagedir.Check).
type Stages interface{ Names() []string }

// NewReclaimer returns the reclaimer of c's file, whose stages s manages (nil: none). A
// pending set left beside the file is reclaimed after a quiet moment.
func NewReclaimer(c *commit.Committer, s Stages) *Reclaimer {
	r := &Reclaimer{commit: c, stages: s, quiet: reclaimQuiet}
	pending, err := Pending(c.File().Path())
	if err != nil {
		slog.Error("deletions' pending reclaim not read", "err", err)
	}
	if len(pending) > 0 {
		slog.Info("deletions' reclaim pending from an earlier mount", "groups", strings.Join(pending, ","))
		r.Deleted()
	}
	return r
}

// Deleted tells r that a deletion's body was written: the reclaim runs once no other
// deletion came for a quiet moment.
func (r *Reclaimer) Deleted() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries = 0
	r.scheduleLocked(r.quiet)
}

func (r *Reclaimer) scheduleLocked(d time.Duration) {
	if r.closed {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timer = time.AfterFunc(d, r.timed)
}

// timed is a timed run; one deferred or failed is tried again later, less often.
func (r *Reclaimer) timed() {
	if !r.run(false) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	r.scheduleLocked(min(r.quiet<<min(r.tries, 10), reclaimMaxDelay))
}

// Flush runs a pending reclaim now and waits for it, for what would otherwise make it
// wait long (a stage records raw_data slots from its creation until its commit); one that
// cannot run now is tried again later.
func (r *Reclaimer) Flush() {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	if r.run(false) {
		r.mu.Lock()
		r.scheduleLocked(r.quiet)
		r.mu.Unlock()
	}
}

// Close ends the timed runs and runs the reclaim once more, waiting for it: at unmount,
// once no request is served any more and before the committer closes.
func (r *Reclaimer) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	r.run(true)
}

// run reclaims the pending set, if any, and reports whether it must be tried again.
func (r *Reclaimer) run(final bool) (again bool) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed && !final { // Close ran it, and the committer may be gone
		return false
	}
	file := r.commit.File().Path()
	pending, err := Pending(file)
	if err != nil {
		slog.Error("deletions' reclaim: pending set not read; tried again later", "err", err)
		return true
	}
	if len(pending) == 0 {
		return false
	}
	var served []string
	if r.stages != nil {
		served = r.stages.Names()
	}
	start := time.Now()
	p, err := Reclaim(r.commit, served, nil)
	var in *stagedir.InUseError
	switch {
	case errors.As(err, &in):
		slog.Info("deletions' reclaim deferred while stages are saved (they record raw_data slots); commit or discard them",
			"stages", strings.Join(in.Names(), ","), "groups", strings.Join(pending, ","))
		return true
	case errors.Is(err, commit.ErrBusy):
		slog.Info("deletions' reclaim deferred while files are open for writing (their changes record raw_data slots)",
			"groups", strings.Join(pending, ","))
		return true
	case errors.Is(err, h5.ErrStopped):
		slog.Error("deletions' reclaim not run: the file takes no more writes until it is mounted again; it stays pending", "err", err)
		return false
	case err != nil:
		slog.Error("deletions' reclaim failed; the chunks stay unused and pending, tried again later", "err", err)
		return true
	}
	if p != nil && len(p.Blocked) > 0 {
		// Trying again would meet the same refusal: they stay pending, every version
		// reading whole, until a later vh5fs can compact them (fsck names them).
		for _, b := range p.Blocked {
			slog.Error("deletions' reclaim cannot compact a data group; it stays pending, its unused chunks in place "+
				"(vh5fs fsck FILE names it; vh5fs compact still copies the file)", "group", b.Group, "err", b.Err)
		}
	}
	if p != nil {
		var done []string
		for _, g := range p.Groups {
			done = append(done, g.Path)
		}
		slog.Info("deletions' chunks reclaimed", "groups", strings.Join(done, ","), "chunks_moved", p.Moves(),
			"bytes_freed", p.FreedBytes, "elapsed", time.Since(start))
	}
	return false
}
