package lifecycle

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/txn"
	"github.com/vh5fs/vh5fs/versions"
)

// ErrFirstVersion and ErrNoVersion are the refusals of Delete (wrapped with the name).
var (
	ErrFirstVersion = errors.New("cannot delete " + versions.FirstVersion)
	ErrNoVersion    = errors.New("no such version")
)

// Action is what a deletion does to one data group.
type Action int

// Actions.
const (
	Keep    Action = iota // no deleted version holds data of it: left alone
	Drop                  // no kept version holds it: the data group is unlinked
	Compact               // kept chunks move down, raw_data and hash_table shrink
)

func (a Action) String() string { return [...]string{"keep", "drop", "compact"}[a] }

// Group is the plan of one data group.
type Group struct {
	Path       string  // relative to /_version_data, e.g. "g/y"
	Action     Action  //
	Slots      int64   // raw_data's slots before
	Kept       []int64 // Compact: the old slot of each new slot, ascending
	Moves      int     // Compact: kept chunks whose slot changes
	Dropped    int64   // slots no kept version maps (Compact), or every slot (Drop)
	FreedBytes int64   // their stored bytes

	chunks  []int64           // raw_data's chunk dims
	extents map[int64][]int64 // Compact: the extent mapped from each kept slot
	rows    []byte            // Compact: hash_table's new rows; nil if it stays as it is
}

// Relink is a kept version whose prev_version changes.
type Relink struct{ Version, From, To string }

// Plan is what deleting versions does to a file.
type Plan struct {
	Delete     []string // the versions deleted, as given (duplicates dropped)
	Current    string   // current_version before
	NewCurrent string   // and after
	Relinks    []Relink // in version name order
	Groups     []Group  // every data group, in name order (DeleteBody: those it dropped)
	FreedBytes int64    // stored bytes of the chunks dropped
	Pending    []string // DeleteBody: the data groups it left to Reclaim, in name order
	// Blocked are the pending data groups that could not be reclaimed (Reclaim, Delete):
	// they stay pending, their unused chunks in place, every version reading whole.
	Blocked []Block
}

// Block is a pending data group the reclaim cannot compact, and why.
type Block struct {
	Group string // relative to /_version_data
	Err   error
}

func (b Block) String() string { return "data group " + b.Group + ": " + b.Err.Error() }

// blockedGroups lists the groups of bs.
func blockedGroups(bs []Block) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Group
	}
	return out
}

// Moves counts the chunks that change slot.
func (p *Plan) Moves() int {
	n := 0
	for _, g := range p.Groups {
		n += g.Moves
	}
	return n
}

// PlanDelete computes what deleting names from f does, reading only. It refuses
// __first_version__ (ErrFirstVersion) and names that are no version group (ErrNoVersion).
// The data groups earlier deletions left to reclaim (Pending) are compacted too.
func PlanDelete(f *versions.File, names []string) (*Plan, error) {
	return PlanDeleteProgress(f, names, nil)
}

