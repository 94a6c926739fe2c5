// Package fsck verifies the invariants a versioned-hdf5 file must keep (format
// specification section 10): version metadata and attribute types, that every hash-table
// row matches the bytes of its slot, and that every mapping is chunk-aligned, in bounds
// and consistent with the hash table. It only reads, so it is safe on a mounted file.
package fsck

import (
	"encoding/binary"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/versions"
)

// Finding is one violated invariant.
type Finding struct {
	Object  string // HDF5 path
	Problem string
}

func (f Finding) String() string { return f.Object + ": " + f.Problem }

var canonicalTimestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?\+0000$`)

type checker struct {
	f        *versions.File
	h        *h5.File
	findings []Finding
	// slots[dataGroup][row] = the trimmed extents mappings use for that slot
	extents map[string]map[int64][][]int64
	chunks  map[string][]int64
	types   map[string]*versions.Dataset
	// unreadable[obj] is set once obj's attributes were found corrupt (reported once).
	unreadable map[string]bool
	// progress, if set, hears of each step: phase, steps done, steps in the phase.
	progress func(phase string, done, total int64)
}

func (c *checker) tick(phase string, done, total int64) {
	if c.progress != nil {
		c.progress(phase, done, total)
	}
}

func (c *checker) add(obj, format string, args ...any) {
	c.findings = append(c.findings, Finding{obj, fmt.Sprintf(format, args...)})
}

// Check verifies the file at path. The error is for a file that cannot be checked at all.
func Check(file string) ([]Finding, error) { return CheckProgress(file, nil) }

// CheckProgress is Check, calling progress (if not nil) before each version and each
// hash-table row it checks: phase is "versions" or the hash table's path.
func CheckProgress(file string, progress func(phase string, done, total int64)) ([]Finding, error) {
	f, err := versions.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !f.Versioned() {
		return nil, fmt.Errorf("%s: not a versioned-hdf5 file", file)
	}
	c := &checker{f: f, h: f.HDF5(), extents: map[string]map[int64][][]int64{}, chunks: map[string][]int64{}, types: map[string]*versions.Dataset{}, unreadable: map[string]bool{}, progress: progress}
	if err := c.versions(); err != nil {
		return nil, err
	}
	if err := c.hashTables(); err != nil {
		return nil, err
	}
	return c.findings, nil
}

// readable reads obj's attributes from the file's bytes first, as the mount does: libhdf5
// can loop forever on some corrupt metadata (a torn global heap), so it is not asked about
// an object whose attributes are found corrupt.
func (c *checker) readable(obj string) bool {
	if c.unreadable[obj] {
		return false
	}
	if err := c.f.CheckAttrs(obj); err != nil {
		c.add(obj, "attributes unreadable: %s", strings.TrimPrefix(err.Error(), obj+": "))
		c.unreadable[obj] = true
		return false
	}
	return true
}

// attr is obj's attribute name, reporting an unreadable one.
func (c *checker) attr(obj, name string) (h5.Attr, bool) {
	if !c.readable(obj) {
		return h5.Attr{}, false
	}
	a, ok, err := c.h.Attr(obj, name)
	if err != nil {
		c.add(obj, "attribute %s unreadable: %v", name, err)
		return h5.Attr{}, false
	}
	return a, ok
}

func (c *checker) vstr(obj, name string) (string, bool) {
	a, ok := c.attr(obj, name)
	if !ok {
		if !c.unreadable[obj] {
			c.add(obj, "attribute %s missing", name)
		}
		return "", false
	}
	s, isString := a.Value.(string)
	if !isString || !a.Type.VlenString || a.Shape != nil {
		c.add(obj, "attribute %s is not a scalar variable-length string (%s)", name, a.Type.DType)
		return "", false
	}
	return s, true
}

func (c *checker) versions() error {
	vg := versions.VersionsGroup
	cur, _ := c.vstr(vg, "current_version")
	if a, ok := c.attr(vg, "data_version"); !ok {
		if !c.unreadable[vg] {
			c.add(vg, "data_version missing")
		}
	} else if v, isInt := a.Value.(int64); !isInt || v != versions.SupportedDataVersion || a.Type.DType != "<i8" {
		c.add(vg, "data_version is %v (%s), want int64 4", a.Value, a.Type.DType)
	}
	members, err := c.h.Members(vg)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, m := range members {
		names[m.Name] = m.Kind == h5.KindGroup
	}
	if !names[versions.FirstVersion] {
		c.add(vg, "no %s group", versions.FirstVersion)
	}
	if !names[cur] && !c.unreadable[vg] {
		c.add(vg, "current_version %q is not a version", cur)
	}
	for i, m := range members {
		c.tick("versions", int64(i), int64(len(members)))
		if m.Name == versions.FirstVersion {
			continue
		}
		p := vg + "/" + m.Name
		if m.Kind != h5.KindGroup {
			c.add(p, "not a group")
			continue
		}
		if !c.readable(p) {
			continue
		}
		if prev, ok := c.vstr(p, "prev_version"); ok && !names[prev] {
			c.add(p, "prev_version %q does not exist", prev)
		}
		committed := false
		if a, ok := c.attr(p, "committed"); !ok {
			c.add(p, "committed missing")
		} else if b, isBool := a.Value.(bool); !isBool || a.Type.DType != "|b1" {
			c.add(p, "committed is not an h5py bool (%s)", a.Type.DType)
		} else {
			committed = b
		}
		// A commit writes the timestamp when it completes: a group left by a commit that died
		// (committed=False, ignored by every reader) may lack it.
		if _, ok, _ := c.h.Attr(p, "timestamp"); ok || committed {
			if ts, ok := c.vstr(p, "timestamp"); ok && !canonicalTimestamp.MatchString(ts) {
				c.add(p, "timestamp %q is not canonical", ts)
			}
		}
		if committed {
			if err := c.tree(p, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *checker) tree(dir, rel string) error {
	members, err := c.h.Members(dir)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Kind == h5.KindOther { // List leaves these out: the mount does not serve them
			c.add(dir+"/"+m.Name, "not a hard link to a group or dataset (a soft or external link, or a named datatype)")
		}
	}
	entries, err := c.f.List(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := dir + "/" + e.Name
		if e.IsGroup {
			if err := c.tree(p, path.Join(rel, e.Name)); err != nil {
				return err
			}
			continue
		}
		if err := c.dataset(p); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) dataset(p string) error {
	d, err := c.f.Dataset(p)
	if err != nil {
		c.add(p, "unreadable: %v", err)
		return nil
	}
	if d.RawData == "" || d.RawDataset() == nil {
		c.add(p, "no raw_data")
		return nil
	}
	if raw, ok := c.vstr(p, "raw_data"); ok && raw != d.RawData {
		c.add(p, "raw_data attribute %q, mappings use %q", raw, d.RawData)
	}
	group := d.DataGroup()
	c.types[group] = d
	raw := d.RawDataset().Info()
	chunks := raw.Chunks
	c.chunks[group] = chunks
	if a, ok := c.attr(d.RawData, "chunks"); !ok || !slices.Equal(asInts(a.Value), chunks) {
		c.add(d.RawData, "attribute chunks %v, HDF5 chunk dims %v", a.Value, chunks)
	}
	if d.Type.DType != raw.Type.DType {
		c.add(p, "dtype %s, raw_data has %s", d.Type.DType, raw.Type.DType)
	}
	vds, err := c.h.OpenDataset(p)
	if err != nil {
		return err
	}
	defer vds.Close()
	if !slices.Equal(vds.Info().MaxShape, d.Shape) {
		c.add(p, "maxshape %v != shape %v", vds.Info().MaxShape, d.Shape)
	}
	maps, err := vds.Mappings()
	if err != nil {
		c.add(p, "mappings unreadable: %v", err)
		return nil
	}
	if c.extents[group] == nil {
		c.extents[group] = map[int64][][]int64{}
	}
	seen := map[string]bool{}
	for _, m := range maps {
		where := fmt.Sprintf("mapping at %v", m.VStart)
		if m.SrcFile != "." || m.SrcDataset != d.RawData {
			c.add(p, "%s: source %s:%s", where, m.SrcFile, m.SrcDataset)
		}
		for i := range m.VStart {
			want := min(chunks[i], d.Shape[i]-m.VStart[i])
			switch {
			case m.VStart[i]%chunks[i] != 0:
				c.add(p, "%s: not chunk-aligned", where)
			case m.VCount[i] != want || m.SrcCount[i] != want:
				c.add(p, "%s: extent %v/%v, chunk's trimmed extent %d on axis %d", where, m.VCount, m.SrcCount, want, i)
			case i > 0 && m.SrcStart[i] != 0:
				c.add(p, "%s: source starts at %v", where, m.SrcStart)
			case i == 0 && m.SrcStart[0]%chunks[0] != 0:
				c.add(p, "%s: source row %d is not a slot", where, m.SrcStart[0])
			case m.SrcStart[i]+m.SrcCount[i] > raw.Shape[i]:
				c.add(p, "%s: source beyond raw_data's %v", where, raw.Shape)
			}
		}
		key := fmt.Sprint(m.VStart)
		if seen[key] {
			c.add(p, "%s: chunk mapped twice", where)
		}
		seen[key] = true
		c.extents[group][m.SrcStart[0]] = append(c.extents[group][m.SrcStart[0]], m.VCount)
	}
	return nil
}

// hashTables checks every row of every used data group's hash table against its slot.
func (c *checker) hashTables() error {
	groups := make([]string, 0, len(c.types))
	for g := range c.types {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	for _, g := range groups {
		d := c.types[g]
		if d.Strings {
			continue // vlen hash tables are checked by versioned-hdf5's own rebuild only
		}
		if err := c.hashTable(g, d); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) hashTable(group string, d *versions.Dataset) error {
	tp := group + "/hash_table"
	ht, err := c.h.OpenDataset(tp)
	if err != nil {
		c.add(tp, "missing: %v", err)
		return nil
	}
	defer ht.Close()
	a, ok := c.attr(tp, "largest_index")
	largest, isInt := a.Value.(int64)
	if !ok || !isInt {
		c.add(tp, "largest_index missing or not an integer")
		return nil
	}
	if ht.Info().Type.Size != 48 || largest > ht.Info().Shape[0] {
		c.add(tp, "%d-byte rows, %d rows for largest_index %d", ht.Info().Type.Size, ht.Info().Shape[0], largest)
		return nil
	}
	chunks := c.chunks[group]
	raw := d.RawDataset()
	if raw.Info().Shape[0] < largest*chunks[0] {
		c.add(d.RawData, "%d rows, fewer than largest_index %d slots", raw.Info().Shape[0], largest)
	}
	rows := make([]byte, 48*largest)
	if largest > 0 {
		if err := ht.ReadBox([]int64{0}, []int64{largest}, []int64{largest}, []int64{0}, rows); err != nil {
			return err
		}
	}
	slot := make([]byte, d.Type.Size*int(chunkplan.Elements(chunks)))
	zero := make([]int64, len(chunks))
	for i := int64(0); i < largest; i++ {
		c.tick(tp, i, largest)
		r := rows[48*i : 48*(i+1)]
		start := int64(binary.LittleEndian.Uint64(r[32:]))
		stop := int64(binary.LittleEndian.Uint64(r[40:]))
		where := fmt.Sprintf("row %d (%d, %d)", i, start, stop)
		if start%chunks[0] != 0 || stop < start || stop-start > chunks[0] {
			c.add(tp, "%s: not a slot", where)
			continue
		}
		st := make([]int64, len(chunks))
		st[0] = start
		if err := raw.ReadBox(st, chunks, chunks, zero, slot); err != nil {
			c.add(tp, "%s: slot unreadable: %v", where, err)
			continue
		}
		var digest [32]byte
		copy(digest[:], r)
		// The row records L0; the other axes of L come from the mappings that use it. A slot
		// no mapping uses is checked with full extents on the other axes.
		extents := c.extents[group][start]
		if len(extents) == 0 {
			l := slices.Clone(chunks)
			l[0] = stop - start
			extents = [][]int64{l}
		}
		for _, l := range extents {
			if l[0] != stop-start {
				c.add(tp, "%s: a mapping uses %d rows of it", where, l[0])
				continue
			}
			if commit.Hash(slot, chunks, l, d.Type.Size) != digest {
				c.add(tp, "%s: digest does not match the slot's contents with extent %s", where, commit.ShapeSuffix(l))
			}
		}
	}
	return nil
}

func asInts(v any) []int64 {
	switch x := v.(type) {
	case []int64:
		return x
	case int64:
		return []int64{x}
	}
	return nil
}

// Summary renders findings one per line.
func Summary(findings []Finding) string {
	var b strings.Builder
	for _, f := range findings {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
