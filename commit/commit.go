package commit

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// nameLayout gives default version names: unique to the microsecond, sortable by time,
// free of characters a shell or a path would trip on.
const nameLayout = "20060102T150405.000000Z"

// ErrExists is returned when the requested version name is taken.
var ErrExists = errors.New("version already exists")

// ErrName marks a version name versioned-hdf5 or a file system cannot hold.
var ErrName = errors.New("not a valid version name")

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

	// layout is held shared by every pin (an open handle) and exclusively by a Rewrite,
	// which moves the chunks handles' staged arrays name. Taken before mu by Pin (never
	// while holding mu), after mu by Rewrite, which only tries it.
	layout sync.RWMutex
	pinMu  sync.Mutex     // a leaf
	pins   map[string]int // versions open handles' changes are based on (Pin); GUARDED_BY(pinMu)
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
	store.SetDigester(hashtable.Hash)
	c := &Committer{f: f, store: store, now: time.Now, indexes: map[string]*index{}, sinks: map[string]*groupSink{}, pins: map[string]int{}}
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
	arr, err := NewStaged(ds)
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

// NewStaged returns a staged array on ds, a dataset of a version, outside any store:
// every chunk where the version maps it, nothing staged yet. Writes to it never change ds.
func NewStaged(ds *versions.Dataset) (*staged.Array, error) {
	base, err := ds.WriteBase()
	if err != nil {
		return nil, err
	}
	return staged.FromMap(base), nil
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
		return fmt.Errorf("commit: %q: %w", name, ErrName)
	}
	return nil
}

// Change is one dataset's staged changes on top of a version.
type Change struct {
	Base          string        // the version the changes were made on
	Dataset       string        // the dataset's path inside the version, e.g. "grp/ds"
	Array         *staged.Array // the staged changes; re-pointed at the new version on success
	Strings       *Strings      // instead of Array: a string dataset's new values
	SkipUnchanged bool          // see Tree.SkipUnchanged
	FollowHead    bool          // see Tree.FollowHead
	Branch        string        // see Tree.Branch
}

// Result describes a commit.
type Result struct {
	Name     string // the new version
	Base     string // its prev_version: Change.Base, or the head a FollowHead change went on
	Branch   string // the branch it moved (Tree.Branch), "" if it became current
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

// Commit commits ch as a new version: a tree of one change over ch.Base (CommitTree).
// On success ch.Array points at the new version's chunks and is clean.
func (c *Committer) Commit(ch Change) (Result, error) {
	return c.CommitTree(Tree{
		Base:          ch.Base,
		Changes:       []Entry{{Path: ch.Dataset, FromBase: true, Array: ch.Array, Strings: ch.Strings}},
		SkipUnchanged: ch.SkipUnchanged,
		FollowHead:    ch.FollowHead,
		Branch:        ch.Branch,
		dropSpilled:   true,
	})
}

// tip is the head a commit follows: branch's version, or the current version when branch
// is "" ("" when there is none). A branch that does not exist or whose version is gone
// (dangling) is an error: a commit never moves a name to another line of versions.
func (c *Committer) tip(branch string) (string, error) {
	if branch == "" {
		cur, err := c.f.CurrentVersion()
		if err != nil {
			return "", fmt.Errorf("reading the current version: %w", err)
		}
		return cur, nil
	}
	r, err := named.Read(c.f.HDF5())
	if err != nil {
		return "", err
	}
	v, err := r.Head(branch, c.f.Version)
	return v.Name, err
}

// head is the base a FollowHead tree commits on: the tip (tip: the current version or the
// branch's head) if it holds every changed dataset as base does, else base. conflict
// names the tip when it changed one of them (or does not have it), which makes the commit
// a sibling of it.
func (c *Committer) head(base, cur string, changed []string) (string, string, error) {
	if cur == "" || cur == base {
		return base, "", nil
	}
	if _, ok, err := c.f.Version(cur); err != nil {
		return "", "", fmt.Errorf("head %q: %w", cur, err)
	} else if !ok {
		return base, cur, nil // a current_version naming no committed version: nothing to follow
	}
	for _, p := range changed {
		from, err := c.f.Dataset(versions.InVersion(base, p))
		if err != nil {
			return "", "", err
		}
		path := versions.InVersion(cur, p)
		if k, err := c.f.HDF5().Kind(path); err != nil {
			return "", "", err
		} else if k != h5.KindDataset {
			return base, cur, nil
		}
		at, err := c.f.Dataset(path)
		if err != nil {
			return "", "", err
		}
		if !from.SameStored(at) {
			return base, cur, nil
		}
	}
	return cur, "", nil
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
	k, err := c.f.Kind(versions.VersionGroup(name))
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
