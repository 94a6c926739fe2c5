package commit

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/txn"
	"github.com/vh5fs/vh5fs/versions"
)

// Tree is a new version: either every group and dataset of it (Entries: what a stage,
// package stage, made of its base's tree; what is not listed is not in it), or changed
// datasets over the base's tree (Changes: a write handle's fsync is a tree of one).
type Tree struct {
	Base string
	Name string // the new version's name; "" for the default name (see SetNextName)
	// Attrs are set on the version group itself (the stage's root), whose user attributes
	// versioned-hdf5 does not carry from one version to the next.
	Attrs   []AttrChange
	Entries []Entry // parents before their children
	// Changes, instead of Entries: datasets of the base with their staged arrays; every
	// other object of the base is carried over unchanged.
	Changes []Entry
	// SkipUnchanged makes no version when the staged data of every change equals the
	// base's (e.g. bytes rewritten with what they held); Result.Name is then the base.
	SkipUnchanged bool
	// FollowHead commits Changes on top of the current version instead of Base when
	// another commit moved it past Base without changing them (same stored chunks, see
	// versions.Dataset.SameStored): the new version then carries the head's other
	// datasets. When the head did change one, the commit makes a sibling off Base, as
	// without FollowHead, and logs a warning naming both versions.
	FollowHead bool
	// Branch, if set, commits on that branch (package named): the new version does not
	// become current (versioned-hdf5's make_current=False); the branch moves to it in the
	// same transaction instead. FollowHead then follows the branch's head, not the current
	// version. The branch must exist and name a committed version.
	Branch string
	// dropSpilled gives up each new chunk's spill-file copy once it is written, freeing
	// its pages for the commit's own writes (staged.Array.ReleaseSpilled): a handle's
	// commit, whose arrays are not read again if it fails. A stage outlives a failed
	// commit, so its arrays keep theirs.
	dropSpilled bool
	// Named, if set, is called with the version's name once it is chosen, before anything
	// is written: a caller that must tell after a crash whether this commit went through
	// records the name there (a stage does). Its error ends the commit.
	Named func(name string) error
}

// Entry is one group or dataset of a Tree.
type Entry struct {
	Path  string // inside the version, e.g. "grp/ds"
	Group bool
	// FromBase: the base has this object at Path; its attributes are carried over (then
	// Attrs applied), and a dataset without Array is copied from the base unchanged.
	FromBase bool
	// Array holds a changed dataset's data: the base's with staged changes, or all of a
	// New dataset's. On success it is re-pointed at the new version's chunks.
	Array *staged.Array
	// Strings, instead of Array, are the new values of a variable-length string dataset;
	// ASCII: a New one holds ASCII strings (h5py's bytes), else UTF-8.
	Strings *Strings
	ASCII   bool
	New     *h5.DataSpec // a dataset created in the stage (its data group made if missing)
	Attrs   []AttrChange
}

// AttrChange sets an HDF5 attribute from its JSON form (h5.File.SetAttrJSON), or removes
// it (JSON nil).
type AttrChange struct {
	Name string
	JSON []byte
}

// ErrSpec marks a new dataset whose data group exists with another dtype, chunk shape or
// fill value: versioned-hdf5 fixes those per path forever.
var ErrSpec = errors.New("the dataset's path holds data of another kind")

// changedDataset is one dataset a commit writes: its dataset (the base's, or a new one),
// hash index, plan and staged array.
type changedDataset struct {
	ds    *versions.Dataset
	ix    *index
	plan  plan
	arr   *staged.Array // nil for strings
	strs  *Strings
	isNew bool
}

// shape is the dataset's shape in the new version.
func (cd *changedDataset) shape() []int64 {
	if cd.strs != nil {
		return cd.strs.Shape
	}
	return cd.arr.Shape()
}

