package commit

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// TimestampLayout is versioned-hdf5's canonical timestamp (always UTC).
const TimestampLayout = "2006-01-02 15:04:05.000000-0700"

// nameLayout gives default version names: unique to the microsecond, sortable by time,
// free of characters a shell or a path would trip on.
const nameLayout = "20060102T150405.000000Z"

// ErrExists is returned when the requested version name is taken.
var ErrExists = errors.New("version already exists")

// Committer is a read-write file's write side: the one place that makes staged arrays
// (under its store's memory budget, with the encoder and sink their commit expects) and
// commits them as new versions. Commits are serialised; each appends only what it
// changed (new chunks, hash rows, one version group).
type Committer struct {
	f     *versions.File
	store *staged.Store // the staged chunks' memory budget and spill file
	now   func() time.Time

	mu      sync.Mutex        // serialises commits; taken before versions.File's locks
	indexes map[string]*index // data group -> hash index; GUARDED_BY(mu)
	next    string            // name for the next commit (SetNextName); GUARDED_BY(mu)

	sinkMu sync.Mutex            // a leaf: held only to look up sinks
	sinks  map[string]*groupSink // data group -> its sinks' slots (sink.go); GUARDED_BY(sinkMu)
}

// Options configure Open.
type Options struct {
	// StageMem is the staged chunks' memory budget in bytes; beyond it they spill to a
	// file beside the file (staged.Store; 0: every staged chunk spills).
	StageMem int64
	// Name names the first commit (SetNextName); "" for default names.
	Name string
}

// Open returns the write side of f, which must have been opened with versions.OpenRW.
func Open(f *versions.File, o Options) (*Committer, error) {
	if !f.Writable() {
		return nil, fmt.Errorf("commit: %s is open read-only", f.Path())
	}
	if !f.Versioned() {
		return nil, fmt.Errorf("commit: %s is not a versioned-hdf5 file", f.Path())
	}
	store := staged.OpenStore(f.Path(), o.StageMem)
	store.SetDigester(Hash)
	c := &Committer{f: f, store: store, now: time.Now, indexes: map[string]*index{}, sinks: map[string]*groupSink{}}
	if err := c.SetNextName(o.Name); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close releases the hash tables it holds open and the staged chunks' spill file.
func (c *Committer) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ix := range c.indexes {
		ix.close()
	}
	c.indexes = map[string]*index{}
	if err := c.store.Close(); err != nil {
		slog.Warn("staged chunks' spill file", "err", err)
	}
}

// File is the file c writes.
func (c *Committer) File() *versions.File { return c.f }

// Store holds the staged chunks of every array c made, under its budget.
func (c *Committer) Store() *staged.Store { return c.store }

// NewArray returns a staged array on ds, a dataset of a version of c's file: its staged
// chunks kept in c's store, and the chunks a write covers whole encoded as a commit stores
// them, on the store's workers. With sink, the chunks it evicts go straight to the
// raw_data slots its commit will give them (Sink): for arrays committed by a handle's
// fsync, not for a stage's, which outlive the mount.
func (c *Committer) NewArray(ds *versions.Dataset, sink bool) (*staged.Array, error) {
	arr, err := ds.NewStaged()
	if err != nil {
		return nil, err
	}
	arr.UseStore(c.store)
	arr.SetEncoder(ChunkEncoder(ds))
	if sink {
		arr.UseSink(c.NewSink(ds, arr))
	}
	return arr, nil
}

// Adopt keeps arr's staged chunks in c's store: an array a caller built (a new dataset,
// or one restored from a saved stage).
func (c *Committer) Adopt(arr *staged.Array) { arr.UseStore(c.store) }

// SetNextName names the next commit (once); "" restores default names. A name a version
// already has is refused (ErrExists), so that no commit fails on it later.
func (c *Committer) SetNextName(name string) error {
	if name != "" {
		if err := c.free(name); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next = name
	return nil
}

// NextName is the name the next commit will take if set with SetNextName, else "".
func (c *Committer) NextName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || name == versions.FirstVersion || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("commit: %q is not a valid version name", name)
	}
	return nil
}

