package commit

import (
	"fmt"

	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/txn"
	"github.com/vh5fs/vh5fs/versions"
)

// SetCurrent makes name the current version, as versioned-hdf5's current_version setter
// does: the next commit on the current version goes on top of it. name must be a
// committed version (or __first_version__, which leaves no version current). It returns
// once the change is durable (one journaled sync, serialised with commits).
func (c *Committer) SetCurrent(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.f.HDF5()
	if err := h.Stopped(); err != nil {
		return fmt.Errorf("set the current version to %s: %w", name, err)
	}
	if name != versions.FirstVersion {
		if _, ok, err := c.f.Version(name); err != nil {
			return fmt.Errorf("set the current version to %s: %w", name, err)
		} else if !ok {
			return fmt.Errorf("set the current version to %q: no committed version of that name: %w", name, versions.ErrNotFound)
		}
	}
	err := txn.Run(h, txn.Change{Publish: func() error { return versions.SetCurrent(h, name) }})
	if err != nil {
		return fmt.Errorf("set the current version to %s: %w", name, err)
	}
	return nil
}

// EditNames replaces the file's names (package named) by what edit makes of them, given
// the names and the committed versions as they are, in one transaction serialised with
// commits: durable when it returns, the old names or the new ones after any crash.
func (c *Committer) EditNames(edit func(cur named.Refs, vs []versions.Version) (named.Refs, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.f.HDF5()
	if err := h.Stopped(); err != nil {
		return err
	}
	cur, err := named.Read(h)
	if err != nil {
		return err
	}
	vs, err := c.f.Versions()
	if err != nil {
		return err
	}
	next, err := edit(cur.Clone(), vs)
	if err != nil {
		return err
	}
	return txn.Run(h, txn.Change{Publish: func() error { return named.Write(h, next) }})
}
