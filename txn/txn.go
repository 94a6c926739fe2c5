// Package txn is the one way a change reaches a file: every commit, revert, rename,
// deletion, reclaim and storage rewrite describes itself as a Change and Run writes it in
// one journaled sync (h5.File.FlushSync), in the same steps for all of them.
//
// # The steps
//
//  1. Body (optional): objects no reader reaches yet — a version group under
//     committed=False, a rewrite's scratch group, the deletion's unlinks and relinks. The
//     virtual datasets it made are checked against their mapping lists
//     (h5.File.CheckMappingLists), and the body is marked (h5.File.FlushBody): the sync
//     makes it durable before any later write reaches the file's old bytes.
//  2. Publish: the writes that make the change what readers see — the committed flag and
//     current_version, a rename's links, a rewrite's swap, a compaction.
//  3. Guard (InPlace changes): a publish that rewrites objects in place, whose half-applied
//     state no order of writes keeps readable, syncs guarded (h5.File.GuardSync).
//  4. The sync, after Syncing is told.
//
// # The crash contract every caller inherits
//
// A kill or power loss at any moment leaves the file as it was before Run, or (once the
// journal is durable) with the whole change after recovery: the next read-write open or
// `vh5fs fsck --repair`. No program ever reads a published change whose body is not all
// in place; before recovery, a program that does not know the journal may find the body
// alone, which no reader reaches. During a guarded sync's apply, such a program finds no
// HDF5 file rather than one half changed, until recovery.
//
// A failure before the sync (an error of Body or Publish, of libhdf5, a full disk) with
// Undo set cancels every write since the last sync (h5.File.Cancel): the file stays as it
// was, takes no more writes until reopened, and the error says "nothing <Undo>". Without
// Undo, what was written stays for the next sync: only for a body readers ignore (a
// commit's uncommitted version group). A failed sync stops the file (h5.ErrStopped) in
// either case.
package txn

import (
	"errors"
	"fmt"

	"github.com/vh5fs/vh5fs/h5"
)

// Change is one change to a file, written by Run.
type Change struct {
	// Body writes what no reader reaches until Publish (optional).
	Body func() error
	// Publish writes what makes the change visible.
	Publish func() error
	// InPlace marks a publish whose half-applied state no order of writes keeps readable:
	// its sync is guarded.
	InPlace bool
	// Undo names what a failure before the sync leaves undone ("deleted"): the writes are
	// cancelled. Empty: they stay for the next sync.
	Undo string
	// Syncing, if set, is told when the writes are done and the sync starts.
	Syncing func()
}

// Run writes c to h (open read-write) in one journaled sync, as the package doc says.
func Run(h *h5.File, c Change) (err error) {
	if err := h.Stopped(); err != nil {
		return err
	}
	if c.Undo != "" {
		defer func() {
			if err == nil || errors.Is(err, h5.ErrStopped) {
				return
			}
			if cerr := h.Cancel(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			err = fmt.Errorf("%w; nothing %s", err, c.Undo)
		}()
	}
	if c.Body != nil {
		if err := c.Body(); err != nil {
			return err
		}
		if err := h.CheckMappingLists(); err != nil { // before anything marks them complete
			return err
		}
		if err := h.FlushBody(); err != nil {
			return err
		}
	}
	if err := c.Publish(); err != nil {
		return err
	}
	if c.InPlace {
		if err := h.GuardSync(); err != nil {
			return err
		}
	}
	if c.Syncing != nil {
		c.Syncing()
	}
	return h.FlushSync()
}
