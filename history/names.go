package history

import (
	"fmt"
	"strings"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

// Tag names version (a committed version) name, for good: the tag never moves, and holds
// the version against every deletion until it is deleted (Untag). A taken name is
// named.ErrExists, a version's name named.ErrVersionName.
func Tag(c *commit.Committer, name, version string) error {
	return addName(c, "tag", name, version, func(r *named.Refs) *map[string]named.Target { return &r.Tags })
}

// Untag deletes tag name (named.ErrNotFound if there is none), dangling or not.
func Untag(c *commit.Committer, name string) error {
	return deleteName(c, "untag", name, func(r *named.Refs) map[string]named.Target { return r.Tags })
}

// Branch makes a branch called name whose head is version (a committed version): commits
// on the branch (commit.Tree.Branch) move it, and current_version stays where it is. Its
// head is held as a tag's version is. A taken name is named.ErrExists, a version's name
// named.ErrVersionName.
func Branch(c *commit.Committer, name, version string) error {
	return addName(c, "branch", name, version, func(r *named.Refs) *map[string]named.Target { return &r.Branches })
}

// DeleteBranch deletes branch name (named.ErrNotFound if there is none), dangling or not,
// unless a stage kept beside the file commits on it (stagedir.ErrInUse). Its versions
// stay.
func DeleteBranch(c *commit.Committer, name string) error {
	if err := stagedir.Check(c.File().Path(), stagedir.BranchDeletion(name)); err != nil {
		return err
	}
	return deleteName(c, "delete branch", name, func(r *named.Refs) map[string]named.Target { return r.Branches })
}

// MoveBranch moves branch name (which must exist) to version, a committed version, as
// git branch --force does: the versions it leaves stay.
func MoveBranch(c *commit.Committer, name, version string) error {
	err := c.EditNames(func(r named.Refs, vs []versions.Version) (named.Refs, error) {
		if _, ok := r.Branches[name]; !ok {
			return r, named.ErrNotFound
		}
		i := versionIndex(vs, version)
		if i < 0 {
			return r, fmt.Errorf("no committed version %q: %w", version, versions.ErrNotFound)
		}
		r.Branches[name] = named.TargetOf(vs[i])
		return r, nil
	})
	if err != nil {
		return fmt.Errorf("move branch %s to %s: %w", name, version, err)
	}
	return nil
}

// addName adds name, naming version, to the map of r that of picks (made if missing).
func addName(c *commit.Committer, what, name, version string, of func(*named.Refs) *map[string]named.Target) error {
	if err := named.CheckName(name); err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	err := c.EditNames(func(r named.Refs, vs []versions.Version) (named.Refs, error) {
		if err := r.Free(name, vs); err != nil {
			return r, err
		}
		i := versionIndex(vs, version)
		if i < 0 {
			return r, fmt.Errorf("no committed version %q: %w", version, versions.ErrNotFound)
		}
		m := of(&r)
		if *m == nil {
			*m = map[string]named.Target{}
		}
		(*m)[name] = named.TargetOf(vs[i])
		return r, nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	return nil
}

// deleteName deletes name from the map of r that of picks.
func deleteName(c *commit.Committer, what, name string, of func(*named.Refs) map[string]named.Target) error {
	err := c.EditNames(func(r named.Refs, _ []versions.Version) (named.Refs, error) {
		m := of(&r)
		if _, ok := m[name]; !ok {
			return r, named.ErrNotFound
		}
		delete(m, name)
		return r, nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	return nil
}

// Names reads the names of f, with f's committed versions to tell live ones from dangling.
func Names(f *versions.File) (named.Refs, []versions.Version, error) {
	r, err := named.Read(f.HDF5())
	if err != nil {
		return named.Refs{}, nil, err
	}
	vs, err := f.Versions()
	return r, vs, err
}

// Resolve is the committed version name names: a version of that name, else the version
// a tag of that name holds or a branch of that name has at its head. A dangling name is
// refused, never followed to another version.
func Resolve(f *versions.File, name string) (string, error) {
	if _, ok, err := f.Version(name); err != nil || ok {
		return name, err
	}
	r, err := named.Read(f.HDF5())
	if err != nil {
		return "", err
	}
	kind := "tag"
	t, ok := r.Tags[name]
	if !ok {
		kind = "branch"
		t, ok = r.Branches[name]
	}
	if !ok {
		return "", fmt.Errorf("no version %q, and no tag or branch of that name: %w", name, versions.ErrNotFound)
	}
	if _, live, err := t.In(f.Version); err != nil {
		return "", err
	} else if !live {
		return "", fmt.Errorf("%s %s is dangling: version %s of %s is gone: %w", kind, name, t.Version, t.Timestamp, versions.ErrNotFound)
	}
	return t.Version, nil
}

// BranchHead is branch name's head, a committed version (named.ErrNotFound if there is no
// such branch, versions.ErrNotFound if it dangles).
func BranchHead(f *versions.File, name string) (versions.Version, error) {
	r, err := named.Read(f.HDF5())
	if err != nil {
		return versions.Version{}, err
	}
	return r.Head(name, f.Version)
}

// Select is the versions policy p deletes from f, and the versions it would have deleted
// that names hold and it keeps (with the names that hold each, named.Refs.Holders).
func Select(f *versions.File, p lifecycle.Policy) (del []string, held map[string][]string, err error) {
	r, vs, err := Names(f)
	if err != nil {
		return nil, nil, err
	}
	cur, err := f.CurrentVersion()
	if err != nil {
		return nil, nil, err
	}
	if r.Empty() {
		return lifecycle.Select(vs, cur, p), nil, nil
	}
	byName := versionsByName(vs)
	for _, name := range lifecycle.Select(vs, cur, p) {
		if tags := r.Holders(byName[name]); len(tags) > 0 {
			if held == nil {
				held = map[string][]string{}
			}
			held[name] = tags
			continue
		}
		del = append(del, name)
	}
	return del, held, nil
}

// checkHolds refuses (named.ErrHeld) a deletion of a version a name holds (a tag, or a
// branch whose head it is), naming the names.
func checkHolds(f *versions.File, names []string) error {
	r, vs, err := Names(f)
	if err != nil || r.Empty() {
		return err
	}
	byName := versionsByName(vs)
	for _, name := range names {
		if v, ok := byName[name]; ok {
			if holders := r.Holders(v); len(holders) > 0 {
				kind, first, _ := strings.Cut(holders[0], " ")
				return fmt.Errorf("version %s: %w a %s: delete the %s first (vh5fs %s -d %s %s); nothing deleted",
					name, named.ErrHeld, strings.Join(holders, ", a "), kind, kind, f.Path(), first)
			}
		}
	}
	return nil
}

// versionsByName indexes vs by name: a policy's or a deletion's names are looked up once
// each, not by a scan of every version.
func versionsByName(vs []versions.Version) map[string]versions.Version {
	m := make(map[string]versions.Version, len(vs))
	for _, v := range vs {
		m[v.Name] = v
	}
	return m
}

func versionIndex(vs []versions.Version, name string) int {
	for i, v := range vs {
		if v.Name == name {
			return i
		}
	}
	return -1
}
