package inspect

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/versions"
)

// AttrChange is one HDF5 attribute that differs between two versions on an object (a
// dataset or a group) both versions hold. Objects only one version holds are dataset
// changes (added, removed), not attribute changes.
type AttrChange struct {
	Path string // the object, relative to the version; "" is the version's own group
	Name string
	Kind string // Added, Removed or Modified
	// Old and New are the values as JSON text, as the user.hdf5.* xattrs show them; ""
	// where the attribute is absent. When only the type changed, each ends with it.
	Old, New string
}

// versionMetadata are the attributes of a version's own group that describe the version
// (the log prints them): they differ between any two versions, which is no change.
var versionMetadata = []string{versions.AttrCommitted, versions.AttrPrevVersion, versions.AttrTimestamp}

// A version's own group holds attributes of that version alone: versioned-hdf5's
// stage_version does not carry them to the next version (the attribute "note" a version
// was given is not in its child's group). One the older version has and the newer lacks
// is therefore no removal, and is not listed; added and changed ones are.

// AttrChanges compares the HDF5 attributes of the objects two versions share: of every
// group and dataset, or, with rel, of that dataset alone; of the versions' own groups,
// only the attributes the newer one adds or changes. from == "" compares against
// __first_version__'s empty root: nothing is shared, nothing is listed. The result is
// sorted by path, then name.
func AttrChanges(f *versions.File, from, to, rel string) ([]AttrChange, error) {
	if from == "" {
		return nil, nil
	}
	var paths []string
	if rel = strings.Trim(rel, "/"); rel != "" {
		paths = []string{rel}
	} else {
		a, err := objects(f, from)
		if err != nil {
			return nil, err
		}
		b, err := objects(f, to)
		if err != nil {
			return nil, err
		}
		for _, p := range b {
			if _, ok := slices.BinarySearch(a, p); ok {
				paths = append(paths, p)
			}
		}
	}
	var out []AttrChange
	for _, p := range paths {
		old, err := attrTexts(f, from, p)
		if err != nil {
			return nil, err
		}
		cur, err := attrTexts(f, to, p)
		if err != nil {
			return nil, err
		}
		if old == nil || cur == nil {
			continue // rel is not in both versions
		}
		names := make([]string, 0, len(old)+len(cur))
		for n := range old {
			names = append(names, n)
		}
		for n := range cur {
			if _, ok := old[n]; !ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			if p == "" && slices.Contains(versionMetadata, n) {
				continue
			}
			a, inOld := old[n]
			b, inNew := cur[n]
			c := AttrChange{Path: p, Name: n}
			switch {
			case !inOld:
				c.Kind, c.New = Added, b.text
			case !inNew && p == "":
				continue // not carried over, not removed (see above)
			case !inNew:
				c.Kind, c.Old = Removed, a.text
			case a.text != b.text:
				c.Kind, c.Old, c.New = Modified, a.text, b.text
			case a.dtype != b.dtype:
				c.Kind, c.Old, c.New = Modified, a.text+" ("+a.dtype+")", b.text+" ("+b.dtype+")"
			default:
				continue
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// attrValue is an attribute as AttrChanges compares it.
type attrValue struct{ text, dtype string }

// attrTexts reads the attributes of the object at rel in version v (rel "" is the
// version's group); nil when v holds no such object.
func attrTexts(f *versions.File, v, rel string) (map[string]attrValue, error) {
	p := versions.VersionGroup(v)
	if rel != "" {
		p += "/" + rel
	}
	k, err := f.HDF5().Kind(p)
	if err != nil {
		return nil, err
	}
	if k != h5.KindGroup && k != h5.KindDataset {
		return nil, nil
	}
	attrs, err := f.Attrs(p)
	if err != nil {
		return nil, fmt.Errorf("attributes of %s: %w", p, err)
	}
	out := make(map[string]attrValue, len(attrs))
	for _, a := range attrs {
		text, err := h5json.AttrText(a)
		if err != nil {
			return nil, fmt.Errorf("attribute %s of %s: %w", a.Name, p, err)
		}
		out[a.Name] = attrValue{string(text), a.Type.DType}
	}
	return out, nil
}

// objects lists the groups and datasets of version v by their path relative to it, ""
// (its own group) first, sorted.
func objects(f *versions.File, v string) ([]string, error) {
	h := f.HDF5()
	out := []string{""}
	var walk func(rel string) error
	walk = func(rel string) error {
		dir := versions.VersionGroup(v)
		if rel != "" {
			dir += "/" + rel
		}
		ms, err := h.Members(dir)
		if err != nil {
			return err
		}
		for _, m := range ms {
			p := m.Name
			if rel != "" {
				p = rel + "/" + m.Name
			}
			switch m.Kind {
			case h5.KindDataset:
				out = append(out, p)
			case h5.KindGroup:
				out = append(out, p)
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}
