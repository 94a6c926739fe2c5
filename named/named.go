// Package named owns a file's named references: tags, which name a version for good and
// hold it (no deletion removes a tagged version), and branches, which name a head that
// moves. They live in one attribute of the versions group, where versioned-hdf5 neither
// reads nor rewrites them (its commits, delete_versions, modify_metadata and hash-table
// rebuilds leave the group's other attributes in place):
//
//	/_version_data/versions  attribute "vh5fs_refs", a variable-length UTF-8 string:
//	{"format":1,"tags":{"release-1":{"version":"v2","timestamp":"2024-01-01 01:00:00.000000+0000"}},
//	 "branches":{"dev":{"version":"v3","timestamp":"..."}}}
//
// Each name records its version's timestamp beside its name: versioned-hdf5 can delete a
// version and later commit another of the same name, and a name must never follow it
// there. A name is live while a committed version of that name has that timestamp, and
// dangling otherwise (fsck reports it; the mount shows it as a link that leads nowhere).
// A file without names has no attribute: it stays byte for byte what it was. Every change
// is written through package txn, so a kill leaves the old names or the new ones.
package named

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/versions"
)

// Attr is the versions group's attribute that holds the names.
const Attr = "vh5fs_refs"

// format is the version of Attr's JSON this package writes and reads.
const format = 1

// Errors of name changes, wrapped with the name.
var (
	ErrExists   = errors.New("the name is taken by a tag or a branch (a tag never moves: delete it first)")
	ErrNotFound = errors.New("no such name")
	ErrName     = errors.New("not a valid name (letters, digits, '.', '_' and '-', starting with a letter or digit)")
	// ErrVersionName: wherever a version is taken, a version of a name comes first, so a
	// tag or branch named as a version would never be reached there.
	ErrVersionName = errors.New("the name is a version's name (the version would shadow the name wherever a version is taken): choose another name")
	ErrHeld        = errors.New("held by")
)

// Target is the version a name names, by its name and timestamp.
type Target struct {
	Version   string `json:"version"`
	Timestamp string `json:"timestamp"`
}

// Refs are a file's names.
type Refs struct {
	Tags     map[string]Target `json:"tags,omitempty"`
	Branches map[string]Target `json:"branches,omitempty"`
}

type stored struct {
	Format int `json:"format"`
	Refs
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)

// CheckName refuses a name that is not a valid tag or branch name (ErrName): one a shell,
// a path and the mount's links all carry unquoted.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%q: %w", name, ErrName)
	}
	return nil
}

// Decode reads Attr's value.
func Decode(b []byte) (Refs, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return Refs{}, fmt.Errorf("%s: %w", Attr, err)
	}
	if s.Format != format {
		return Refs{}, fmt.Errorf("%s: format %d, this vh5fs reads format %d: %w", Attr, s.Format, format, versions.ErrUnsupported)
	}
	return s.Refs, nil
}

// Encode is Attr's value for r: one line of JSON, the names sorted, so that the same
// names always make the same bytes.
func (r Refs) Encode() ([]byte, error) { return json.Marshal(stored{Format: format, Refs: r}) }

// Empty reports whether r names nothing.
func (r Refs) Empty() bool { return len(r.Tags) == 0 && len(r.Branches) == 0 }

// Clone is a copy of r whose maps r's changes leave alone.
func (r Refs) Clone() Refs {
	return Refs{Tags: maps.Clone(r.Tags), Branches: maps.Clone(r.Branches)}
}

// Read reads h's names (none if the file has no Attr).
func Read(h *h5.File) (Refs, error) {
	a, ok, err := h.Attr(versions.VersionsGroup, Attr)
	if err != nil || !ok {
		return Refs{}, err
	}
	s, isString := a.Value.(string)
	if !isString {
		return Refs{}, fmt.Errorf("%s of %s is not a string", Attr, versions.VersionsGroup)
	}
	return Decode([]byte(s))
}

// Write replaces h's names by r: the attribute, or none if r is empty. Call it in a
// transaction's publish (txn.Change).
func Write(h *h5.File, r Refs) error {
	if r.Empty() {
		if _, ok, err := h.Attr(versions.VersionsGroup, Attr); err != nil || !ok {
			return err
		}
		return h.DeleteAttr(versions.VersionsGroup, Attr)
	}
	b, err := r.Encode()
	if err != nil {
		return err
	}
	return h.SetAttrString(versions.VersionsGroup, Attr, string(b))
}