// Change is one dataset's staged changes on top of a version.
type Change struct {
	Base    string        // the version the changes were made on
	Dataset string        // the dataset's path inside the version, e.g. "grp/ds"
	Array   *staged.Array // the staged changes; re-pointed at the new version on success
	// SkipUnchanged makes no version when the staged data equals the base version's
	// (e.g. bytes rewritten with what they held); Result.Name is then the base.
	SkipUnchanged bool
	// FollowHead commits on top of the current version instead of Base when another commit
	// moved it past Base without changing Dataset (same stored chunks in both, see
	// versions.Dataset.SameStored): the new version then carries the head's other datasets.
	// When the head did change Dataset, the commit makes a sibling off Base, as without
	// FollowHead, and logs a warning naming both versions.
	FollowHead bool
}

// Result describes a commit.
type Result struct {
	Name     string // the new version
	Base     string // its prev_version: Change.Base, or the head a FollowHead change went on
	Skipped  bool   // SkipUnchanged applied: nothing was written
	Written  int    // chunks appended to raw_data
	Ahead    int    // of which a Sink wrote before the commit (found in place)
	Reused   int    // chunks deduplicated against existing slots or each other
	Unmapped int    // staged chunks equal to the fill value, left unmapped
	Bytes    int64  // bytes of raw chunk data appended (before filters)
	Elapsed  time.Duration
	// Where the time went: planning and hashing, raw_data writes, hash_table rows and
	// largest_index, the version group (tree copy and virtual dataset), flush and fsync.
	Plan, Data, Table, Group, Sync time.Duration
}

// Commit writes ch as a new version whose prev_version is ch.Base (or the current
// version, see Change.FollowHead) and makes it current.
// The new version holds the base's whole tree: unchanged datasets and groups are carried
// over with their attributes. It returns once the file is flushed and fsynced. On success
// ch.Array points at the new version's chunks and is clean.
//
// Order of writes (crash safety): chunks and hash rows are appended first and
// largest_index is written last among them (spec section 4); then the version group is
// created with committed=False, filled, its new virtual dataset checked (h5's
// CheckMappingLists), and flagged committed=True; current_version moves last. A commit cut
// short leaves either nothing visible or an uncommitted group, which readers ignore.
func (c *Committer) Commit(ch Change) (Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.now()
	if err := c.f.HDF5().Stopped(); err != nil {
		return Result{}, fmt.Errorf("commit %s on %s: %w", ch.Dataset, ch.Base, err)
	}
	head := ""
	if ch.FollowHead {
		var err error
		if ch.Base, head, err = c.head(ch); err != nil {
			return Result{}, fmt.Errorf("commit %s on %s: %w", ch.Dataset, ch.Base, err)
		}
	}
	res, err := c.commit(ch, start)
	if err != nil {
		return Result{}, fmt.Errorf("commit %s on %s: %w", ch.Dataset, ch.Base, err)
	}
	res.Base = ch.Base
	res.Elapsed = time.Since(start)
	if res.Skipped {
		slog.Debug("nothing to commit: same data as the base", "base", ch.Base, "dataset", ch.Dataset)
		return res, nil
	}
	if head != "" {
		slog.Warn("the current version does not hold this dataset as the base does: committed a sibling off the base",
			"version", res.Name, "base", ch.Base, "current", head, "dataset", ch.Dataset)
	}
	slog.Info("committed", "version", res.Name, "base", ch.Base, "dataset", ch.Dataset,
		"written", res.Written, "ahead", res.Ahead, "reused", res.Reused, "unmapped", res.Unmapped, "bytes", res.Bytes, "elapsed", res.Elapsed,
		"plan", res.Plan, "data", res.Data, "table", res.Table, "group", res.Group, "sync", res.Sync)
	return res, nil
}

// head is the base a FollowHead change commits on: the current version if it holds
// ch.Dataset as ch.Base does, else ch.Base. conflict names the current version when it
// changed the dataset (or does not have it), which makes the commit a sibling of it.
func (c *Committer) head(ch Change) (base, conflict string, err error) {
	cur, err := c.f.CurrentVersion()
	if err != nil {
		return "", "", fmt.Errorf("reading the current version: %w", err)
	}
	if cur == "" || cur == ch.Base {
		return ch.Base, "", nil
	}
	if _, ok, err := c.f.Version(cur); err != nil {
		return "", "", fmt.Errorf("current version %q: %w", cur, err)
	} else if !ok {
		return ch.Base, cur, nil // a current_version naming no committed version: nothing to follow
	}
	from, err := c.f.Dataset(versions.VersionsGroup + "/" + ch.Base + "/" + ch.Dataset)
	if err != nil {
		return "", "", err
	}
	path := versions.VersionsGroup + "/" + cur + "/" + ch.Dataset
	if k, err := c.f.HDF5().Kind(path); err != nil {
		return "", "", err
	} else if k != h5.KindDataset {
		return ch.Base, cur, nil
	}
	at, err := c.f.Dataset(path)
	if err != nil {
		return "", "", err
	}
	if !from.SameStored(at) {
		return ch.Base, cur, nil
	}
	return cur, "", nil
}