// CommitTree writes t as one new version whose prev_version is t.Base (or the current
// version, see Tree.FollowHead), and makes it current. Changed and new datasets are
// hashed, deduplicated and appended to their data groups (new ones created as
// versioned-hdf5 creates them), in the order of the tree's entries; the version group
// then holds every entry, unchanged ones carried over with their attributes. It returns
// once the file is flushed and fsynced. On success the arrays point at the new version's
// chunks and are clean.
//
// Order of writes (crash safety): chunks and hash rows are appended first and
// largest_index is written last among them (spec section 4); then the version group is
// created with committed=False, filled, its new virtual datasets checked (h5's
// CheckMappingLists), and flagged committed=True; current_version moves last. A commit
// cut short leaves either nothing visible or an uncommitted group, which readers ignore.
func (c *Committer) CommitTree(t Tree) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.now()
	what := "commit on " + t.Base
	if len(t.Changes) == 1 {
		what = "commit " + t.Changes[0].Path + " on " + t.Base
	}
	if err := c.f.HDF5().Stopped(); err != nil {
		return Result{}, fmt.Errorf("%s: %w", what, err)
	}
	if t.Branch != "" {
		what += " (branch " + t.Branch + ")"
	}
	head := ""
	if t.FollowHead || t.Branch != "" {
		tip, err := c.tip(t.Branch)
		if err == nil && t.FollowHead {
			t.Base, head, err = c.head(t.Base, tip, changePaths(t.Changes))
		}
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	res, err := c.commitTree(t, start)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", what, err)
	}
	res.Base, res.Branch = t.Base, t.Branch
	res.Elapsed = time.Since(start)
	if res.Skipped {
		slog.Debug("nothing to commit: same data as the base", "base", t.Base, "datasets", changePaths(t.Changes))
		return res, nil
	}
	if head != "" {
		tip := []any{"current", head}
		if t.Branch != "" {
			tip = []any{"branch", t.Branch, "head", head}
		}
		slog.Warn("the head does not hold the changed datasets as the base does: committed a sibling off the base",
			append(append([]any{"version", res.Name, "base", t.Base}, tip...), "datasets", changePaths(t.Changes))...)
	}
	logged := []any{"entries", len(t.Entries)}
	if len(t.Changes) == 1 {
		logged = []any{"dataset", t.Changes[0].Path}
	} else if len(t.Changes) > 1 {
		logged = []any{"datasets", changePaths(t.Changes)}
	}
	if t.Branch != "" {
		logged = append(logged, "branch", t.Branch)
	}
	slog.Info("committed", append(append([]any{"version", res.Name, "base", t.Base}, logged...),
		"written", res.Written, "ahead", res.Ahead, "reused", res.Reused, "unmapped", res.Unmapped, "bytes", res.Bytes, "elapsed", res.Elapsed,
		"plan", res.Plan, "data", res.Data, "table", res.Table, "group", res.Group, "sync", res.Sync)...)
	return res, nil
}

func changePaths(changes []Entry) []string {
	out := make([]string, len(changes))
	for i, e := range changes {
		out[i] = e.Path
	}
	return out
}

func (c *Committer) commitTree(t Tree, now time.Time) (Result, error) {
	f := c.f
	base, ok, err := f.Version(t.Base)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, fmt.Errorf("base version %q: %w", t.Base, versions.ErrNotFound)
	}
	if err := c.checkDataVersion(); err != nil {
		return Result{}, err
	}
	// Whatever is read from the file's bytes is read before the first write: the base's
	// changed datasets, their indexes and plans, the unchanged datasets' mapping lists.
	var res Result
	t0 := time.Now()
	changed := map[string]*changedDataset{}
	planBase := func(e Entry) error {
		ds, err := f.Dataset(base.Path() + "/" + e.Path)
		if err != nil {
			return err
		}
		cd, err := c.planDataset(ds, e, &res)
		if err != nil {
			return err
		}
		changed[e.Path] = cd
		return nil
	}
	for _, e := range t.Changes {
		if err := planBase(e); err != nil {
			return Result{}, err
		}
	}
	for _, e := range t.Entries {
		if !e.Group && (e.Array != nil || e.Strings != nil) && e.New == nil {
			if err := planBase(e); err != nil {
				return Result{}, err
			}
		}
	}
	if t.SkipUnchanged && len(t.Entries) == 0 && len(t.Attrs) == 0 {
		if skipped, err := c.skipUnchanged(changed); err != nil || skipped {
			return Result{Name: t.Base, Skipped: skipped}, err
		}
	}
	name := t.Name
	if name == "" {
		if name, err = c.pickName(now); err != nil {
			return Result{}, err
		}
	} else if err := c.free(name); err != nil {
		return Result{}, err
	}
	if t.Named != nil {
		if err := t.Named(name); err != nil {
			return Result{}, err
		}
	}
	vpath := versions.VersionGroup(name)
	entries := t.Entries
	if len(t.Changes) > 0 {
		if entries, err = c.baseEntries(base); err != nil {
			return Result{}, err
		}
		for i := range entries {
			if cd := changed[entries[i].Path]; cd != nil && !entries[i].Group {
				entries[i].Array = cd.arr
			}
		}
	}
	unchanged := c.loadUnchanged(base, func(p string) bool { _, ok := changed[p]; return ok })
	for _, e := range entries {
		if e.Group || e.New == nil {
			continue
		}
		if e.Array == nil && e.Strings == nil {
			return Result{}, fmt.Errorf("new dataset %s has no data", e.Path)
		}
		ds, err := c.newDataset(vpath+"/"+e.Path, e)
		if err != nil {
			return Result{}, err
		}
		cd, err := c.planDataset(ds, e, &res)
		if err != nil {
			return Result{}, err
		}
		cd.isNew = true
		changed[e.Path] = cd
	}
	res.Plan = time.Since(t0)
	for _, e := range entries {
		cd := changed[e.Path]
		if cd == nil || e.Group {
			continue
		}
		if t.dropSpilled {
			for i := range cd.plan.fresh {
				cd.plan.fresh[i].release = true
			}
		}
		if err := c.appendChunks(cd, &res); err != nil {
			return Result{}, err
		}
	}
	if err := c.writeVersion(base, name, t.Branch, now, t.Attrs, entries, changed, unchanged, &res); err != nil {
		return Result{}, err
	}
	c.next = ""
	t0 = time.Now()
	for p, cd := range changed {
		if err := c.published(vpath+"/"+p, cd); err != nil {
			return Result{}, err
		}
	}
	res.Group += time.Since(t0) // the new datasets' chunk maps, as the version group's
	res.Name = name
	return res, nil
}

