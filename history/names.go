package history

import (
	"fmt"
	"strings"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// Tag names version (a committed version) name, for good: the tag never moves, and holds
// the version against every deletion until it is deleted (Untag). A taken name is
// named.ErrExists.
func Tag(c *commit.Committer, name, version string) error {
	if err := named.CheckName(name); err != nil {
		return fmt.Errorf("tag %s: %w", name, err)
	}
	err := c.EditNames(func(r named.Refs, vs []versions.Version) (named.Refs, error) {
		if _, ok := r.Tags[name]; ok {
			return r, named.ErrExists
		}
		i := versionIndex(vs, version)
		if i < 0 {
			return r, fmt.Errorf("no committed version %q: %w", version, versions.ErrNotFound)
		}
		if r.Tags == nil {
			r.Tags = map[string]named.Target{}
		}
		r.Tags[name] = named.TargetOf(vs[i])
		return r, nil
	})
	if err != nil {
		return fmt.Errorf("tag %s: %w", name, err)
	}
	return nil
}

// Untag deletes tag name (named.ErrNotFound if there is none), dangling or not.
func Untag(c *commit.Committer, name string) error {
	err := c.EditNames(func(r named.Refs, _ []versions.Version) (named.Refs, error) {
		if _, ok := r.Tags[name]; !ok {
			return r, named.ErrNotFound
		}
		delete(r.Tags, name)
		return r, nil
	})
	if err != nil {
		return fmt.Errorf("untag %s: %w", name, err)
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
// a tag of that name holds. A dangling tag is refused, never followed to another version.
func Resolve(f *versions.File, name string) (string, error) {
	if _, ok, err := f.Version(name); err != nil || ok {
		return name, err
	}
	r, vs, err := Names(f)
	if err != nil {
		return "", err
	}
	t, ok := r.Tags[name]
	switch {
	case !ok:
		return "", fmt.Errorf("no version %q, and no tag of that name", name)
	case !named.Live(vs, t):
		return "", fmt.Errorf("tag %s is dangling: version %s of %s is gone", name, t.Version, t.Timestamp)
	}
	return t.Version, nil
}

// Select is the versions policy p deletes from f, and the versions it would have deleted
// that tags hold and it keeps (with the tags that hold each).
func Select(f *versions.File, p lifecycle.Policy) (del []string, held map[string][]string, err error) {
	r, vs, err := Names(f)
	if err != nil {
		return nil, nil, err
	}
	cur, err := f.CurrentVersion()
	if err != nil {
		return nil, nil, err
	}
	if len(r.Tags) == 0 {
		return lifecycle.Select(vs, cur, p), nil, nil
	}
	byName := versionsByName(vs)
	for _, name := range lifecycle.Select(vs, cur, p) {
		if tags := r.Holding(byName[name]); len(tags) > 0 {
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

// checkHolds refuses (named.ErrHeld) a deletion of a version a tag holds, naming the tags.
func checkHolds(f *versions.File, names []string) error {
	r, vs, err := Names(f)
	if err != nil || len(r.Tags) == 0 {
		return err
	}
	byName := versionsByName(vs)
	for _, name := range names {
		if v, ok := byName[name]; ok {
			if tags := r.Holding(v); len(tags) > 0 {
				return fmt.Errorf("version %s: %w %s: delete the tag first (vh5fs tag -d %s %s); nothing deleted",
					name, named.ErrHeld, strings.Join(tags, ", "), f.Path(), tags[0])
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
