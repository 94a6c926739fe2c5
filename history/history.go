// Package history owns the edits of a file's history: deleting versions and reclaiming
// the chunks only they used, renaming a version, reverting (moving current_version),
// rewriting a dataset's storage in every version (modify) and compacting the file. Each
// has one entry point here, which the mount (fsnode) and the commands (cmd/vh5fs) call,
// as do the changes of the file's names (Tag, Untag: package named),
// and nothing below it:
//
//   - it takes the write side: the file's commit.Committer, whose locks keep commits out
//     and wait for readers of moved slots (commit.Committer.Rewrite); modify and compact
//     take the file to themselves through HDF5's file locking;
//   - it checks the stages kept beside the file with stagedir.Check, the one check
//     (stagedir.ErrInUse), and the holders: files open for writing through the mount
//     (commit.ErrBusy) and, for a deletion, tags (named.ErrHeld);
//   - it runs the engine below it — lifecycle (deletions, reclaims), commit (rename,
//     revert), modify, compact — each writing through package txn;
//   - it reports progress as the engine does.
//
// It also decides when a mount's deferred reclaim runs (Reclaimer, reclaim.go): a mount's
// rmdir writes a deletion's body alone, and the chunks only the deleted versions used are
// reclaimed together once the deletions pause.
//
// The refusals are sentinel errors (stagedir.ErrInUse, commit.ErrBusy, commit.ErrFirst,
// lifecycle.ErrNoVersion, ...), which fsnode's one table (errno.go) answers with an errno.
package history

import (
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/compact"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/modify"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

// DeleteOptions are how Delete goes.
type DeleteOptions struct {
	// Pending writes the deletion's body alone (lifecycle.DeleteBody) and leaves the
	// chunks only the deleted versions used pending, for Reclaim: a mount's rmdir, one
	// of many.
	Pending  bool
	Progress lifecycle.Progress // told of each data group planned and written, then the sync
}

// Delete deletes versions names from the file c writes, as versioned-hdf5's
// delete_versions does, in one transaction, and returns the plan it carried out. It is
// refused while a stage is kept beside the file (stagedir.ErrInUse) or a file is open for
// writing through c (commit.ErrBusy): both record raw_data slots, which a deletion moves;
// and for a version a tag holds (named.ErrHeld): untag it first.
func Delete(c *commit.Committer, names []string, o DeleteOptions) (*lifecycle.Plan, error) {
	if err := stagedir.Check(c.File().Path(), stagedir.Deletion(names)); err != nil {
		return nil, err
	}
	var p *lifecycle.Plan
	err := c.Rewrite(func(f *versions.File) (err error) {
		if err := checkHolds(f, names); err != nil {
			return err
		}
		if o.Pending {
			p, err = lifecycle.DeleteBody(f, names)
		} else {
			p, err = lifecycle.DeleteProgress(f, names, o.Progress)
		}
		return err
	})
	return p, err
}

// PlanDelete is what Delete would do, read from f (open read-only or not), refused as
// Delete is while a stage is kept beside the file.
func PlanDelete(f *versions.File, names []string, progress lifecycle.Progress) (*lifecycle.Plan, error) {
	if err := stagedir.Check(f.Path(), stagedir.Deletion(names)); err != nil {
		return nil, err
	}
	if err := checkHolds(f, names); err != nil {
		return nil, err
	}
	return lifecycle.PlanDeleteProgress(f, names, progress)
}

// Reclaim compacts the data groups deletions left pending (lifecycle.Pending) in the file c
// writes, in one transaction, and returns its plan (nil if nothing was pending). served
// are the stages a mount serves besides those kept beside the file; any stage defers it
// (stagedir.ErrInUse), as an open write handle does (commit.ErrBusy).
func Reclaim(c *commit.Committer, served []string, progress lifecycle.Progress) (*lifecycle.Plan, error) {
	if err := stagedir.Check(c.File().Path(), stagedir.Reclaim(served)); err != nil {
		return nil, err
	}
	var p *lifecycle.Plan
	err := c.Rewrite(func(f *versions.File) (err error) {
		p, err = lifecycle.ReclaimProgress(f, progress)
		return err
	})
	return p, err
}

// Pending lists the data groups deletions left to Reclaim in the file at file.
func Pending(file string) ([]string, error) { return lifecycle.Pending(file) }

// Rename renames version old to new (commit.Committer.RenameVersion), refused while a
// stage kept beside the file is based on old (stagedir.ErrInUse) or an open write handle
// is (commit.ErrBusy).
func Rename(c *commit.Committer, old, new string) error {
	if err := stagedir.Check(c.File().Path(), stagedir.Renaming(old)); err != nil {
		return err
	}
	return c.RenameVersion(old, new)
}

// Revert makes version name current, as versioned-hdf5's current_version setter does
// (commit.Committer.SetCurrent): no version is changed or removed, so no stage is in its way.
func Revert(c *commit.Committer, name string) error { return c.SetCurrent(name) }

// Modify rewrites dataset's storage in every version of the file at file
// (modify.File), refused while a stage is kept beside the file: its chunks belong to the
// old storage.
func Modify(file, dataset string, o modify.Options, dryRun bool) (modify.Result, error) {
	if err := stagedir.Check(file, stagedir.Rewriting()); err != nil {
		return modify.Result{}, err
	}
	return modify.File(file, dataset, o, dryRun)
}

// Compact copies the file at file without HDF5's free space (compact.File), reclaiming
// first what deletions left pending unless a stage is kept beside the file.
func Compact(file string, o compact.Options) (compact.Result, error) { return compact.File(file, o) }