// skipUnchanged reports whether every changed dataset holds its base's data, and if so
// points each array back at its base's chunks: a commit of nothing.
func (c *Committer) skipUnchanged(changed map[string]*changedDataset) (bool, error) {
	keep := make(map[*changedDataset]*plan, len(changed))
	for _, cd := range changed {
		if cd.strs != nil {
			return false, nil // a string handle skips unchanged text itself
		}
		if len(cd.plan.fresh) == 0 && cd.plan.sameAs(cd.ds, cd.arr.Shape()) {
			keep[cd] = &cd.plan
			continue
		}
		p, err := cd.plan.sameData(cd.ds, cd.arr)
		if err != nil || p == nil { // p: the base's data under another chunk map; keep the base's map
			return false, err
		}
		keep[cd] = p
	}
	for cd, p := range keep {
		if err := p.apply(cd.arr); err != nil {
			return false, err
		}
	}
	return true, nil
}

// planDataset plans the commit of e's data (its staged array or its strings) on ds.
func (c *Committer) planDataset(ds *versions.Dataset, e Entry, res *Result) (*changedDataset, error) {
	if e.Strings == nil && !ds.Stageable() {
		return nil, fmt.Errorf("%s: %w", ds.Path, versions.ErrUnsupported)
	}
	ix, err := c.index(ds)
	if err != nil {
		return nil, err
	}
	var p plan
	var r Result
	if e.Strings != nil {
		p, r, err = c.planStrings(ds, e.Strings, ix)
	} else {
		p, r, err = c.plan(ds, e.Array, ix)
	}
	if err != nil {
		return nil, err
	}
	res.Written += r.Written
	res.Reused += r.Reused
	res.Unmapped += r.Unmapped
	res.Bytes += r.Bytes
	return &changedDataset{ds: ds, ix: ix, plan: p, arr: e.Array, strs: e.Strings}, nil
}

// newDataset is the dataset a new entry becomes at path: in its data group, created as
// versioned-hdf5 creates it unless an earlier dataset of the same path left it (which
// must then hold the same kind of data).
func (c *Committer) newDataset(path string, e Entry) (*versions.Dataset, error) {
	h := c.f.HDF5()
	group := versions.DataGroupOf(e.Path)
	raw := versions.RawDataIn(group)
	k, err := h.Kind(raw)
	if err != nil {
		return nil, err
	}
	if k == h5.KindMissing {
		if e.Strings != nil {
			err = h.CreateStringDataGroup(group, *e.New, !e.ASCII)
		} else {
			err = h.CreateDataGroup(group, *e.New)
		}
		if err != nil {
			return nil, err
		}
	}
	var shape []int64
	if e.Strings != nil {
		shape = e.Strings.Shape
	} else {
		shape = e.Array.Shape()
	}
	ds, err := c.f.NewDataset(path, raw, shape)
	if err != nil {
		return nil, err
	}
	if e.Strings != nil {
		if !ds.Type.VlenString || ds.Type.UTF8 == e.ASCII || !slices.Equal(ds.Chunks, e.New.Chunks) {
			return nil, fmt.Errorf("%s: %w: %s in chunks %v, not strings in chunks %v", e.Path, ErrSpec, ds.Type.DType, ds.Chunks, e.New.Chunks)
		}
		return ds, nil
	}
	if ds.Type.DType != e.New.DType || !slices.Equal(ds.Chunks, e.New.Chunks) || ds.Type.Size != e.Array.ItemSize() ||
		(e.New.Fill != nil && !slices.Equal(ds.Fill, e.New.Fill)) {
		return nil, fmt.Errorf("%s: %w: %s in chunks %v, not %s in chunks %v", e.Path, ErrSpec, ds.Type.DType, ds.Chunks, e.New.DType, e.New.Chunks)
	}
	return ds, nil
}