// Live reports whether t names a committed version of vs (the same name and timestamp).
func Live(vs []versions.Version, t Target) bool {
	return slices.ContainsFunc(vs, func(v versions.Version) bool { return v.Name == t.Version && v.Timestamp == t.Timestamp })
}

// TargetOf is the target naming v.
func TargetOf(v versions.Version) Target { return Target{Version: v.Name, Timestamp: v.Timestamp} }

// Holding lists, sorted, the tags that hold version v.
func (r Refs) Holding(v versions.Version) []string { return naming(r.Tags, v) }

// Heads lists, sorted, the branches whose head is version v.
func (r Refs) Heads(v versions.Version) []string { return naming(r.Branches, v) }

// Holders describes, tags first, every name that holds version v against deletion: "tag
// NAME" for a tag, "branch NAME" for a branch whose head it is (a deletion would leave the
// branch dangling).
func (r Refs) Holders(v versions.Version) []string {
	var out []string
	for _, name := range r.Holding(v) {
		out = append(out, "tag "+name)
	}
	for _, name := range r.Heads(v) {
		out = append(out, "branch "+name)
	}
	return out
}

func naming(m map[string]Target, v versions.Version) []string {
	var out []string
	for name, t := range m {
		if t == TargetOf(v) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Lookup finds a committed version by name: a versions.File's Version.
type Lookup func(name string) (versions.Version, bool, error)

// In is the committed version t names, found with lookup: one version looked up, not
// every version listed (Live). false if t dangles (its version is gone, or another has
// its name now).
func (t Target) In(lookup Lookup) (versions.Version, bool, error) {
	v, ok, err := lookup(t.Version)
	if err != nil || !ok || TargetOf(v) != t {
		return versions.Version{}, false, err
	}
	return v, true, nil
}

// Head is the committed version branch name has at its head, found with lookup:
// ErrNotFound if r has no such branch, versions.ErrNotFound if it dangles.
func (r Refs) Head(name string, lookup Lookup) (versions.Version, error) {
	t, ok := r.Branches[name]
	if !ok {
		return versions.Version{}, fmt.Errorf("branch %s: %w", name, ErrNotFound)
	}
	v, live, err := t.In(lookup)
	if err != nil {
		return versions.Version{}, err
	}
	if !live {
		return versions.Version{}, fmt.Errorf("branch %s is dangling: version %s of %s is gone: %w", name, t.Version, t.Timestamp, versions.ErrNotFound)
	}
	return v, nil
}

// Taken reports whether a tag or a branch is called name: the two share one namespace,
// so a name given where a version is taken means one version.
func (r Refs) Taken(name string) bool {
	_, tag := r.Tags[name]
	_, branch := r.Branches[name]
	return tag || branch
}

// Free refuses name for a new tag or branch of r, vs being the file's committed versions:
// a name a tag or a branch has (ErrExists), or a version (ErrVersionName). It is the one
// check of every way a name is made: vh5fs tag and branch, ln -s in tags/ and mkdir in
// branches/ of a mount all end in history's addName, which calls it.
func (r Refs) Free(name string, vs []versions.Version) error {
	if r.Taken(name) {
		return ErrExists
	}
	if slices.ContainsFunc(vs, func(v versions.Version) bool { return v.Name == name }) {
		return ErrVersionName
	}
	return nil
}

// Advance writes h's names with branch moved to t: a commit on the branch publishes its
// version with it, in the same transaction.
func Advance(h *h5.File, branch string, t Target) error {
	r, err := Read(h)
	if err != nil {
		return err
	}
	if _, ok := r.Branches[branch]; !ok {
		return fmt.Errorf("branch %s: %w", branch, ErrNotFound)
	}
	r = r.Clone()
	r.Branches[branch] = t
	return Write(h, r)
}

// Renamed is r with every name of version old naming new instead (a rename keeps the
// version's timestamp, so its names follow it).
func (r Refs) Renamed(old, new string) Refs {
	out := r.Clone()
	for _, m := range []map[string]Target{out.Tags, out.Branches} {
		for name, t := range m {
			if t.Version == old {
				t.Version = new
				m[name] = t
			}
		}
	}
	return out
}

// Names lists the names of m, sorted.
func Names(m map[string]Target) []string { return slices.Sorted(maps.Keys(m)) }
