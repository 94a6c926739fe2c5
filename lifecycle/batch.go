package lifecycle

import (
	"fmt"
	"slices"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/txn"
	"github.com/vh5fs/vh5fs/versions"
)

// DeleteBody deletes versions from f (open read-write) as Delete does, but writes only the
// body, in its own guarded journaled sync: the deleted version groups unlinked,
// prev_version relinked, current_version moved, and the data groups no version left has
// unlinked (Groups, all Drop). Every version the file lists then reads
// as before; the chunks only the deleted versions used stay in raw_data, unused, until
// Reclaim. The data groups the deleted versions held with a non-empty axis 0 are added to
// the file's pending set (Pending, durable before the body's sync) and named in the
// plan's Pending. A run of deletions thus costs one body each and one compaction for the
// whole run, the compaction Delete of the whole set would have made.
func DeleteBody(f *versions.File, names []string) (*Plan, error) {
	if !f.Writable() {
		return nil, fmt.Errorf("%s is not open for writing", f.Path())
	}
	p, kept, groups, err := planStart(f, names)
	if err != nil {
		return nil, err
	}
	h := f.HDF5()
	for _, g := range groups {
		held, err := holds(h, g, p.Delete)
		if err != nil {
			return nil, fmt.Errorf("data group %s: %w", g, err)
		}
		if !held {
			continue
		}
		inKept, err := anyHolds(h, g, p.NewCurrent, kept)
		if err != nil {
			return nil, fmt.Errorf("data group %s: %w", g, err)
		}
		if inKept {
			p.Pending = append(p.Pending, g)
			continue
		}
		// No version left has the dataset: its data group goes with the body, as the
		// whole deletion drops it, so that the path is free for a new dataset at once.
		pg, err := planGroup(h, g, p.Delete, kept, false)
		if err != nil {
			return nil, fmt.Errorf("data group %s: %w", g, err)
		}
		p.Groups = append(p.Groups, *pg)
		p.FreedBytes += pg.FreedBytes
	}
	if err := addPending(f.Path(), p.Pending); err != nil {
		return nil, err
	}
	if err := executeBody(h, p); err != nil {
		return nil, err
	}
	return p, nil
}

// anyHolds reports whether any of the versions has a dataset at data group rel's path
// (of any shape), first first: the current version, which most often does.
func anyHolds(h *h5.File, rel, first string, vs []string) (bool, error) {
	for _, v := range append([]string{first}, vs...) {
		if v == versions.FirstVersion {
			continue
		}
		_, present, err := eachMapping(h, v, rel, nil, nil)
		if err != nil || present {
			return present, err
		}
	}
	return false, nil
}

// executeBody writes the body of p and drops p.Groups (no listed version maps them), in
// one transaction. The unlinks rewrite the versions group's link storage and free the
// objects: no order of their writes is known to keep a half-applied unlink readable.
func executeBody(h *h5.File, p *Plan) error {
	return txn.Run(h, txn.Change{Undo: "deleted", InPlace: true, Publish: func() error {
		if err := writeBody(h, p); err != nil {
			return err
		}
		for _, g := range p.Groups {
			if err := h.Unlink(versions.DataGroupOf(g.Path)); err != nil {
				return fmt.Errorf("data group %s: %w", g.Path, err)
			}
		}
		return nil
	}})
}

// Reclaim compacts the data groups pending in f's sidecar (Pending) against the versions
// f lists now, as the publish of Delete does (Keep, Drop, Compact per group; a pending
// group is compacted whether or not a version listed now holds it), in one guarded
// journaled sync, then forgets them. It returns the plan (Groups and FreedBytes; nil if
// nothing was pending). A group it cannot plan (a file it cannot compact) does not stop
// the others: it stays pending, named with why in the plan's Blocked, and is not retried
// by the caller in a loop (every version reads whole meanwhile). The result is the file Delete of every version the bodies deleted
// would have made. Nothing may record raw_data slots meanwhile: no open handle's staged
// changes, no stage.
func Reclaim(f *versions.File) (*Plan, error) {
	return ReclaimProgress(f, nil)
}

// ReclaimProgress is Reclaim, telling progress (if not nil) how it goes: each pending data
// group planned, each chunk moved and data group written, then the sync.
func ReclaimProgress(f *versions.File, progress Progress) (*Plan, error) {
	if !f.Writable() {
		return nil, fmt.Errorf("%s is not open for writing", f.Path())
	}
	pending, err := Pending(f.Path())
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	p, kept, groups, err := planStart(f, nil)
	if err != nil {
		return nil, err
	}
	h := f.HDF5()
	groups = slices.DeleteFunc(groups, func(g string) bool { return !slices.Contains(pending, g) })
	changes := false
	for i, g := range groups {
		pg, err := planGroup(h, g, nil, kept, true)
		if err != nil {
			p.Blocked = append(p.Blocked, Block{g, err})
			continue
		}
		p.Groups = append(p.Groups, *pg)
		p.FreedBytes += pg.FreedBytes
		changes = changes || pg.Action == Drop || pg.Moves > 0 || pg.Dropped > 0 || pg.rows != nil
		progress.report(Step{Phase: Planning, Done: int64(i + 1), Total: int64(len(groups))})
	}
	if changes {
		if err := executePublish(h, p.Groups, progress); err != nil {
			return nil, err
		}
	}
	if err := keepPending(f.Path(), blockedGroups(p.Blocked)); err != nil {
		return nil, err
	}
	return p, nil
}

// CheckPending plans the reclaim of f's pending set, reading only, and returns the data
// groups it could not compact, with why: what fsck names.
func CheckPending(f *versions.File) ([]Block, error) {
	pending, err := Pending(f.Path())
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	_, kept, groups, err := planStart(f, nil)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, g := range groups {
		if !slices.Contains(pending, g) {
			continue
		}
		if _, err := planGroup(f.HDF5(), g, nil, kept, true); err != nil {
			out = append(out, Block{g, err})
		}
	}
	return out, nil
}

func executePublish(h *h5.File, groups []Group, progress Progress) error {
	return txn.Run(h, txn.Change{
		Undo:    "reclaimed",
		Publish: func() error { return writePublish(h, groups, progress) },
		InPlace: true,
		Syncing: func() { progress.report(Step{Phase: Syncing}) },
	})
}
