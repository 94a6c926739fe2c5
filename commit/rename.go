package commit

import (
	"errors"
	"fmt"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/txn"
	"github.com/vh5fs/vh5fs/versions"
)

// ErrBusy marks a version that staged changes are based on (Pin): it keeps its name and
// stays until they are committed or dropped.
var ErrBusy = errors.New("staged changes are based on this version")

// ErrFirst marks an operation on __first_version__, which every file keeps as it is.
var ErrFirst = errors.New("__first_version__ is every file's root version and cannot be changed")

// Pin marks version as the base of staged changes (an open write handle's), which
// RenameVersion refuses to rename (ErrBusy) until unpin is called; while any version is
// pinned, Rewrite is refused too, and Pin waits for a Rewrite under way.
func (c *Committer) Pin(version string) (unpin func()) {
	c.layout.RLock()
	c.pinMu.Lock()
	c.pins[version]++
	c.pinMu.Unlock()
	done := false
	return func() {
		c.pinMu.Lock()
		defer c.pinMu.Unlock()
		if done {
			return
		}
		done = true
		if c.pins[version]--; c.pins[version] <= 0 {
			delete(c.pins, version)
		}
		c.layout.RUnlock()
	}
}

func (c *Committer) pinned(version string) bool {
	c.pinMu.Lock()
	defer c.pinMu.Unlock()
	return c.pins[version] > 0
}

// RenameVersion renames version old to new: its group, every prev_version that names it
// and current_version if it is old, in one journaled sync: old or new after any crash,
// once recovered (the next read-write open, vh5fs fsck --repair). The names change in many
// object headers, so the sync is guarded (h5.File.GuardSync): another program that opens
// the file after a crash inside the apply, before recovery, finds no HDF5 file rather than
// one half renamed. new must be a valid, free version name.
func (c *Committer) RenameVersion(old, new string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.renameVersion(old, new); err != nil {
		return fmt.Errorf("rename version %s to %s: %w", old, new, err)
	}
	c.f.Forget(old)
	return nil
}

func (c *Committer) renameVersion(old, new string) error {
	h := c.f.HDF5()
	if err := h.Stopped(); err != nil {
		return err
	}
	if old == versions.FirstVersion {
		return ErrFirst
	}
	if _, ok, err := c.f.Version(old); err != nil {
		return err
	} else if !ok {
		return versions.ErrNotFound
	}
	if err := c.free(new); err != nil {
		return err
	}
	if c.pinned(old) {
		return ErrBusy
	}
	cur, err := c.f.CurrentVersion()
	if err != nil {
		return err
	}
	members, err := h.Members(versions.VersionsGroup)
	if err != nil {
		return err
	}
	refs, err := named.Read(h)
	if err != nil {
		return err
	}
	// The names change in many headers: no order of writes keeps them whole (InPlace).
	return txn.Run(h, txn.Change{InPlace: true, Publish: func() error {
		if err := h.Move(versions.VersionGroup(old), versions.VersionGroup(new)); err != nil {
			return err
		}
		for _, m := range members {
			if m.Kind != h5.KindGroup || m.Name == old {
				continue
			}
			prev, ok, err := versions.PrevVersion(h, m.Name)
			if err != nil {
				return err
			}
			if ok && prev == old {
				if err := versions.Relink(h, m.Name, new); err != nil {
					return err
				}
			}
		}
		if cur == old {
			if err := versions.SetCurrent(h, new); err != nil {
				return err
			}
		}
		if !refs.Empty() { // the version's names follow it
			return named.Write(h, refs.Renamed(old, new))
		}
		return nil
	}})
}

// Rewrite runs fn, which rewrites the file's versions in place (a deletion of versions
// moves chunks to other slots), while no commit runs and no open handle's changes are
// based on any version (ErrBusy otherwise: their staged arrays name base slots), and
// while reads of the file's datasets wait (versions.File.MoveSlots). Afterwards
// everything cached of the file is read again: hash indexes, chunk maps, version metadata.
func (c *Committer) Rewrite(fn func(f *versions.File) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.f.HDF5().Stopped(); err != nil {
		return err
	}
	if !c.layout.TryLock() {
		return fmt.Errorf("files are open for writing: %w", ErrBusy)
	}
	defer c.layout.Unlock()
	defer func() {
		for _, ix := range c.indexes {
			ix.close()
		}
		c.indexes = map[string]*index{}
	}()
	return c.f.MoveSlots(func() error { return fn(c.f) })
}