// PlanDeleteProgress is PlanDelete, telling progress (if not nil) of each data group
// planned.
func PlanDeleteProgress(f *versions.File, names []string, progress Progress) (*Plan, error) {
	p, keptVersions, groups, err := planStart(f, names)
	if err != nil {
		return nil, err
	}
	pending, err := Pending(f.Path())
	if err != nil {
		return nil, err
	}
	h := f.HDF5()
	for i, g := range groups {
		isPending := slices.Contains(pending, g)
		pg, err := planGroup(h, g, p.Delete, keptVersions, isPending)
		if err != nil && isPending {
			// A group left pending by earlier deletions must not stop this one: unless
			// the versions deleted now hold it, it stays pending as it is.
			held, herr := holds(h, g, p.Delete)
			if herr == nil && !held {
				p.Blocked = append(p.Blocked, Block{g, err})
				p.Groups = append(p.Groups, Group{Path: g})
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("data group %s: %w", g, err)
		}
		p.Groups = append(p.Groups, *pg)
		p.FreedBytes += pg.FreedBytes
		progress.report(Step{Phase: Planning, Done: int64(i + 1), Total: int64(len(groups))})
	}
	return p, nil
}

// planStart plans the body of deleting names from f (planVersions) and lists the file's
// data groups, where every plan of a deletion or reclaim starts.
func planStart(f *versions.File, names []string) (p *Plan, kept, groups []string, err error) {
	if p, kept, err = planVersions(f, names); err != nil {
		return nil, nil, nil, err
	}
	groups, err = dataGroups(f.HDF5(), versions.DataRoot, "")
	return p, kept, groups, err
}

// planVersions plans the body of deleting names from f: the versions deleted, the
// relinks and current_version; and returns the versions kept.
func planVersions(f *versions.File, names []string) (*Plan, []string, error) {
	if !f.Versioned() {
		return nil, nil, fmt.Errorf("%s is not a versioned-hdf5 file", f.Path())
	}
	h := f.HDF5()
	members, listed, err := versionGroups(f)
	if err != nil {
		return nil, nil, err
	}
	all := map[string]bool{}
	var order []string // every version group but __first_version__, by name
	for _, m := range members {
		if m.Name == versions.FirstVersion {
			all[m.Name] = true
			continue
		}
		if m.Kind == h5.KindGroup {
			all[m.Name] = true
			order = append(order, m.Name)
		}
	}
	p := &Plan{}
	del := map[string]bool{}
	for _, n := range names {
		switch {
		case n == versions.FirstVersion:
			return nil, nil, ErrFirstVersion
		case !all[n]:
			return nil, nil, fmt.Errorf("%w: %q", ErrNoVersion, n)
		case !del[n]:
			del[n] = true
			p.Delete = append(p.Delete, n)
		}
	}
	prev := func(v string) (string, error) {
		s, ok, err := versions.PrevVersion(h, v)
		switch {
		case err != nil:
			return "", err
		case !ok:
			return "", fmt.Errorf("version %q has no prev_version", v)
		}
		return s, nil
	}
	// The nearest kept ancestor of v (v itself if kept), as the library walks it.
	kept := func(v string) (string, error) {
		for seen := 0; del[v]; seen++ {
			if seen > len(del) {
				return "", fmt.Errorf("prev_version of %q loops", v)
			}
			var err error
			if v, err = prev(v); err != nil {
				return "", err
			}
		}
		return v, nil
	}
	cur, ok, err := versions.Current(h)
	if err != nil {
		return nil, nil, err
	}
	if p.Current = cur; !ok || p.Current == "" {
		return nil, nil, fmt.Errorf("%s has no current_version", versions.VersionsGroup)
	}
	if p.NewCurrent, err = kept(p.Current); err != nil {
		return nil, nil, err
	}
	var keptVersions []string
	for _, v := range order {
		if del[v] {
			continue
		}
		keptVersions = append(keptVersions, v)
		from, ok := listed[v]
		switch {
		case ok && from == "":
			from = versions.FirstVersion
		case !ok:
			if from, err = prev(v); err != nil {
				return nil, nil, err
			}
		}
		to, err := kept(from)
		if err != nil {
			return nil, nil, err
		}
		if to != from {
			p.Relinks = append(p.Relinks, Relink{v, from, to})
		}
	}
	return p, keptVersions, nil
}

// versionGroups lists the members of the versions group, and the prev_version of each
// committed version ("" for __first_version__) as f lists them (from the file's bytes,
// h5meta). When every link is a committed version or __first_version__, the members come
// from that list too: libhdf5 would read every member's header and every version's
// attributes, most of the time of a deletion's body on a file of many versions.
func versionGroups(f *versions.File) ([]h5.Member, map[string]string, error) {
	h := f.HDF5()
	listed := map[string]string{}
	vs, err := f.Versions()
	if err != nil {
		return nil, nil, err
	}
	for _, v := range vs {
		listed[v.Name] = v.PrevVersion
	}
	n, err := h.NumLinks(versions.VersionsGroup)
	if err != nil {
		return nil, nil, err
	}
	first, err := h.Kind(versions.VersionGroup(versions.FirstVersion))
	if err != nil {
		return nil, nil, err
	}
	if first != h5.KindGroup || n != int64(len(vs))+1 {
		members, err := h.Members(versions.VersionsGroup)
		return members, listed, err
	}
	members := []h5.Member{{Name: versions.FirstVersion, Kind: h5.KindGroup}}
	for _, v := range vs {
		members = append(members, h5.Member{Name: v.Name, Kind: h5.KindGroup})
	}
	return members, listed, nil
}

// dataGroups lists the data groups under dir (rel: its path below /_version_data) as the
// library's walk finds them: groups holding a member named raw_data, by name.
func dataGroups(h *h5.File, dir, rel string) ([]string, error) {
	members, err := h.Members(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range members {
		if m.Kind != h5.KindGroup || (dir == versions.DataRoot && m.Name == "versions") {
			continue
		}
		k, err := h.Kind(versions.RawDataIn(dir + "/" + m.Name))
		if err != nil {
			return nil, err
		}
		if k != h5.KindMissing {
			out = append(out, rel+m.Name)
			continue
		}
		sub, err := dataGroups(h, dir+"/"+m.Name, rel+m.Name+"/")
		if err != nil {
			return nil, err
		}
		out = append(out, sub...)
	}
	return out, nil
}

// eachMapping calls fn with each mapping of version v's dataset at rel and returns its
// shape; present is false (fn not called) if v holds no dataset there. The mappings are
// decoded from the file's bytes where h5meta reads them (h5.File.VirtualMappings), which
// takes a fraction of what libhdf5 takes to open the dataset; else reset is called and
// libhdf5 reads them. With fn nil it reads the shape alone.
func eachMapping(h *h5.File, v, rel string, reset func(), fn func(h5.Mapping) error) (shape []int64, present bool, err error) {
	p := versions.InVersion(v, rel)
	// h5meta first: asking libhdf5 whether the dataset is there would keep its header in
	// libhdf5's cache, where an unlink must decode it (h5.File.Unlink).
	shape, ok, err := h.VirtualMappings(p, fn)
	if ok {
		return shape, true, err
	}
	if k, kerr := h.Kind(p); kerr != nil || k != h5.KindDataset {
		return nil, false, kerr
	}
	if err != nil {
		return nil, true, err
	}
	if reset != nil {
		reset()
	}
	d, err := h.OpenDataset(p)
	if err != nil {
		return nil, true, err
	}
	defer d.Close()
	if fn == nil {
		return d.Info().Shape, true, nil
	}
	maps, err := d.Mappings()
	if err != nil {
		return nil, true, err
	}
	for _, m := range maps {
		if err := fn(m); err != nil {
			return nil, true, err
		}
	}
	return d.Info().Shape, true, nil
}

// slotOf returns the raw_data slot a mapping reads and its extent, checking that it is
// one whole-slot corner as the library writes it.
func slotOf(m h5.Mapping, chunks []int64) (int64, error) {
	if len(m.SrcStart) != len(chunks) || len(m.SrcCount) != len(chunks) {
		return 0, fmt.Errorf("mapping of rank %d for chunks %v", len(m.SrcStart), chunks)
	}
	for i, s := range m.SrcStart {
		if (i == 0 && s%chunks[0] != 0) || (i > 0 && s != 0) || m.SrcCount[i] > chunks[i] {
			return 0, fmt.Errorf("mapping from %v/%v is not a chunk slot's corner", m.SrcStart, m.SrcCount)
		}
	}
	return m.SrcStart[0] / chunks[0], nil
}

// holds reports whether any of the versions holds data group rel as a dataset with a
// non-empty axis 0: whether deleting them can leave chunks of rel unused.
func holds(h *h5.File, rel string, vs []string) (bool, error) {
	for _, v := range vs {
		shape, present, err := eachMapping(h, v, rel, nil, nil)
		if err != nil {
			return false, err
		}
		if present && (len(shape) == 0 || shape[0] > 0) {
			return true, nil
		}
	}
	return false, nil
}

// planGroup plans data group rel against the versions kept: Keep unless one of the
// versions deleted holds it (holds) or an earlier deletion left it pending.
func planGroup(h *h5.File, rel string, deleted, keptVersions []string, pending bool) (*Group, error) {
	g := &Group{Path: rel}
	if !pending {
		held, err := holds(h, rel, deleted)
		if err != nil || !held {
			return g, err
		}
	}
	raw, err := h.OpenDataset(versions.RawDataOf(rel))
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	info := raw.Info()
	if info.Layout != h5.Chunked || len(info.Chunks) == 0 || len(info.Shape) != len(info.Chunks) {
		return nil, fmt.Errorf("raw_data is not chunked")
	}
	g.chunks = info.Chunks
	g.Slots = info.Shape[0] / info.Chunks[0]
	g.extents = map[int64][]int64{}
	inKept := false
	for _, v := range keptVersions {
		// A second pass (reset) finds the same extents: the checks are idempotent.
		_, present, err := eachMapping(h, v, rel, func() {}, func(m h5.Mapping) error {
			s, err := slotOf(m, g.chunks)
			if err != nil {
				return err
			}
			if !slices.Equal(m.VCount, m.SrcCount) {
				return fmt.Errorf("mapping %v/%v reads %v elements", m.VStart, m.VCount, m.SrcCount)
			}
			if e, ok := g.extents[s]; ok && !slices.Equal(e, m.SrcCount) {
				return fmt.Errorf("slot %d is mapped with extents %v and %v", s, e, m.SrcCount)
			}
			if _, ok := g.extents[s]; !ok {
				g.extents[s] = slices.Clone(m.SrcCount)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("version %s: %w", v, err)
		}
		inKept = inKept || present
	}
	if err := failAt("plan " + rel); err != nil {
		return nil, err
	}
	if !inKept {
		g.Action = Drop
	} else {
		g.Action = Compact
		for s := range g.extents {
			g.Kept = append(g.Kept, s)
		}
		sort.Slice(g.Kept, func(i, j int) bool { return g.Kept[i] < g.Kept[j] })
		for j, s := range g.Kept {
			if s != int64(j) {
				g.Moves++
			}
		}
		if g.Moves > 0 && !info.Type.Raw && !info.Type.VlenString {
			// Other variable-length elements are references into global heaps that no
			// reader here decodes: they cannot move raw, nor by value.
			return nil, fmt.Errorf("moving chunks of %s elements is not supported", info.Type.DType)
		}
		if g.rows, err = newHashRows(h, versions.HashTableOf(rel), g); err != nil {
			return nil, err
		}
	}
	// What the dropped slots take in the file.
	var coords [][]int64
	for s := int64(0); s < g.Slots; s++ {
		if _, ok := g.extents[s]; ok && g.Action == Compact {
			continue
		}
		c := make([]int64, len(g.chunks))
		c[0] = s * g.chunks[0]
		coords = append(coords, c)
	}
	g.Dropped = int64(len(coords))
	infos, err := raw.ChunkInfo(coords)
	if err != nil {
		return nil, err
	}
	for _, ci := range infos {
		if ci.Offset >= 0 {
			g.FreedBytes += ci.Size
		}
	}
	return g, nil
}

// Delete deletes versions from f (open read-write) as PlanDelete planned them, in one
// journaled sync (see the package doc), and returns the plan. The data groups left
// pending by earlier bodies (DeleteBody) are reclaimed with it.
func Delete(f *versions.File, names []string) (*Plan, error) {
	return DeleteProgress(f, names, nil)
}

// DeleteProgress is Delete, telling progress (if not nil) how it goes: each data group
// planned, each chunk moved and data group written, then the sync.
func DeleteProgress(f *versions.File, names []string, progress Progress) (*Plan, error) {
	if !f.Writable() {
		return nil, fmt.Errorf("%s is not open for writing", f.Path())
	}
	p, err := PlanDeleteProgress(f, names, progress)
	if err != nil {
		return nil, err
	}
	if err := execute(f.HDF5(), p, progress); err != nil {
		return nil, err
	}
	if err := keepPending(f.Path(), blockedGroups(p.Blocked)); err != nil {
		return nil, err
	}
	return p, nil
}

// failAt, in tests, makes execute fail at the named point ("body", "publish"), or the
// plan of a data group ("plan PATH").
var failAt = func(string) error { return nil }

// execute writes plan p in one transaction (package txn): the body, then the publish,
// guarded, cancelled whole on a failure before the sync.
func execute(h *h5.File, p *Plan, progress Progress) error {
	return txn.Run(h, txn.Change{
		Undo:    "deleted",
		Body:    func() error { return writeBody(h, p) },
		Publish: func() error { return writePublish(h, p.Groups, progress) },
		InPlace: true,
		Syncing: func() { progress.report(Step{Phase: Syncing}) },
	})
}

// writeBody writes the body of p: every listed version reads as before once it is
// applied. The attributes change before the unlinks free anything, so that libhdf5
// cannot place them in space a listed version still uses while the body is half applied.
func writeBody(h *h5.File, p *Plan) error {
	for _, r := range p.Relinks {
		if err := versions.Relink(h, r.Version, r.To); err != nil {
			return err
		}
	}
	if p.NewCurrent != p.Current {
		if err := versions.SetCurrent(h, p.NewCurrent); err != nil {
			return err
		}
	}
	doomed := make([]string, len(p.Delete))
	for i, v := range p.Delete {
		doomed[i] = versions.VersionGroup(v)
	}
	if err := h.Unlink(doomed...); err != nil {
		return err
	}
	return failAt("body")
}

// writePublish writes the compaction of groups, against the versions the file lists once
// the body is written, telling progress of each chunk moved and each group written.
func writePublish(h *h5.File, groups []Group, progress Progress) error {
	var kept []string
	ms, err := h.Members(versions.VersionsGroup)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.Kind == h5.KindGroup && m.Name != versions.FirstVersion {
			kept = append(kept, m.Name)
		}
	}
	st := Step{Phase: Compacting}
	for _, g := range groups {
		st.Moves += int64(g.Moves)
		if g.Action != Keep {
			st.Total++
		}
	}
	for i := range groups {
		g := &groups[i]
		if g.Action == Keep {
			continue
		}
		st.Group = g.Path
		progress.report(st)
		var err error
		switch g.Action {
		case Drop:
			err = h.Unlink(versions.DataGroupOf(g.Path))
		case Compact:
			err = compact(h, g, kept, func() {
				st.Moved++
				progress.report(st)
			})
		}
		if err != nil {
			return fmt.Errorf("data group %s: %w", g.Path, err)
		}
		st.Done++
		progress.report(st)
	}
	if err := h.CheckMappingLists(); err != nil {
		return err
	}
	return failAt("publish")
}

// compact moves g's kept chunks down, shrinks raw_data, rewrites hash_table and replaces
// the virtual datasets of the kept versions whose mappings change.
// moved is called after each chunk moved.
func compact(h *h5.File, g *Group, kept []string, moved func()) error {
	dir := versions.DataGroupOf(g.Path)
	raw, err := h.OpenDataset(versions.RawDataIn(dir))
	if err != nil {
		return err
	}
	defer raw.Close()
	info := raw.Info()
	newSlot := make(map[int64]int64, len(g.Kept))
	for j, s := range g.Kept {
		newSlot[s] = int64(j)
	}
	if err := moveChunks(raw, g, moved); err != nil {
		return err
	}
	dims := slices.Clone(info.Shape)
	dims[0] = int64(len(g.Kept)) * g.chunks[0]
	if !slices.Equal(dims, info.Shape) {
		if err := raw.SetExtent(dims); err != nil {
			return err
		}
	}
	if err := writeHashRows(h, versions.HashTableIn(dir), g.rows); err != nil {
		return err
	}
	if g.Moves == 0 { // every kept chunk stays in its slot: no mapping changes
		return nil
	}
	for _, v := range kept {
		if err := remapVersion(h, raw, v, g, newSlot); err != nil {
			return fmt.Errorf("version %s: %w", v, err)
		}
	}
	return nil
}

// moveChunks copies each kept chunk whose slot changes to its new slot, in ascending
// order: new slot j < old slot s_j, and every slot below j was written already, so a
// chunk is always read before its slot is written over. moved is called after each.
func moveChunks(raw *h5.Dataset, g *Group, moved func()) error {
	info := raw.Info()
	if info.Type.VlenString {
		return moveStrings(raw, g, moved)
	}
	rank := len(g.chunks)
	itemSize := int64(info.Type.Size)
	unfiltered := len(info.Filters) == 0
	var buf []byte
	for j, s := range g.Kept {
		if s == int64(j) {
			continue
		}
		from := make([]int64, rank)
		from[0] = s * g.chunks[0]
		to := make([]int64, rank)
		to[0] = int64(j) * g.chunks[0]
		ci, err := raw.ChunkInfo([][]int64{from})
		if err != nil {
			return err
		}
		if ci[0].Offset < 0 {
			// Mapped but never written: it reads as the fill value, and so must slot j.
			if err := writeFill(raw, to, g.chunks); err != nil {
				return err
			}
			moved()
			continue
		}
		if int64(cap(buf)) < ci[0].Size {
			buf = make([]byte, ci[0].Size)
		}
		b := buf[:ci[0].Size]
		mask, err := raw.ReadChunk(from, b)
		if err != nil {
			return err
		}
		if unfiltered && mask == 0 && int64(len(b)) == itemSize*chunkplan.Elements(g.chunks) {
			padFill(b, g.chunks, g.extents[s], info.Fill, itemSize)
		}
		if err := raw.WriteChunk(to, mask, b); err != nil {
			return err
		}
		moved()
	}
	return nil
}

// moveStrings moves g's kept chunks of variable-length strings as the library does
// (replay.py, _recreate_raw_data): by value, read and written through libhdf5, which
// stores the strings as new global heap objects (a chunk holds only references to them,
// which cannot be copied raw: the old objects go with the slots dropped, as the library
// leaves them). Outside the mapped extent the new slot holds "" (the library's fill,
// b"", for vlen strings); a slot mapped but never written reads as "" and is written so.
func moveStrings(raw *h5.Dataset, g *Group, moved func()) error {
	rank := len(g.chunks)
	for j, s := range g.Kept {
		if s == int64(j) {
			continue
		}
		from := make([]int64, rank)
		from[0] = s * g.chunks[0]
		to := make([]int64, rank)
		to[0] = int64(j) * g.chunks[0]
		vals, err := raw.ReadStrings(from, g.chunks)
		if err != nil {
			return fmt.Errorf("slot %d: %w", s, err)
		}
		padStrings(vals, g.chunks, g.extents[s])
		if err := raw.WriteStrings(to, g.chunks, vals); err != nil {
			return fmt.Errorf("slot %d to %d: %w", s, j, err)
		}
		moved()
	}
	return nil
}

// padStrings sets every element of the chunk vals (dims chunks, C order) outside the
// corner extent to "".
func padStrings(vals []string, chunks, extent []int64) {
	if slices.Equal(chunks, extent) {
		return
	}
	idx := make([]int64, len(chunks))
	for k := range vals {
		for i := range idx {
			if idx[i] >= extent[i] {
				vals[k] = ""
				break
			}
		}
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < chunks[i] {
				break
			}
			idx[i] = 0
		}
	}
}

// padFill sets every element of the unfiltered chunk b (dims chunks) outside the corner
// extent to fill: what the library writes around an edge chunk it moves.
func padFill(b []byte, chunks, extent []int64, fill []byte, itemSize int64) {
	if slices.Equal(chunks, extent) || len(fill) != int(itemSize) {
		return
	}
	idx := make([]int64, len(chunks))
	for off := int64(0); off < int64(len(b)); off += itemSize {
		inside := true
		for i := range idx {
			if idx[i] >= extent[i] {
				inside = false
				break
			}
		}
		if !inside {
			copy(b[off:off+itemSize], fill)
		}
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < chunks[i] {
				break
			}
			idx[i] = 0
		}
	}
}

// writeFill stores a whole chunk of the fill value at start, through libhdf5's pipeline.
func writeFill(raw *h5.Dataset, start, chunks []int64) error {
	info := raw.Info()
	if !info.Type.Raw || len(info.Fill) != info.Type.Size {
		return fmt.Errorf("slot at row %d is mapped but not stored", start[0])
	}
	n := chunkplan.Elements(chunks)
	b := bytes.Repeat(info.Fill, int(n))
	return raw.WriteBox(start, chunks, chunks, make([]int64, len(chunks)), b)
}

// newHashRows returns hash_table's rows after the compaction, one per kept slot in
// new-slot order: the old row's digest, the new start and stop (from the mapped extent),
// as the library's rebuilt table has them (a digest met twice keeps its first row, with
// the later slot); nil if the table stays as it is (rows and size).
func newHashRows(h *h5.File, p string, g *Group) ([]byte, error) {
	ht, err := h.OpenDataset(p)
	if err != nil {
		return nil, err
	}
	defer ht.Close()
	largest, ok, err := hashtable.Largest(h, p)
	if err != nil || !ok || largest > ht.Info().Shape[0] {
		return nil, fmt.Errorf("hash_table has no usable largest_index")
	}
	old := make([]hashtable.Row, 0, largest)
	byStart := make(map[int64]int64, largest)
	if err := hashtable.Scan(ht, largest, func(i int64, r hashtable.Row) error {
		old = append(old, r)
		byStart[r.Start] = i
		return nil
	}); err != nil {
		return nil, err
	}
	c0 := g.chunks[0]
	rows := []byte{}
	seen := map[[32]byte]int{}
	unchanged := int64(len(g.Kept)) == largest
	for j, s := range g.Kept {
		start, stop := s*c0, s*c0+g.extents[s][0]
		i, ok := byStart[start]
		if !ok || old[i].Stop != stop {
			return nil, fmt.Errorf("hash_table has no row for slot %d (rows %d to %d)", s, start, stop)
		}
		row := hashtable.Row{Digest: old[i].Digest, Start: int64(j) * c0, Stop: int64(j)*c0 + g.extents[s][0]}
		if k, dup := seen[row.Digest]; dup {
			copy(rows[k*hashtable.RowBytes:], row.Append(nil))
			unchanged = false
			continue
		}
		seen[row.Digest] = len(rows) / hashtable.RowBytes
		unchanged = unchanged && int64(j) < largest && row == old[j]
		rows = row.Append(rows)
	}
	if unchanged && int64(len(rows)/hashtable.RowBytes) == largest && max(largest, 1) == ht.Info().Shape[0] {
		return nil, nil
	}
	return rows, nil
}

// writeHashRows gives hash_table rows (nil: leave it) and largest_index; the table keeps
// at least one row, zero when there is none, as the library creates it.
func writeHashRows(h *h5.File, p string, rows []byte) error {
	if rows == nil {
		return nil
	}
	ht, err := h.OpenDataset(p)
	if err != nil {
		return err
	}
	defer ht.Close()
	n := int64(len(rows) / hashtable.RowBytes)
	if n == 0 {
		rows = make([]byte, hashtable.RowBytes)
	}
	return hashtable.Write(h, ht, p, 0, rows, max(n, 1), n)
}

// remapVersion replaces version v's virtual dataset of g by one reading the new slots, if
// any of its chunks moved: created beside it (_tmp_NAME), given its attributes, then moved
// over it, as the library does.
func remapVersion(h *h5.File, raw *h5.Dataset, v string, g *Group, newSlot map[int64]int64) error {
	vpath := versions.InVersion(v, g.Path)
	rank := len(g.chunks)
	var vs, cs, ss []int64 // the new mappings, flat (h5.File.CreateVirtualFlat)
	changed := false
	shape, present, err := eachMapping(h, v, g.Path, func() {
		vs, cs, ss, changed = vs[:0], cs[:0], ss[:0], false
	}, func(m h5.Mapping) error {
		s, err := slotOf(m, g.chunks)
		if err != nil {
			return err
		}
		j, ok := newSlot[s]
		if !ok {
			return fmt.Errorf("slot %d of %s is not kept", s, vpath)
		}
		changed = changed || j != s
		vs, cs = append(vs, m.VStart...), append(cs, m.VCount...)
		ss = append(ss, j*g.chunks[0])
		ss = append(ss, make([]int64, rank-1)...)
		return nil
	})
	if err != nil || !present || !changed {
		return err
	}
	// Slots move only for raw element types, whose fill value raw_data's is, and for
	// variable-length strings, whose fill (nil) the library leaves unset too (planGroup).
	info := raw.Info()
	tmp := path.Join(path.Dir(vpath), "_tmp_"+path.Base(vpath))
	if err := h.CreateVirtualFlat(tmp, raw, shape, info.Fill, vs, cs, ss); err != nil {
		return err
	}
	return h.Replace(vpath, tmp)
}
