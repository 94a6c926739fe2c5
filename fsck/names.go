package fsck

import (
	"fmt"

	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// NameNotes says, one line a name, which of f's names are dangling: their version was
// deleted (by a program that does not know the names) or made again under the same name,
// and the name leads nowhere. A dangling name is no problem of the file: vh5fs never
// follows it, and deleting it (vh5fs tag -d) is the user's choice. It notes too a live
// name that a version committed since under the same name shadows: wherever a version is
// taken, the version comes first (no tag or branch is made with a version's name, but a
// commit, a rename or another program can name a version after one). An unreadable
// names attribute is a finding of Check.
func NameNotes(f *versions.File) ([]string, error) {
	r, err := named.Read(f.HDF5())
	if err != nil || r.Empty() {
		return nil, err
	}
	vs, err := f.Versions()
	if err != nil {
		return nil, err
	}
	byName := make(map[string]versions.Version, len(vs))
	for _, v := range vs {
		byName[v.Name] = v
	}
	var out []string
	for _, k := range []struct {
		kind, dir string // dir: the mount's directory of the kind
		names     map[string]named.Target
	}{{"tag", "tags", r.Tags}, {"branch", "branches", r.Branches}} {
		for _, name := range named.Names(k.names) {
			t := k.names[name]
			if !named.Live(vs, t) {
				out = append(out, fmt.Sprintf("dangling: %s %s names version %s of %s, which is gone (deleted by another program); "+
					"vh5fs never follows it: delete it with vh5fs %s -d FILE %s", k.kind, name, t.Version, t.Timestamp, k.kind, name))
				continue
			}
			// A name on the version of its own name (a version renamed after its tag)
			// means the same version either way.
			if v, ok := byName[name]; ok && named.TargetOf(v) != t {
				out = append(out, fmt.Sprintf("shadowed: %s %s names version %s, but a version is called %s too (of %s), which "+
					"vh5fs commands take for %s (MNT/%s/%s still leads to %s): give the %s another name with vh5fs %s FILE NEWNAME %s, "+
					"then vh5fs %s -d FILE %s", k.kind, name, t.Version, name, v.Timestamp, name, k.dir, name, t.Version,
					k.kind, k.kind, t.Version, k.kind, name))
			}
		}
	}
	return out, nil
}

// names checks that the names attribute, if any, reads (package named).
func (c *checker) names() {
	if _, err := named.Read(c.h); err != nil {
		c.add(versions.VersionsGroup, "%v", err)
	}
}
