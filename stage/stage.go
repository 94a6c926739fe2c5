// Package stage holds stage trees: working trees of one version of a versioned-hdf5 file
// that ordinary file operations change (write and truncate datasets, create and delete
// datasets and groups, set attributes) and that commit as ONE new version, as
// versioned-hdf5's stage_version writes it (commit.Committer.CommitTree).
//
// A Stage is an overlay on its base version: the base's groups and datasets, less those
// removed, plus those created, with attribute changes on top. Every open of a dataset in a
// stage shares one writefile.File, so a read through any handle, or a later open, sees
// every write made in the stage. Nothing here knows FUSE: package fsnode serves a stage as
// a directory, and the tests drive it directly.
//
// # Kept on disk
//
// Stages live in a directory beside the HDF5 file, ".FILE.vh5fs-stages/NAME/": the tree's
// changes in stage.json, rewritten (write, fsync, rename) by every change to the tree
// before the call returns; and each dataset's staged data in a file of its own, written
// when the dataset is synced (Sync: fsync(2) of any of its files) and when the Manager
// closes (unmount). A mount finds the stages of earlier mounts there again. After a crash
// of the daemon a stage holds every change to its tree and, for each dataset, the data as
// of its last Sync (or of the last clean unmount): writes since then are lost. A stage's
// commit names its version in the stage's directory before it writes (committingFile), so
// that a mount after a crash during the commit removes the stage if the version went
// through and serves it again if not.
//
// # Lock order
//
// Manager.mu, then Stage.mu, then the datasets' writefile.File locks (in path order
// when several are held), then commit.Committer's (docs/ARCHITECTURE.md has the whole
// order).
package stage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/writefile"
)

// Manager is the stages of one read-write mount.
type Manager struct {
	f   *versions.File
	c   *commit.Committer
	dir string

	mu     sync.Mutex
	stages map[string]*Stage // GUARDED_BY(mu)
	nextID uint64            // GUARDED_BY(mu)
}

// Open returns the stages of f, loading those kept in stagedir.Of(f.Path()) by earlier mounts. A
// stage that cannot be loaded (its base is gone, its files are damaged) is left on disk,
// logged, and not served.
func Open(c *commit.Committer) (*Manager, error) {
	f := c.File()
	m := &Manager{f: f, c: c, dir: stagedir.Of(f.Path()), stages: map[string]*Stage{}}
	ents, err := os.ReadDir(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stages of %s: %w", f.Path(), err)
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s, err := m.load(e.Name())
		var done committedError
		if errors.As(err, &done) {
			slog.Info("stage was committed before the last mount ended; its files are removed", "stage", e.Name(), "version", done.version)
			if err := os.RemoveAll(filepath.Join(m.dir, e.Name())); err != nil {
				slog.Error("committed stage's files not removed", "stage", e.Name(), "err", err)
			}
			continue
		}
		if err != nil {
			slog.Error("stage not loaded; its files are kept", "stage", e.Name(), "dir", filepath.Join(m.dir, e.Name()), "err", err)
			continue
		}
		m.stages[s.name] = s
		slog.Info("stage restored", "stage", s.name, "base", s.base)
	}
	return m, nil
}

// Names lists the stages, sorted.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.stages))
	for n := range m.stages {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Get returns the stage called name, or nil.
func (m *Manager) Get(name string) *Stage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stages[name]
}

// Create makes a stage called name on the current version. The name follows the rules of
// version names and must not be taken by a version or a stage (ErrExist).
func (m *Manager) Create(name string) (*Stage, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.taken(name); err != nil {
		return nil, err
	}
	cur, err := m.f.CurrentVersion()
	if err != nil {
		return nil, err
	}
	if _, ok, err := m.f.Version(cur); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("stage %s: the file has no committed version to stage on: %w", name, ErrNotExist)
	}
	s := newStage(m, name, cur)
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		return nil, fmt.Errorf("stage %s: %w", name, err)
	}
	if err := s.saveTree(); err != nil {
		os.RemoveAll(s.dir())
		return nil, err
	}
	m.stages[name] = s
	return s, nil
}

