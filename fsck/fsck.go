// Package fsck verifies the invariants a versioned-hdf5 file must keep (format
// specification section 10): version metadata and attribute types, that every hash-table
// row matches the bytes of its slot, and that every mapping is chunk-aligned, in bounds
// and consistent with the hash table. It only reads, so it is safe on a mounted file.
package fsck

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
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
	groups   map[string]*dataGroup // by the data group's path
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
	// libhdf5 reads every object here: a format it does not know is one refusal, not a
	// finding per object.
	if err := f.CheckFormat(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c := &checker{f: f, h: f.HDF5(), groups: map[string]*dataGroup{}, unreadable: map[string]bool{}, progress: progress}
	if err := c.versions(); err != nil {
		return nil, err
	}
	c.names()
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
	cur, _ := c.vstr(vg, versions.AttrCurrentVersion)
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
		if prev, ok := c.vstr(p, versions.AttrPrevVersion); ok && !names[prev] {
			c.add(p, "prev_version %q does not exist", prev)
		}
		committed := false
		if a, ok := c.attr(p, versions.AttrCommitted); !ok {
			c.add(p, "committed missing")
		} else if b, isBool := a.Value.(bool); !isBool || a.Type.DType != "|b1" {
			c.add(p, "committed is not an h5py bool (%s)", a.Type.DType)
		} else {
			committed = b
		}
		// A commit writes the timestamp when it completes: a group left by a commit that died
		// (committed=False, ignored by every reader) may lack it.
		if _, ok, _ := c.h.Attr(p, versions.AttrTimestamp); ok || committed {
			if ts, ok := c.vstr(p, versions.AttrTimestamp); ok && !canonicalTimestamp.MatchString(ts) {
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

// readCheckCells bounds the datasets fsck also reads as the mount does (versions.File):
// its chunk map costs memory in proportion to the chunks. Larger ones are checked by their
// mappings alone, streamed from the file's bytes.
const readCheckCells = 1 << 20

// maxDatasetFindings bounds what one dataset adds: a damaged list of ten million mappings
// would otherwise make ten million findings.
const maxDatasetFindings = 100

// dataGroup is what the checks of a data group's hash table need, gathered from the
// versions' datasets that use it.
type dataGroup struct {
	raw     string  // raw_data's path
	info    h5.Info // raw_data's
	typ     []byte  // raw_data's datatype message as stored (nil where h5meta does not read it)
	strings bool    // variable-length strings
	// ext[slot] is 1 + the index in exts of the trimmed extent mappings use for the slot (0:
	// none); a slot mapped with several extents has the others in more[slot].
	ext  []int32
	exts [][]int64
	idx  map[string]int32
	more map[int64][]int32
}

// use records that a mapping reads slot with extent l.
func (g *dataGroup) use(slot int64, l []int64) {
	key := fmt.Sprint(l)
	k, ok := g.idx[key]
	if !ok {
		k = int32(len(g.exts))
		g.exts = append(g.exts, slices.Clone(l))
		g.idx[key] = k
	}
	if slot < 0 || slot >= int64(len(g.ext)) { // beyond raw_data: reported by the mapping check
		return
	}
	switch cur := g.ext[slot]; {
	case cur == 0:
		g.ext[slot] = k + 1
	case cur != k+1 && !slices.Contains(g.more[slot], k):
		g.more[slot] = append(g.more[slot], k)
	}
}

// extents are the extents mappings use for slot.
func (g *dataGroup) extents(slot int64) [][]int64 {
	if slot < 0 || slot >= int64(len(g.ext)) || g.ext[slot] == 0 {
		return nil
	}
	out := [][]int64{g.exts[g.ext[slot]-1]}
	for _, k := range g.more[slot] {
		out = append(out, g.exts[k])
	}
	return out
}

// group returns the data group whose raw_data is at raw, opening it on first use.
func (c *checker) group(raw string) (*dataGroup, error) {
	dir := path.Dir(raw)
	if g, ok := c.groups[dir]; ok {
		return g, nil
	}
	d, err := c.h.OpenDataset(raw)
	if err != nil {
		return nil, err
	}
	info := d.Info()
	d.Close()
	if info.Layout != h5.Chunked || len(info.Chunks) == 0 || len(info.Chunks) != len(info.Shape) {
		return nil, fmt.Errorf("%s is not chunked", raw)
	}
	slots := info.Shape[0] / info.Chunks[0]
	g := &dataGroup{raw: raw, info: info, strings: info.Type.VlenString, ext: make([]int32, slots),
		idx: map[string]int32{}, more: map[int64][]int32{}}
	if hdr, ok, err := c.h.DatasetHeader(raw); err == nil && ok {
		g.typ = hdr.Type
	}
	if a, ok := c.attr(raw, "chunks"); !ok || !slices.Equal(asInts(a.Value), info.Chunks) {
		c.add(raw, "attribute chunks %v, HDF5 chunk dims %v", a.Value, info.Chunks)
	}
	c.groups[dir] = g
	return g, nil
}

// gridCells is the number of chunks in the grid of a dataset of shape with chunks.
func gridCells(shape, chunks []int64) int64 {
	if len(shape) != len(chunks) {
		return 0 // a damaged rank, which the mapping checks report
	}
	n := int64(1)
	for i, s := range shape {
		n *= (s + chunks[i] - 1) / chunks[i]
	}
	return n
}

// errStop ends a scan of mappings early.
var errStop = errors.New("stop")

func (c *checker) dataset(p string) error {
	hdr, ok, err := c.h.DatasetHeader(p)
	if err != nil {
		c.add(p, "unreadable: %v", err)
		return nil
	}
	var first string // the first mapping's source: the dataset's raw_data
	if ok {
		_, ok, err = c.h.VirtualMappings(p, func(m h5.Mapping) error {
			first = m.SrcDataset
			return errStop
		})
	}
	if !ok || first == "" || (err != nil && !errors.Is(err, errStop)) {
		return c.datasetThroughHDF5(p)
	}
	g, err := c.group(first)
	if err != nil {
		c.add(p, "unreadable: raw_data %s: %v", first, err)
		return nil
	}
	if raw, ok := c.vstr(p, versions.AttrRawData); ok && raw != g.raw {
		c.add(p, "raw_data attribute %q, mappings use %q", raw, g.raw)
	}
	if !slices.Equal(hdr.MaxShape, hdr.Shape) {
		c.add(p, "maxshape %v != shape %v", hdr.MaxShape, hdr.Shape)
	}
	if g.typ == nil || !bytes.Equal(g.typ, hdr.Type) {
		// Equal types may be encoded differently: libhdf5 decides.
		if err := c.sameType(p, g); err != nil {
			return err
		}
	}
	cells := gridCells(hdr.Shape, g.info.Chunks)
	if cells <= readCheckCells {
		if _, err := c.f.Dataset(p); err != nil {
			c.add(p, "unreadable: %v", err)
			return nil
		}
	}
	var found []Finding // kept once the list's checksum holds
	more := 0
	add := func(format string, args ...any) {
		if len(found) < maxDatasetFindings {
			found = append(found, Finding{p, fmt.Sprintf(format, args...)})
		} else {
			more++
		}
	}
	seen := make([]uint64, (cells+63)/64)
	_, _, err = c.h.VirtualMappings(p, func(m h5.Mapping) error {
		c.mapping(m, hdr.Shape, g, seen, add)
		return nil
	})
	if err != nil {
		c.add(p, "mappings unreadable: %v", err)
		return nil
	}
	c.findings = append(c.findings, found...)
	if more > 0 {
		c.add(p, "%d more problems in its mappings", more)
	}
	return nil
}

// mapping checks one mapping of a dataset of the given shape reading g's raw_data, marks
// its chunk in seen (one bit a chunk of the grid) and records the slot's extent.
func (c *checker) mapping(m h5.Mapping, shape []int64, g *dataGroup, seen []uint64, add func(string, ...any)) {
	chunks, rawShape := g.info.Chunks, g.info.Shape
	where := fmt.Sprintf("mapping at %v", m.VStart)
	if m.SrcFile != "." || m.SrcDataset != g.raw {
		add("%s: source %s:%s", where, m.SrcFile, m.SrcDataset)
	}
	if len(m.VStart) != len(shape) || len(m.SrcStart) != len(chunks) || len(shape) != len(chunks) {
		add("%s: rank %d, the dataset's %d", where, len(m.VStart), len(shape))
		return
	}
	aligned := true
	for i := range m.VStart {
		want := min(chunks[i], shape[i]-m.VStart[i])
		switch {
		case m.VStart[i]%chunks[i] != 0:
			add("%s: not chunk-aligned", where)
			aligned = false
		case m.VCount[i] != want || m.SrcCount[i] != want:
			add("%s: extent %v/%v, chunk's trimmed extent %d on axis %d", where, m.VCount, m.SrcCount, want, i)
		case i > 0 && m.SrcStart[i] != 0:
			add("%s: source starts at %v", where, m.SrcStart)
		case i == 0 && m.SrcStart[0]%chunks[0] != 0:
			add("%s: source row %d is not a slot", where, m.SrcStart[0])
		case m.SrcStart[i]+m.SrcCount[i] > rawShape[i]:
			add("%s: source beyond raw_data's %v", where, rawShape)
		}
	}
	if aligned {
		cell := int64(0) // the chunk's index in the grid, C order
		for i := range m.VStart {
			n := (shape[i] + chunks[i] - 1) / chunks[i]
			cell = cell*n + m.VStart[i]/chunks[i]
		}
		if cell >= 0 && cell/64 < int64(len(seen)) {
			if seen[cell/64]&(1<<(cell%64)) != 0 {
				add("%s: chunk mapped twice", where)
			}
			seen[cell/64] |= 1 << (cell % 64)
		}
	}
	g.use(m.SrcStart[0]/chunks[0], m.VCount)
}

// sameType compares a virtual dataset's type with its raw_data's through libhdf5, which
// opens the virtual dataset (decoding its mappings): only for headers whose bytes differ.
func (c *checker) sameType(p string, g *dataGroup) error {
	vds, err := c.h.OpenDataset(p)
	if err != nil {
		c.add(p, "unreadable: %v", err)
		return nil
	}
	defer vds.Close()
	if t := vds.Info().Type; t.DType != g.info.Type.DType {
		c.add(p, "dtype %s, raw_data has %s", t.DType, g.info.Type.DType)
	}
	return nil
}

// datasetThroughHDF5 checks a dataset whose header or mappings h5meta does not read, as
// the mount reads it and through libhdf5.
func (c *checker) datasetThroughHDF5(p string) error {
	d, err := c.f.Dataset(p)
	if err != nil {
		c.add(p, "unreadable: %v", err)
		return nil
	}
	if d.RawData == "" || d.RawDataset() == nil {
		c.add(p, "no raw_data")
		return nil
	}
	if raw, ok := c.vstr(p, versions.AttrRawData); ok && raw != d.RawData {
		c.add(p, "raw_data attribute %q, mappings use %q", raw, d.RawData)
	}
	g, err := c.group(d.RawData)
	if err != nil {
		c.add(p, "unreadable: raw_data %s: %v", d.RawData, err)
		return nil
	}
	if d.Type.DType != g.info.Type.DType {
		c.add(p, "dtype %s, raw_data has %s", d.Type.DType, g.info.Type.DType)
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
	seen := make([]uint64, (gridCells(d.Shape, g.info.Chunks)+63)/64)
	for _, m := range maps {
		c.mapping(m, d.Shape, g, seen, func(format string, args ...any) { c.add(p, format, args...) })
	}
	return nil
}

// hashTables checks every row of every used data group's hash table against its slot.
func (c *checker) hashTables() error {
	dirs := make([]string, 0, len(c.groups))
	for d := range c.groups {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		g := c.groups[d]
		if g.strings {
			continue // vlen hash tables are checked by versioned-hdf5's own rebuild only
		}
		if err := c.hashTable(d, g); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) hashTable(dir string, g *dataGroup) error {
	tp := versions.HashTableIn(dir)
	ht, err := c.h.OpenDataset(tp)
	if err != nil {
		c.add(tp, "missing: %v", err)
		return nil
	}
	defer ht.Close()
	a, ok := c.attr(tp, hashtable.LargestIndex)
	largest, isInt := a.Value.(int64)
	if !ok || !isInt {
		c.add(tp, "largest_index missing or not an integer")
		return nil
	}
	if ht.Info().Type.Size != hashtable.RowBytes || largest > ht.Info().Shape[0] {
		c.add(tp, "%d-byte rows, %d rows for largest_index %d", ht.Info().Type.Size, ht.Info().Shape[0], largest)
		return nil
	}
	chunks := g.info.Chunks
	if g.info.Shape[0] < largest*chunks[0] {
		c.add(g.raw, "%d rows, fewer than largest_index %d slots", g.info.Shape[0], largest)
	}
	raw, err := c.h.OpenDataset(g.raw)
	if err != nil {
		return err
	}
	defer raw.Close()
	size := g.info.Type.Size
	slot := make([]byte, size*int(chunkplan.Elements(chunks)))
	zero := make([]int64, len(chunks))
	return hashtable.Scan(ht, largest, func(i int64, r hashtable.Row) error {
		c.tick(tp, i, largest)
		start, stop := r.Start, r.Stop
		where := fmt.Sprintf("row %d (%d, %d)", i, start, stop)
		if start%chunks[0] != 0 || stop < start || stop-start > chunks[0] {
			c.add(tp, "%s: not a slot", where)
			return nil
		}
		st := make([]int64, len(chunks))
		st[0] = start
		if err := raw.ReadBox(st, chunks, chunks, zero, slot); err != nil {
			c.add(tp, "%s: slot unreadable: %v", where, err)
			return nil
		}
		// The row records L0; the other axes of L come from the mappings that use it. A
		// slot no mapping uses is checked with full extents on the other axes.
		extents := g.extents(start / chunks[0])
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
			if hashtable.Hash(slot, chunks, l, size) != r.Digest {
				c.add(tp, "%s: digest does not match the slot's contents with extent %s", where, hashtable.ShapeSuffix(l))
			}
		}
		return nil
	})
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
