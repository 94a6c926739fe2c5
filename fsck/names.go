package fsck

import (
	"fmt"

	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// NameNotes says, one line a name, which of f's names are dangling: their version was
// deleted (by a program that does not know the names) or made again under the same name,
// and the name leads nowhere. A dangling name is no problem of the file: vh5fs never
// follows it, and deleting it (vh5fs tag -d) is the user's choice. An unreadable names
// attribute is a finding of Check.
func NameNotes(f *versions.File) ([]string, error) {
	r, err := named.Read(f.HDF5())
	if err != nil || r.Empty() {
		return nil, err
	}
	vs, err := f.Versions()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range []struct {
		kind  string
		names map[string]named.Target
	}{{"tag", r.Tags}, {"branch", r.Branches}} {
		for _, name := range named.Names(k.names) {
			if t := k.names[name]; !named.Live(vs, t) {
				out = append(out, fmt.Sprintf("dangling: %s %s names version %s of %s, which is gone (deleted by another program); "+
					"vh5fs never follows it: delete it with vh5fs %s -d FILE %s", k.kind, name, t.Version, t.Timestamp, k.kind, name))
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