// taken refuses a name a version or a stage has. Called with mu held.
func (m *Manager) taken(name string) error {
	if _, ok := m.stages[name]; ok {
		return fmt.Errorf("stage %s: %w", name, ErrExist)
	}
	if _, ok, err := m.f.Version(name); err != nil {
		return err
	} else if ok || name == versions.FirstVersion {
		return fmt.Errorf("stage %s: a version has that name: %w", name, ErrExist)
	}
	return nil
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || name == versions.FirstVersion || strings.HasPrefix(name, ".") ||
		strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("stage %q: not a valid version name: %w", name, ErrInvalid)
	}
	return nil
}

// Remove discards the stage called name, which must be empty (rm -r empties it first):
// ErrNotEmpty otherwise.
func (m *Manager) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stages[name]
	if s == nil {
		return fmt.Errorf("stage %s: %w", name, ErrNotExist)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ents, err := s.list(""); err != nil {
		return err
	} else if len(ents) > 0 {
		return fmt.Errorf("stage %s: %w", name, ErrNotEmpty)
	}
	s.discard()
	delete(m.stages, name)
	return os.RemoveAll(s.dir())
}

// Commit commits the stage called name as one version called version ("" for a default
// name) on the stage's base, makes it current, and ends the stage. A taken name is
// ErrExist, and the stage stays as it was, as it does when the commit fails.
func (m *Manager) Commit(name, version string) (commit.Result, error) {
	s, err := m.toCommit(name, version)
	if err != nil {
		return commit.Result{}, err
	}
	// The commit holds the stage's lock only: the other stages, and listing stage/, do not
	// wait for it.
	s.mu.Lock()
	res, err := s.commit(version)
	if err != nil {
		if !errors.Is(err, h5.ErrStopped) {
			s.unmarkCommitting() // failed before writing, or before its sync: not committed
		}
		// Kept whole on disk, so that a mount after this one (a failed commit stops the
		// mount's writes to the file) can commit it.
		if !s.gone {
			if serr := s.saveAll(); serr != nil {
				slog.Error("stage not saved after its commit failed", "stage", name, "err", serr)
			}
		}
		s.mu.Unlock()
		if errors.Is(err, commit.ErrExists) {
			return commit.Result{}, fmt.Errorf("stage %s: %w: %w", name, err, ErrExist)
		}
		return commit.Result{}, err
	}
	s.discard()
	s.mu.Unlock()
	m.mu.Lock()
	if m.stages[name] == s {
		delete(m.stages, name)
	}
	m.mu.Unlock()
	if err := os.RemoveAll(s.dir()); err != nil {
		slog.Error("committed stage's files not removed", "stage", name, "version", res.Name, "err", err)
	}
	return res, nil
}

// toCommit returns the stage called name, if version is a name it may commit as.
func (m *Manager) toCommit(name, version string) (*Stage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stages[name]
	if s == nil {
		return nil, fmt.Errorf("stage %s: %w", name, ErrNotExist)
	}
	if version == "" {
		return s, nil
	}
	if err := validName(version); err != nil {
		return nil, err
	}
	if _, ok := m.stages[version]; ok && version != name {
		return nil, fmt.Errorf("version %s: a stage has that name: %w", version, ErrExist)
	}
	if _, ok, err := m.f.Version(version); err != nil {
		return nil, err
	} else if ok {
		return nil, fmt.Errorf("version %s: %w", version, ErrExist)
	}
	return s, nil
}

// Close saves every stage (their datasets' staged data) for the next mount and drops
// them from memory.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, s := range m.stages {
		s.mu.Lock()
		err := s.saveAll()
		s.discard()
		s.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("stage %s: %w", s.name, err))
		}
	}
	m.stages = map[string]*Stage{}
	return errors.Join(errs...)
}

// Stage is one stage: its base version and the changes made on top of it.
type Stage struct {
	m    *Manager
	name string
	id   uint64 // unique among the Manager's stages, past and present

	mu       sync.Mutex
	base     string                                // GUARDED_BY(mu)
	branch   string                                // the branch the stage commits on, "" for none; GUARDED_BY(mu)
	removed  map[string]bool                       // base paths removed (and all below); GUARDED_BY(mu)
	groups   map[string]bool                       // groups created; GUARDED_BY(mu)
	datasets map[string]*Dataset                   // datasets opened or created; GUARDED_BY(mu)
	gone     bool                                  // committed, discarded or closed; GUARDED_BY(mu)
	attrs    map[string]map[string]json.RawMessage // path -> name -> JSON (nil: removed); "" is the root; GUARDED_BY(mu)
}