func (c *Committer) commit(ch Change, now time.Time) (Result, error) {
	f := c.f
	base, ok, err := f.Version(ch.Base)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, fmt.Errorf("base version %q: %w", ch.Base, versions.ErrNotFound)
	}
	name, err := c.pickName(now)
	if err != nil {
		return Result{}, err
	}
	if err := c.checkDataVersion(); err != nil {
		return Result{}, err
	}
	ds, err := f.Dataset(base.Path() + "/" + ch.Dataset)
	if err != nil {
		return Result{}, err
	}
	if !ds.Stageable() {
		return Result{}, fmt.Errorf("%s: %w", ds.Path, versions.ErrUnsupported)
	}
	ix, err := c.index(ds)
	if err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	plan, res, err := c.plan(ds, ch.Array, ix)
	if err != nil {
		return Result{}, err
	}
	res.Plan = time.Since(t0)
	if ch.SkipUnchanged && len(plan.fresh) == 0 && plan.sameAs(ds, ch.Array.Shape()) {
		if err := plan.apply(ch.Array); err != nil {
			return Result{}, err
		}
		return Result{Name: ch.Base, Skipped: true}, nil
	}
	if ch.SkipUnchanged {
		keep, err := plan.sameData(ds, ch.Array)
		if err != nil {
			return Result{}, err
		}
		if keep != nil { // the base's data under another chunk map: keep the base's map
			if err := keep.apply(ch.Array); err != nil {
				return Result{}, err
			}
			return Result{Name: ch.Base, Skipped: true}, nil
		}
	}
	entries, err := c.baseEntries(base)
	if err != nil {
		return Result{}, err
	}
	for i := range entries {
		if entries[i].Path == ch.Dataset {
			entries[i].Array = ch.Array
		}
	}
	unchanged := c.loadUnchanged(base, func(p string) bool { return p == ch.Dataset })
	cd := &changedDataset{ds: ds, ix: ix, plan: plan, arr: ch.Array}
	for i := range plan.fresh {
		plan.fresh[i].release = true
	}
	if err := c.appendChunks(ds, ix, plan.fresh, ch.Array.ChunkBytes(), &res); err != nil {
		return Result{}, err
	}
	if err := c.writeVersion(base, name, now, nil, entries, map[string]*changedDataset{ch.Dataset: cd}, unchanged, &res); err != nil {
		return Result{}, err
	}
	c.next = ""
	// The handle continues on top of the new version.
	if err := c.published(versions.VersionsGroup+"/"+name+"/"+ch.Dataset, cd); err != nil {
		return Result{}, err
	}
	res.Name = name
	return res, nil
}

func (c *Committer) pickName(now time.Time) (string, error) {
	if c.next != "" {
		return c.next, c.free(c.next)
	}
	base := now.UTC().Format(nameLayout)
	name := base
	for i := 2; c.exists(name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name, nil
}

func (c *Committer) exists(name string) bool {
	k, err := c.f.Kind(versions.VersionsGroup + "/" + name)
	return err != nil || k != h5.KindMissing
}

// checkDataVersion upgrades data_version 1 files (done by the caller's attribute write) but
// refuses those with variable-length string data: their hash tables cannot be trusted.
func (c *Committer) checkDataVersion() error {
	if c.f.DataVersion() == versions.SupportedDataVersion {
		return nil
	}
	vlen, err := c.f.HasVlenStringData()
	if err != nil {
		return err
	}
	if vlen {
		return fmt.Errorf("data_version %d file with variable-length string data: rebuild its hash tables with versioned-hdf5 before committing", c.f.DataVersion())
	}
	return nil
}

func (c *Committer) index(ds *versions.Dataset) (*index, error) {
	group := ds.DataGroup()
	if ix, ok := c.indexes[group]; ok {
		return ix, nil
	}
	ix, err := loadIndex(c.f.HDF5(), group, ds.Chunks[0])
	if err != nil {
		return nil, err
	}
	c.indexes[group] = ix
	return ix, nil
}