// published records a dataset the commit wrote (versions.File.Committed) and points its
// staged array at the new version's chunks. A string dataset is read anew when asked for:
// its text is rendered from its strings.
func (c *Committer) published(path string, cd *changedDataset) error {
	if cd.strs != nil {
		return nil
	}
	if err := c.f.Committed(path, cd.ds, cd.arr.Shape(), cd.plan.vstart, cd.plan.sstart); err != nil {
		return err
	}
	return cd.plan.apply(cd.arr)
}

// free refuses a version name that is invalid or taken.
func (c *Committer) free(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if _, ok, err := c.f.Version(name); err != nil {
		return err
	} else if ok || c.exists(name) {
		return fmt.Errorf("%w: %s", ErrExists, name)
	}
	return nil
}

// baseEntries lists the base version's tree as Entries carried over unchanged.
func (c *Committer) baseEntries(base versions.Version) ([]Entry, error) {
	var out []Entry
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := c.f.List(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := rel + e.Name
			out = append(out, Entry{Path: p, Group: e.IsGroup, FromBase: true})
			if e.IsGroup {
				if err := walk(dir+"/"+e.Name, p+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(base.Path(), "")
}

// writeVersion builds version group name on base in one transaction (package txn): the
// body creates it under committed=False with rootAttrs and every entry (groups; changed
// datasets as new virtual datasets of their plans; unchanged ones copied from the base);
// the publish flags it committed and makes it current. A failure leaves an uncommitted
// group, which readers ignore.
//
// It takes no lock of versions.File: the journal driver keeps every write over the
// file's durable bytes until the sync, whose apply step alone holds the chunk store's
// bytes lock (chunkstore.Store.ApplyLock), so readers of the file's bytes see the state before the commit
// until then.
func (c *Committer) writeVersion(base versions.Version, name, branch string, now time.Time, rootAttrs []AttrChange, entries []Entry,
	changed map[string]*changedDataset, unchanged map[string]*versions.Dataset, res *Result) error {
	h := c.f.HDF5()
	t0 := time.Now()
	vpath := versions.VersionGroup(name)
	body := func() error {
		if err := versions.CreateVersion(h, name, base.Name, now); err != nil {
			return err
		}
		if err := applyAttrs(h, vpath, rootAttrs); err != nil {
			return err
		}
		for _, e := range entries {
			if err := c.writeEntry(base.Path()+"/"+e.Path, vpath+"/"+e.Path, e, changed[e.Path], unchanged); err != nil {
				return err
			}
		}
		return nil
	}
	publish := func() error {
		now := c.now()
		if err := versions.PublishVersion(h, name, now, branch == ""); err != nil || branch == "" {
			return err
		}
		return named.Advance(h, branch, named.Target{Version: name, Timestamp: versions.CanonicalTimestamp(now)})
	}
	err := txn.Run(h, txn.Change{Body: body, Publish: publish, Syncing: func() {
		res.Group = time.Since(t0)
		t0 = time.Now()
	}})
	if err != nil {
		return err
	}
	res.Sync = time.Since(t0)
	return nil
}

// writeEntry makes one entry of a new version at dst (src: the same path in the base).
func (c *Committer) writeEntry(src, dst string, e Entry, cd *changedDataset, unchanged map[string]*versions.Dataset) error {
	h := c.f.HDF5()
	var err error
	switch {
	case e.Group:
		if err = h.CreateGroup(dst); err == nil && e.FromBase {
			err = h.CopyAttrs(src, dst)
		}
	case cd != nil:
		if err = c.createVirtual(cd.ds, dst, cd.shape(), &cd.plan); err != nil {
			break
		}
		if cd.isNew {
			// The reserved attributes versioned-hdf5 reads a dataset's storage from.
			if err = h.SetAttrString(dst, versions.AttrRawData, cd.ds.RawData); err == nil {
				err = h.SetAttrInt64s(dst, versions.AttrChunks, cd.ds.Chunks)
			}
		} else {
			err = h.CopyAttrs(src, dst)
		}
	default:
		var copied bool
		copied, err = c.copyVirtual(unchanged[src], src, dst)
		switch {
		case err != nil:
		case copied:
			err = h.CopyAttrs(src, dst)
		default:
			err = h.CopyObject(src, dst)
		}
	}
	if err != nil {
		return err
	}
	return applyAttrs(h, dst, e.Attrs)
}

func applyAttrs(h *h5.File, path string, changes []AttrChange) error {
	for _, a := range changes {
		var err error
		if a.JSON == nil {
			err = h.DeleteAttr(path, a.Name)
		} else {
			err = h.SetAttrJSON(path, a.Name, a.JSON)
		}
		if err != nil {
			return fmt.Errorf("attribute %s of %s: %w", a.Name, path, err)
		}
	}
	return nil
}