// newStage starts a stage. Called with m.mu held (or before m is shared).
func newStage(m *Manager, name, base string) *Stage {
	m.nextID++
	return &Stage{m: m, name: name, id: m.nextID, base: base, removed: map[string]bool{}, groups: map[string]bool{},
		datasets: map[string]*Dataset{}, attrs: map[string]map[string]json.RawMessage{}}
}

// Name is the stage's name.
func (s *Stage) Name() string { return s.name }

// ID tells this stage from earlier stages of the same name.
func (s *Stage) ID() uint64 { return s.id }

// Peek returns the dataset at p if it was opened or created in the stage, else nil.
func (s *Stage) Peek(p string) *Dataset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.datasets[p]
}

// Base is the version the stage changes.
func (s *Stage) Base() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// Branch is the branch the stage commits on (package named), "" for none: a stage made
// on a branch commits there and leaves current_version alone.
func (s *Stage) Branch() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.branch
}

// Entry is a name in a stage's directory.
type Entry struct {
	Name    string
	IsGroup bool
}

func (s *Stage) basePath(p string) string {
	if p == "" {
		return versions.VersionGroup(s.base)
	}
	return versions.InVersion(s.base, p)
}

// underRemoved reports whether p or a group above it was removed from the base.
func (s *Stage) underRemoved(p string) bool {
	for q := p; q != "." && q != ""; q = path.Dir(q) {
		if s.removed[q] {
			return true
		}
	}
	return false
}

// kind says what p is in the stage's tree. Called with mu held.
func (s *Stage) kind(p string) (h5.Kind, error) {
	switch {
	case s.gone:
		// Committed or discarded: a node the kernel still holds must not show the base.
		return h5.KindMissing, fmt.Errorf("stage %s: committed or discarded: %w", s.name, ErrStale)
	case p == "" || s.groups[p]:
		return h5.KindGroup, nil
	case s.datasets[p] != nil:
		return h5.KindDataset, nil
	case s.underRemoved(p):
		return h5.KindMissing, nil
	}
	for q := path.Dir(p); q != "."; q = path.Dir(q) {
		if s.groups[q] {
			return h5.KindMissing, nil // a group created in the stage holds only what was created in it
		}
	}
	return s.m.f.Kind(s.basePath(p))
}

// Kind says what p (a path inside the stage, "" its root) is: a group, a dataset or
// missing.
func (s *Stage) Kind(p string) (h5.Kind, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kind(p)
}

// fromBase reports whether the object at p is the base's (not created in the stage).
func (s *Stage) fromBase(p string) bool {
	if p == "" {
		return true
	}
	if s.groups[p] || (s.datasets[p] != nil && s.datasets[p].Created()) {
		return false
	}
	k, err := s.kind(p)
	return err == nil && k != h5.KindMissing
}

// List lists the group at dir.
func (s *Stage) List(dir string) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list(dir)
}

func (s *Stage) list(dir string) ([]Entry, error) {
	k, err := s.kind(dir)
	if err != nil {
		return nil, err
	}
	if k != h5.KindGroup {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotDir)
	}
	seen := map[string]bool{}
	var out []Entry
	if s.fromBase(dir) {
		ents, err := s.m.f.List(s.basePath(dir))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if p := join(dir, e.Name); !s.removed[p] {
				seen[e.Name] = true
				out = append(out, Entry{Name: e.Name, IsGroup: e.IsGroup})
			}
		}
	}
	add := func(p string, group bool) {
		if path.Dir(p) == dirOrDot(dir) && !seen[path.Base(p)] {
			seen[path.Base(p)] = true
			out = append(out, Entry{Name: path.Base(p), IsGroup: group})
		}
	}
	for p := range s.groups {
		add(p, true)
	}
	for p := range s.datasets {
		add(p, false)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func dirOrDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// creatable checks that p's parent is a group of the stage and p is free.
func (s *Stage) creatable(p string) error {
	if err := s.expect(dirOf(p), h5.KindGroup); err != nil {
		return err
	}
	if k, err := s.kind(p); err != nil {
		return err
	} else if k != h5.KindMissing {
		return fmt.Errorf("%s: %w", p, ErrExist)
	}
	if p == "versions" || p == "__tmp__" {
		return fmt.Errorf("%s: a name versioned-hdf5 reserves at the top level: %w", p, ErrInvalid)
	}
	return nil
}

func dirOf(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// Mkdir creates a group.
func (s *Stage) Mkdir(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.creatable(p); err != nil {
		return err
	}
	s.groups[p] = true
	return s.changed(func() { delete(s.groups, p) })
}

// changed saves the tree after a change; if that fails, undo takes the change back and
// the error is returned (a change the stage cannot keep is not made).
func (s *Stage) changed(undo func()) error {
	if err := s.saveTree(); err != nil {
		undo()
		return err
	}
	return nil
}

// expect checks that p is a want (h5.KindGroup or h5.KindDataset): ErrNotExist if it is
// missing, ErrNotDir or ErrIsDir if it is the other kind. Called with mu held.
func (s *Stage) expect(p string, want h5.Kind) error {
	k, err := s.kind(p)
	switch {
	case err != nil:
		return err
	case k == h5.KindMissing:
		return fmt.Errorf("%s: %w", p, ErrNotExist)
	case k != want && want == h5.KindGroup:
		return fmt.Errorf("%s: %w", p, ErrNotDir)
	case k != want:
		return fmt.Errorf("%s: %w", p, ErrIsDir)
	}
	return nil
}

// exists checks that p is a group or a dataset of the stage (ErrNotExist if not). Called with
// mu held.
func (s *Stage) exists(p string) error {
	if k, err := s.kind(p); err != nil {
		return err
	} else if k == h5.KindMissing {
		return fmt.Errorf("%s: %w", p, ErrNotExist)
	}
	return nil
}

// Rmdir removes an empty group (ErrNotEmpty otherwise).
func (s *Stage) Rmdir(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.expect(p, h5.KindGroup); err != nil {
		return err
	}
	if p == "" {
		return fmt.Errorf("the stage's root: %w", ErrBusy)
	}
	if ents, err := s.list(p); err != nil {
		return err
	} else if len(ents) > 0 {
		return fmt.Errorf("%s: %w", p, ErrNotEmpty)
	}
	wasGroup, wasRemoved, attrs := s.groups[p], s.removed[p], s.attrs[p]
	delete(s.groups, p)
	delete(s.attrs, p)
	s.removed[p] = true
	return s.changed(func() {
		s.groups[p], s.removed[p] = wasGroup, wasRemoved
		if attrs != nil {
			s.attrs[p] = attrs
		}
	})
}

// Unlink removes a dataset.
func (s *Stage) Unlink(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.expect(p, h5.KindDataset); err != nil {
		return err
	}
	d, wasRemoved, attrs := s.datasets[p], s.removed[p], s.attrs[p]
	delete(s.datasets, p)
	delete(s.attrs, p)
	s.removed[p] = true
	if err := s.changed(func() {
		s.removed[p] = wasRemoved
		if d != nil {
			s.datasets[p] = d
		}
		if attrs != nil {
			s.attrs[p] = attrs
		}
	}); err != nil {
		return err
	}
	if d != nil {
		d.Close() // its staged chunks go back to the store
		os.Remove(s.dataFile(p))
	}
	return nil
}

// Create creates a dataset: a 1-D dataset of bytes until SetSpec describes it; at a path
// that held a dataset (deleted in the stage, or in an earlier version), a dataset of the
// dtype, chunks, fill value and filters that versioned-hdf5 fixed for the path, with no
// rows (the base's other axes, if it had the path), as versioned-hdf5 re-creates a
// deleted dataset.
func (s *Stage) Create(p string) (*Dataset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.creatable(p); err != nil {
		return nil, err
	}
	spec := plainSpec()
	if stored, err := s.stored(p); err != nil {
		return nil, err
	} else if stored != nil {
		spec = *stored
	}
	d, err := s.newDataset(p, spec)
	if err != nil {
		return nil, err
	}
	s.datasets[p] = d
	if err := s.changed(func() { delete(s.datasets, p) }); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// newDataset makes a created dataset's state from its spec.
func (s *Stage) newDataset(p string, spec Spec) (*Dataset, error) {
	ds, err := spec.DataSpec()
	if err != nil {
		return nil, err
	}
	if err := s.checkDataGroup(p, spec, ds); err != nil {
		return nil, err
	}
	if spec.Strings() {
		// The text of the spec's shape of "" (what h5py reads an unset string as).
		text := bytes.Repeat([]byte("\"\"\n"), int(chunkplan.Elements(spec.Shape)))
		return newDataset(p, writefile.NewText(text, spec.ASCII(), spec.Shape), &spec), nil
	}
	arr, err := staged.New(spec.Shape, spec.Chunks, len(ds.Fill), ds.Fill)
	if err != nil {
		return nil, invalid("%v", err)
	}
	s.m.c.Adopt(arr)
	return newDataset(p, writefile.NewFile(arr, nil), &spec), nil
}

// checkDataGroup refuses a spec that the path's data group, if an earlier dataset of the
// path left one, cannot hold: versioned-hdf5 fixes dtype, chunks and fill value per path.
func (s *Stage) checkDataGroup(p string, spec Spec, ds h5.DataSpec) error {
	// versioned-hdf5 finds data groups by walking _version_data and stopping at a group
	// with raw_data: a data group inside another, or around one, would be lost.
	for q := dirOf(p); q != ""; q = dirOf(q) {
		if k, err := s.m.f.Kind(versions.RawDataOf(q)); err != nil {
			return err
		} else if k != h5.KindMissing {
			return invalid("%s: %s holds a dataset's data in earlier versions, so nothing can be stored below it", p, q)
		}
	}
	raw := versions.RawDataOf(p)
	k, err := s.m.f.Kind(raw)
	if err != nil {
		return err
	}
	if k == h5.KindMissing {
		if k, err := s.m.f.Kind(versions.DataGroupOf(p)); err != nil {
			return err
		} else if k != h5.KindMissing {
			return invalid("%s: earlier versions store data of datasets below that path, so it cannot hold a dataset", p)
		}
		return nil
	}
	d, err := s.m.f.HDF5().OpenDataset(raw)
	if err != nil {
		return err
	}
	defer d.Close()
	info := d.Info()
	differs := info.Type.DType != ds.DType || !slices.Equal(info.Chunks, ds.Chunks) || !slices.Equal(info.Fill, ds.Fill)
	if info.Type.VlenString {
		differs = !spec.Strings() || spec.ASCII() == info.Type.UTF8 || !slices.Equal(info.Chunks, ds.Chunks)
	}
	if differs {
		why := fmt.Sprintf("%s held %s data in chunks %v, fill value %s, in earlier versions; a dataset of that path keeps them",
			p, info.Type.DType, info.Chunks, h5json.FillText(info.Type.DType, info.Fill))
		if info.Type.VlenString {
			why = fmt.Sprintf("%s held variable-length strings (%s) in chunks %v in earlier versions; a dataset of that path keeps them",
				p, encoding(info.Type.UTF8), info.Chunks)
		}
		if spec, err := StoredSpec(info, nil); err == nil {
			spec.Shape = nil
			if b, err := h5json.Marshal(spec); err == nil {
				why += fmt.Sprintf(" (give user.vh5fs.create %s, or none)", bytes.Replace(b, []byte(`"shape":null,`), nil, 1))
			}
		}
		return invalid("%s", why)
	}
	return nil
}

// stored is the spec that an earlier dataset at p fixed, if one left a data group there
// (Create's spec for p, and what SetSpec's given fields must agree with); nil if none did.
// A dataset there starts with no rows, and the base's other axes if the base has p.
// Called with mu held.
func (s *Stage) stored(p string) (*Spec, error) {
	raw := versions.RawDataOf(p)
	if k, err := s.m.f.Kind(raw); err != nil || k == h5.KindMissing {
		return nil, err
	}
	d, err := s.m.f.HDF5().OpenDataset(raw)
	if err != nil {
		return nil, err
	}
	info := d.Info()
	d.Close()
	shape := slices.Clone(info.Chunks)
	if k, err := s.m.f.Kind(s.basePath(p)); err == nil && k == h5.KindDataset {
		if base, err := s.m.f.Dataset(s.basePath(p)); err == nil && len(base.Shape) == len(shape) {
			shape = slices.Clone(base.Shape)
		}
	}
	if len(shape) == 0 {
		return nil, invalid("%s: earlier versions stored a dataset without chunks there", p)
	}
	shape[0] = 0
	spec, err := StoredSpec(info, shape)
	if err != nil {
		return nil, fmt.Errorf("%s held a dataset in earlier versions that a stage cannot create again: %w", p, err)
	}
	return &spec, nil
}

// SetSpec describes a dataset created in the stage (user.vh5fs.create). Only a dataset
// nothing was written to yet takes one (ErrInvalid otherwise); its data starts as the spec's
// shape of fill values.
//
// At a path that held a dataset, fields left out take the values that versioned-hdf5
// fixed for the path (Create's), and given ones must agree with them.
func (s *Stage) SetSpec(p string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.datasets[p]
	if old == nil || !old.Created() {
		return invalid("%s: user.vh5fs.create describes a dataset created in the stage, before its first write", p)
	}
	if old.Size() != 0 || old.Written() {
		return invalid("%s: user.vh5fs.create must come before the first write", p)
	}
	stored, err := s.stored(p)
	if err != nil {
		return err
	}
	spec, err := parseSpec(value, stored)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	d, err := s.newDataset(p, spec)
	if err != nil {
		return err
	}
	// The open handles of the file keep the Dataset: it takes the new state in place.
	was := old.swap(d.h.Load(), d.spec.Load())
	if err := s.changed(func() { old.swap(was, old.spec.Load()) }); err != nil {
		old.swap(was, old.spec.Load()).Close()
		return err
	}
	was.Close()
	return nil
}

// Open returns the dataset at p, shared by every open of it.
func (s *Stage) Open(p string) (*Dataset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open(p)
}

func (s *Stage) open(p string) (*Dataset, error) {
	if d := s.datasets[p]; d != nil {
		return d, nil
	}
	if k, err := s.kind(p); err != nil {
		return nil, err
	} else if k != h5.KindDataset {
		return nil, fmt.Errorf("%s: %w", p, ErrNotExist)
	}
	h, err := writefile.OpenFile(s.m.c, s.base, p)
	if err != nil {
		return nil, err
	}
	d := newDataset(p, h, nil)
	s.datasets[p] = d
	return d, nil
}

// BaseDataset is the base version's dataset at p (for what a stage serves from it:
// datasets that take no writes, their xattrs).
func (s *Stage) BaseDataset(p string) (*versions.Dataset, error) {
	return s.m.f.Dataset(s.basePath(p))
}

// SetBase rebases a stage nothing was changed in onto version; it then commits on no
// branch.
func (s *Stage) SetBase(version string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.kind(""); err != nil {
		return err
	}
	if _, ok, err := s.m.f.Version(version); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("version %s: %w", version, ErrNotExist)
	}
	return s.rebase(version, "")
}

// SetBranch rebases a stage nothing was changed in onto branch's head, and has it commit
// on the branch (commit.Tree.Branch).
func (s *Stage) SetBranch(branch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.kind(""); err != nil {
		return err
	}
	r, err := named.Read(s.m.f.HDF5())
	if err != nil {
		return err
	}
	head, err := r.Head(branch, s.m.f.Version)
	if err != nil {
		return err
	}
	return s.rebase(head.Name, branch)
}

// rebase makes version and branch the stage's, if nothing was changed in it. Called with
// s.mu held.
func (s *Stage) rebase(version, branch string) error {
	if len(s.removed) > 0 || len(s.groups) > 0 || len(s.attrs) > 0 {
		return fmt.Errorf("stage %s has changes: only an unchanged stage can be rebased: %w", s.name, ErrBusy)
	}
	for _, d := range s.datasets {
		_, release := d.Hold()
		changed := d.changed()
		release()
		if changed {
			return fmt.Errorf("stage %s has changes: only an unchanged stage can be rebased: %w", s.name, ErrBusy)
		}
	}
	old, oldBranch, oldDatasets := s.base, s.branch, s.datasets
	s.base, s.branch, s.datasets = version, branch, map[string]*Dataset{}
	if err := s.changed(func() { s.base, s.branch, s.datasets = old, oldBranch, oldDatasets }); err != nil {
		return err
	}
	for _, d := range oldDatasets {
		d.Close()
	}
	return nil
}

// Attr is one HDF5 attribute of an object in a stage, in its JSON form.
type Attr struct {
	Name string
	JSON json.RawMessage
}

// Attrs lists the HDF5 attributes of the group or dataset at p as they will be committed:
// the base's (for objects of the base; none for the stage's root, whose attributes
// versioned-hdf5 does not carry over) with the stage's changes, without the reserved
// ones versioned-hdf5 sets itself.
func (s *Stage) Attrs(p string) ([]Attr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attrList(p)
}

func (s *Stage) attrList(p string) ([]Attr, error) {
	if err := s.exists(p); err != nil {
		return nil, err
	}
	vals := map[string]json.RawMessage{}
	if p != "" && s.fromBase(p) {
		attrs, err := s.m.f.Attrs(s.basePath(p))
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if reserved(p, a.Name) {
				continue
			}
			b, err := h5json.AttrText(a)
			if err != nil {
				return nil, err
			}
			vals[a.Name] = b
		}
	}
	for n, v := range s.attrs[p] {
		if v == nil {
			delete(vals, n)
		} else {
			vals[n] = v
		}
	}
	out := make([]Attr, 0, len(vals))
	for n, v := range vals {
		out = append(out, Attr{n, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// reserved: attributes versioned-hdf5 writes itself (a version's metadata on its root,
// the storage of a dataset).
func reserved(p, name string) bool {
	if p == "" {
		return name == versions.AttrPrevVersion || name == versions.AttrCommitted || name == versions.AttrTimestamp
	}
	return name == versions.AttrRawData || name == versions.AttrChunks
}

// SetAttr sets HDF5 attribute name of the group or dataset at p from its JSON form. A
// value that is not JSON, and does not start like a JSON list or object, is a string:
// setfattr strips the quotes of -v '"shares"', and a user who typed that meant the
// string.
func (s *Stage) SetAttr(p, name string, value []byte) error {
	value, err := attrValue(value)
	if err != nil {
		return invalid("attribute %s: %v", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" || reserved(p, name) {
		return invalid("attribute %q is versioned-hdf5's own", name)
	}
	if err := s.exists(p); err != nil {
		return err
	}
	m := s.attrs[p]
	if m == nil {
		m = map[string]json.RawMessage{}
		s.attrs[p] = m
	}
	old, had := m[name]
	m[name] = json.RawMessage(slices.Clone(value))
	return s.changed(func() {
		if had {
			m[name] = old
		} else {
			delete(m, name)
		}
	})
}

// RemoveAttr removes HDF5 attribute name of the object at p (ErrNoAttr if it has none).
func (s *Stage) RemoveAttr(p, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	attrs, err := s.attrList(p)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(attrs, func(a Attr) bool { return a.Name == name }) {
		return fmt.Errorf("%s: attribute %s: %w", p, name, ErrNoAttr)
	}
	m := s.attrs[p]
	if m == nil {
		m = map[string]json.RawMessage{}
		s.attrs[p] = m
	}
	old, had := m[name]
	if inBase, err := s.baseHasAttr(p, name); err != nil {
		return err
	} else if inBase {
		m[name] = nil // the base's: removed at commit
	} else {
		delete(m, name)
	}
	return s.changed(func() {
		if had {
			m[name] = old
		} else {
			delete(m, name)
		}
	})
}

// attrValue is the JSON an attribute value stands for (see SetAttr), checked.
func attrValue(b []byte) ([]byte, error) {
	t := bytes.TrimSpace(b)
	if !json.Valid(t) && utf8.Valid(b) && len(t) > 0 && t[0] != '[' && t[0] != '{' {
		return h5json.Marshal(string(b))
	}
	return b, checkAttrJSON(b)
}

// baseHasAttr reports whether the object at p comes from the base with attribute name,
// which the commit copies (and a removal must then delete). Called with mu held.
func (s *Stage) baseHasAttr(p, name string) (bool, error) {
	if p == "" || !s.fromBase(p) {
		return false, nil // the version group's own attributes are not carried over
	}
	attrs, err := s.m.f.Attrs(s.basePath(p))
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(attrs, func(a h5.Attr) bool { return a.Name == name }), nil
}

// checkAttrJSON refuses values SetAttrJSON cannot write: they would fail the commit.
func checkAttrJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	var kind func(v any, depth int) (string, error)
	kind = func(v any, depth int) (string, error) {
		switch x := v.(type) {
		case string:
			if depth > 1 {
				return "", fmt.Errorf("strings only in a 1-D list")
			}
			return "string", nil
		case bool:
			return "bool", nil
		case float64:
			return "number", nil
		case []any:
			if len(x) == 0 {
				return "", fmt.Errorf("an empty list has no type")
			}
			first, err := kind(x[0], depth+1)
			if err != nil {
				return "", err
			}
			for _, e := range x[1:] {
				k, err := kind(e, depth+1)
				if err != nil {
					return "", err
				}
				if k != first {
					return "", fmt.Errorf("a list of mixed or ragged values")
				}
			}
			return fmt.Sprintf("[%d]%s", len(x), first), nil
		}
		return "", fmt.Errorf("null and objects are not attribute values")
	}
	_, err := kind(v, 0)
	return err
}

// Sync saves the dataset's staged data to the stage's files on disk: what a crash of the
// daemon then keeps (see the package doc).
func (s *Stage) Sync(d *Dataset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || s.datasets[d.path] != d {
		return d.errGone()
	}
	return s.saveDataset(d)
}

// commit builds the stage's Tree and commits it. Called with s.mu held.
func (s *Stage) commit(version string) (commit.Result, error) {
	paths := make([]string, 0, len(s.datasets))
	for p := range s.datasets {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	arrays := map[string]*staged.Array{}
	for _, p := range paths {
		arr, release := s.datasets[p].Hold()
		defer release()
		arrays[p] = arr
	}
	// A string dataset's text is parsed now: text that is not its values fails the commit
	// (EINVAL) before anything is written.
	strs := map[string]*commit.Strings{}
	for _, p := range paths {
		if d := s.datasets[p]; arrays[p] == nil && d.changed() {
			v, err := d.file().StringsHeld()
			if err != nil {
				return commit.Result{}, fmt.Errorf("%s: %w", p, err)
			}
			strs[p] = v
		}
	}
	t := commit.Tree{Base: s.base, Branch: s.branch, Name: version, Attrs: attrChanges(s.attrs[""]), Named: s.markCommitting}
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := s.list(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := join(dir, e.Name)
			en := commit.Entry{Path: p, Group: e.IsGroup, FromBase: s.fromBase(p), Attrs: attrChanges(s.attrs[p])}
			if d := s.datasets[p]; d != nil {
				if d.Created() {
					ds, err := d.Spec().DataSpec()
					if err != nil {
						return err
					}
					en.New, en.Array, en.Strings, en.ASCII = &ds, arrays[p], strs[p], d.Spec().ASCII()
				} else if d.changed() {
					en.Array, en.Strings = arrays[p], strs[p]
				}
			}
			t.Entries = append(t.Entries, en)
			if e.IsGroup {
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return commit.Result{}, err
	}
	return s.m.c.CommitTree(t)
}

func attrChanges(m map[string]json.RawMessage) []commit.AttrChange {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]commit.AttrChange, 0, len(names))
	for _, n := range names {
		var v []byte
		if m[n] != nil {
			v = m[n]
		}
		out = append(out, commit.AttrChange{Name: n, JSON: v})
	}
	return out
}

// discard ends the stage in memory: its staged data goes, and every call on it answers
// ErrStale. Called with s.mu held.
func (s *Stage) discard() {
	s.gone = true
	for _, d := range s.datasets {
		d.Close()
	}
	s.datasets = map[string]*Dataset{}
}

// Rescue keeps the changes of a write handle that could not commit them (its commit
// failed, and the handle is being closed) as a new stage on base, holding the dataset at
// path as the handle staged it, and returns the stage's name. Saved to disk before it
// returns, the stage outlives the handle and the mount: a later mount commits it
// (mv stage/NAME versions/). The handle is only read.
func (m *Manager) Rescue(base, branch, path string, h *writefile.File) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stamp := time.Now().UTC().Format("20060102T150405.000000Z")
	name := "unsaved-" + stamp
	for i := 2; m.taken(name) != nil; i++ {
		name = fmt.Sprintf("unsaved-%s-%d", stamp, i)
	}
	s := newStage(m, name, base)
	s.branch = branch
	if err := os.MkdirAll(s.dir(), 0o700); err != nil {
		return "", fmt.Errorf("stage %s: %w", name, err)
	}
	d := newDataset(path, h, nil)
	d.restored = true // whatever it holds differs from the base: it was to be committed
	s.mu.Lock()
	s.datasets[path] = d
	err := s.saveDataset(d)
	s.mu.Unlock()
	if err == nil {
		// Served from what was saved: the handle's state goes with the handle.
		var loaded *Stage
		if loaded, err = m.load(name); err == nil {
			m.stages[name] = loaded
			return name, nil
		}
	}
	os.RemoveAll(s.dir())
	return "", fmt.Errorf("stage %s: %w", name, err)
}
