// Package versions is the versioned-hdf5 layout of an HDF5 file: which versions exist and
// their metadata, each version's tree of groups and datasets, and what each dataset maps
// to: its shape, dtype and fill value, and for versioned datasets a chunk map (grid index
// -> raw_data slot) built from the virtual dataset's mappings. A file without
// _version_data is served as a plain HDF5 tree through the same types.
//
// Reading bytes is one call (File.Read for the mount, Dataset.Read and ReadAt for the
// rest): strings, scalars and datasets without a clean chunk map are read here (libhdf5
// for the last), the others by the file's chunk store (package chunkstore), which owns the
// file's descriptor, its mapping, the slot indexes, the decoded-chunk cache and the lock
// over the file's bytes. Live mounts (live.go) refresh the plain tree on every request.
//
// Everything a committed version holds is immutable, so Dataset values are cached for the
// life of the File (those holding large chunk maps within a budget, dscache.go).
//
// Which versions exist and which is current are read from the file's durable bytes, one
// state at a time (snapshot), not from libhdf5 (but where h5meta does not decode them),
// which sees a commit's writes before they are published: readers see the file before a
// commit's publish or after it, never a mix of both.
//
// Lock ordering: File.slotsMu (shared by reads of a dataset's bytes, exclusive while a
// rewrite moves raw_data slots: MoveSlots), File.snapMu (one reader reads a new state),
// File.mu, then the chunk
// store's lock over the file's bytes (shared by readers of metadata from the bytes,
// exclusive while a commit's sync applies its journal), then the HDF5 lock (package h5);
// never the other way round. A commit's sync takes the bytes lock holding only the
// h5.File's sync lock (h5/journal.go), so it never takes File.mu while it holds it. The
// whole order of the program's locks is docs/ARCHITECTURE.md's table.
package versions

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vh5fs/vh5fs/chunkstore"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
)

// ErrDataVersion is returned by Open for files whose data_version vh5fs must not read.
var ErrDataVersion = errors.New("unsupported data_version")

// ErrNotFound is returned for a version, group or dataset that does not exist.
var ErrNotFound = errors.New("not found")

// File is an HDF5 file opened for reading, versioned or plain.
type File struct {
	h           *h5.File
	versioned   bool
	dataVersion int64
	store       *chunkstore.Store // the file's bytes: chunk reads, and metadata read by h5meta

	// slotsMu keeps reads of a read-write file's datasets out of a rewrite that moves
	// raw_data slots (a deletion's compaction): from its apply until the chunk maps are
	// read again, a map built before names slots that hold other chunks.
	slotsMu sync.RWMutex

	mu       sync.Mutex
	datasets map[string]*Dataset    // by HDF5 path; GUARDED_BY(mu)
	mapped   datasetBudget          // the chunk maps datasets holds; GUARDED_BY(mu)
	raws     map[string]*h5.Dataset // open raw_data datasets by path; GUARDED_BY(mu)
	retired  []*Dataset             // datasets Forget dropped that hold handles, closed by Close; GUARDED_BY(mu)
	// retiredRaws are raw_data handles ForgetAll dropped, closed by Close. GUARDED_BY(mu)
	retiredRaws []*h5.Dataset
	meta        map[string]Version       // committed versions' metadata; GUARDED_BY(mu)
	snap        atomic.Pointer[snapshot] // the versions of the last state read from the bytes
	cur         atomic.Pointer[current]  // the current version of the last state read without the list
	snapMu      sync.Mutex               // one reader reads a new state, the others wait for it
	signedAt    int64                    // where the superblock's signature is, read as such (signed); -1: as stored
	live        *liveState               // OpenLive only (live.go)
	asOf        *asOf                    // set by AsOf before the File is shared, then read-only
}

// Open opens path read-only and checks its layout. A file with a _version_data group must
// be a versioned-hdf5 file of a data_version vh5fs reads: 1 (legacy) or 4.
// A file a SWMR writer has open (or a copy of one taken mid-write) opens as libhdf5's SWMR
// reader, which a plain open is refused for (see openReadOnly).
func Open(path string) (*File, error) { return open(path, openReadOnly) }

// OpenRW opens path for reading and committing new versions (package commit). A file in
// a format the libhdf5 vh5fs is built with cannot change is refused (CheckFormat) before
// libhdf5 opens it for writing: untouched.
func OpenRW(path string) (*File, error) {
	if err := CheckFileFormat(path); err != nil {
		return nil, err
	}
	return open(path, h5.OpenRW)
}

func open(path string, opener func(string) (*h5.File, error)) (*File, error) {
	h, err := opener(path)
	if err != nil {
		return nil, err
	}
	store, err := chunkstore.Open(path)
	if err != nil {
		h.Close()
		return nil, err
	}
	f := &File{h: h, store: store, datasets: map[string]*Dataset{}, mapped: datasetBudget{limit: datasetChunkBudget}, raws: map[string]*h5.Dataset{}, meta: map[string]Version{}, signedAt: -1}
	if err := f.checkLayout(); err != nil {
		h.Close()
		store.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if h.Writable() {
		h.SetApplyLock(store.ApplyLock())
		// The file's own syncs are the only ones that can mark it (the HDF5 file lock keeps
		// other writers out), and each applies under the bytes lock.
		if m, err := store.Meta(); err == nil {
			f.signedAt = m.Base()
		}
	}
	return f, nil
}

func (f *File) checkLayout() error {
	k, err := f.h.Kind(DataRoot)
	if err != nil {
		return err
	}
	if k == h5.KindMissing {
		return nil // a plain HDF5 file
	}
	if k != h5.KindGroup {
		return fmt.Errorf("%s is not a group", DataRoot)
	}
	if k, err = f.h.Kind(VersionsGroup); err != nil {
		return err
	} else if k != h5.KindGroup {
		return fmt.Errorf("not a versioned-hdf5 file: %s has no versions group", DataRoot)
	}
	f.versioned = true
	f.dataVersion = 1 // absent means 1
	a, ok, err := f.h.Attr(VersionsGroup, "data_version")
	if err != nil {
		return err
	}
	if ok {
		v, isInt := a.Value.(int64)
		if !isInt {
			return fmt.Errorf("%w: data_version attribute is %s, not an integer", ErrDataVersion, describeValue(a.Value))
		}
		f.dataVersion = v
	}
	switch {
	case f.dataVersion > SupportedDataVersion:
		return fmt.Errorf("%w %d: written by a later versioned-hdf5 than this vh5fs reads (<= %d)", ErrDataVersion, f.dataVersion, SupportedDataVersion)
	case f.dataVersion == 2 || f.dataVersion == 3:
		return fmt.Errorf("%w %d: its hash tables are known to be corrupt; rebuild them with versioned-hdf5 first", ErrDataVersion, f.dataVersion)
	case f.dataVersion < 1:
		return fmt.Errorf("%w %d", ErrDataVersion, f.dataVersion)
	}
	return nil
}

// describeValue names an attribute value of an unexpected type, e.g. `the string "4"`.
func describeValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("the string %q", s)
	}
	return fmt.Sprintf("%v (%T)", v, v)
}

// Close releases the file and everything opened from it.
func (f *File) Close() error {
	f.mu.Lock()
	ds := f.datasets
	raws := f.raws
	retired, retiredRaws := f.retired, f.retiredRaws
	f.datasets, f.raws, f.retired, f.retiredRaws = map[string]*Dataset{}, map[string]*h5.Dataset{}, nil, nil
	f.mapped.reset()
	f.mu.Unlock()
	for _, d := range ds {
		d.close()
	}
	for _, d := range retired {
		d.close()
	}
	for _, r := range retiredRaws {
		r.Close()
	}
	for _, r := range raws {
		r.Close()
	}
	f.closeLive()
	f.store.Close()
	return f.h.Close()
}

// HDF5 is the underlying file, for the commit package, which writes through it.
func (f *File) HDF5() *h5.File { return f.h }

// Writable reports whether the file was opened with OpenRW.
func (f *File) Writable() bool { return f.h.Writable() }

// Path is the file's path.
func (f *File) Path() string {
	if f.live != nil {
		return f.live.path // the HDF5 handle may be open through /proc/self/fd after a reopen
	}
	return f.h.Path()
}

// Versioned reports whether the file has the versioned-hdf5 layout.
func (f *File) Versioned() bool { return f.versioned }

// DataVersion is the format revision (0 for plain files).
func (f *File) DataVersion() int64 { return f.dataVersion }

// CurrentVersion is the name of the current version ("" for plain files, or when the file
// has only __first_version__).
func (f *File) CurrentVersion() (string, error) {
	if !f.versioned {
		return "", nil
	}
	if f.asOf != nil {
		return f.asOf.version, nil
	}
	snap := f.snapshot()
	s, err := snap.current, snap.currentErr
	if errors.Is(err, h5meta.ErrUnsupported) {
		s, err = f.stringAttr(VersionsGroup, AttrCurrentVersion)
	}
	if err != nil || s == FirstVersion {
		return "", err
	}
	return s, nil
}

// Current is CurrentVersion, and whether it names a committed version, both read from one
// state of the file: before a commit's publish or after it, never current_version of one
// and the committed flags of the other. In a healthy file committed is true unless name is
// "".
func (f *File) Current() (name string, committed bool, err error) {
	if !f.versioned {
		return "", false, nil
	}
	if f.asOf != nil {
		return f.asOf.version, true, nil // AsOf found it committed
	}
	if f.lastSnapshot() == nil {
		if c, ok := f.currentOnly(); ok {
			return c.name, c.committed, nil
		}
	}
	s := f.snapshot()
	if s.unsupported() {
		// Both through libhdf5, which a commit changes in this order: flag, then current.
		if name, err = f.stringAttr(VersionsGroup, AttrCurrentVersion); err != nil || name == FirstVersion || name == "" {
			return "", false, err
		}
		_, committed, err = f.readVersion(name)
		return name, committed, err
	}
	if s.currentErr != nil || s.current == FirstVersion || s.current == "" {
		return "", false, s.currentErr
	}
	if s.listErr != nil { // a damaged list: the version's own group answers
		_, committed, err = f.readVersion(s.current)
	} else {
		_, committed, err = s.version(f, s.current)
	}
	return s.current, committed, err
}

// current is current_version, and whether it names a committed version, in the state of
// the file's bytes at gen.
type current struct {
	gen       uint64
	name      string
	committed bool
}

// currentOnly is Current without the list of versions, which costs in proportion to their
// number at every new state: current_version and the committed flag of the version it
// names, read from one state of the bytes. ok is false where the snapshot answers (an
// error, a name libhdf5 does not have, the state moving on meanwhile).
func (f *File) currentOnly() (c *current, ok bool) {
	gen := f.store.Gen()
	if c := f.cur.Load(); c != nil && (c.gen == gen || f.store.Writing() && c.gen == gen-1 && f.store.Gen() == gen) {
		return c, true
	}
	addr, err := f.h.ObjectAddr(VersionsGroup)
	if err != nil {
		return nil, false
	}
	f.store.RLockBytes()
	gen = f.store.Gen()
	m, err := f.bytesMeta(true)
	var name string
	if err == nil {
		name, err = currentAttr(m, addr)
	}
	f.store.RUnlockBytes()
	if err != nil {
		return nil, false
	}
	c = &current{gen: gen}
	if name != FirstVersion {
		c.name = name
	}
	if c.name != "" {
		// A version once committed is so in every state whose current_version names it.
		f.mu.Lock()
		_, c.committed = f.meta[name]
		f.mu.Unlock()
	}
	if c.name != "" && !c.committed {
		vaddr, err := f.h.ObjectAddr(VersionGroup(name))
		if err != nil {
			return nil, false
		}
		var o *h5meta.Object
		f.store.RLockBytes()
		if f.store.Gen() != gen {
			err = errors.New("the state moved on")
		} else if m, err = f.bytesMeta(true); err == nil {
			o, err = m.Inspect(vaddr)
		}
		f.store.RUnlockBytes()
		var attrs []h5.Attr
		if err == nil {
			attrs, err = objectAttrs(o)
		}
		if err != nil {
			return nil, false
		}
		_, c.committed = versionFromAttrs(name, attrs)
	}
	for {
		old := f.cur.Load()
		if old != nil && old.gen >= gen || f.cur.CompareAndSwap(old, c) {
			return c, true
		}
	}
}

// Version is one committed version's metadata.
type Version struct {
	Name        string
	PrevVersion string // "" when the parent is __first_version__ or absent
	Timestamp   string // as stored: "2006-01-02 15:04:05.000000+0000"
}

// Time parses Timestamp (the fraction is optional in old files); zero if unparsable.
func (v Version) Time() time.Time {
	for _, layout := range []string{"2006-01-02 15:04:05.999999-0700", "2006-01-02 15:04:05-0700"} {
		if t, err := time.Parse(layout, v.Timestamp); err == nil {
			return t
		}
	}
	return time.Time{}
}

// Path is the version group's HDF5 path.
func (v Version) Path() string { return VersionGroup(v.Name) }

// Versions lists the committed versions by name, skipping __first_version__ and groups
// whose committed flag is false. The versions group and the attributes of each version are
// read from the file's bytes (h5meta: one pass, no per-object libhdf5 calls); libhdf5 is the
// fallback for anything h5meta does not decode.
func (f *File) Versions() ([]Version, error) {
	if !f.versioned {
		return nil, nil
	}
	s := f.snapshot()
	out, err := slices.Clone(s.versions), s.listErr
	if errors.Is(err, h5meta.ErrUnsupported) {
		out, err = f.versionsFromHDF5()
	}
	if err != nil {
		return nil, err
	}
	out = slices.DeleteFunc(out, f.hidden)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *File) versionsFromHDF5() ([]Version, error) {
	members, err := f.h.Members(VersionsGroup)
	if err != nil {
		return nil, err
	}
	out := make([]Version, 0, len(members))
	for _, m := range members {
		if (m.Kind != h5.KindGroup && m.Kind != h5.KindBroken) || m.Name == FirstVersion {
			continue
		}
		v, ok, err := f.readVersion(m.Name)
		if ok && f.hidden(v) {
			ok = false
		}
		if err != nil {
			// A version whose group or metadata cannot be read is listed all the same:
			// looking it up answers the error, and the other versions stay readable.
			out = append(out, Version{Name: m.Name})
			continue
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// snapshot is one state of the file's bytes as far as its versions go: current_version and
// the committed versions, read together under the bytes lock at gen. The durable bytes are
// always a whole state (a commit's apply changes them under that lock, its body and its
// publish each at once), while libhdf5 already sees a commit's writes before they are
// durable: so readers ask the snapshot, not libhdf5, which versions exist and which is
// current, and never meet current_version naming a version whose committed flag they
// read from another state.
type snapshot struct {
	gen        uint64
	current    string             // current_version as stored
	currentErr error              // current_version unread; ErrUnsupported (wrapped): libhdf5 reads it
	versions   []Version          // committed versions, and those whose metadata is unreadable
	byName     map[string]Version // versions by name
	broken     map[string]bool    // listed, but their metadata cannot be read
	listErr    error              // the list unread; ErrUnsupported (wrapped): libhdf5 lists it
}

// version looks name up in s: the broken are asked again (f.readVersion answers the error).
func (s *snapshot) version(f *File, name string) (Version, bool, error) {
	if s.broken[name] {
		return f.readVersion(name)
	}
	v, ok := s.byName[name]
	return v, ok, nil
}

// unsupported reports a part of s that h5meta does not decode, which libhdf5 answers.
func (s *snapshot) unsupported() bool {
	return errors.Is(s.currentErr, h5meta.ErrUnsupported) || errors.Is(s.listErr, h5meta.ErrUnsupported)
}

// snapshot returns the versions of the file's bytes now (versioned files only). While a
// commit applies, it is the state before the apply if that was read, else it waits for the
// apply, which runs no fsync under the lock. A damaged file's snapshot is read again at
// every call, as its errors may be of the moment.
func (f *File) snapshot() *snapshot {
	if s := f.lastSnapshot(); s != nil {
		return s
	}
	// Lock ordering: snapMu, then File.mu (never held with the bytes lock), the bytes
	// lock, the HDF5 lock.
	f.snapMu.Lock()
	defer f.snapMu.Unlock()
	if s := f.lastSnapshot(); s != nil {
		return s // read by the reader this one waited for
	}
	addr, err := f.h.ObjectAddr(VersionsGroup) // the group's address never changes
	if err != nil {
		return &snapshot{currentErr: err, listErr: err}
	}
	f.mu.Lock()
	known := maps.Clone(f.meta)
	f.mu.Unlock()
	f.store.RLockBytes()
	gen := f.store.Gen()
	found := map[string]Version{}
	s := f.readSnapshot(addr, known, found)
	f.store.RUnlockBytes()
	s.gen = gen
	f.mu.Lock()
	maps.Copy(f.meta, found)
	f.mu.Unlock()
	kept := func(err error) bool { return err == nil || errors.Is(err, h5meta.ErrUnsupported) }
	for kept(s.currentErr) && kept(s.listErr) {
		old := f.snap.Load()
		if old != nil && old.gen >= gen || f.snap.CompareAndSwap(old, s) {
			break
		}
	}
	return s
}

// lastSnapshot is the snapshot last read if it is the file's state now, or the state the
// apply under way started from; else nil.
func (f *File) lastSnapshot() *snapshot {
	// The versions change only with the bytes, and every change of the bytes bumps gen.
	gen := f.store.Gen()
	s := f.snap.Load()
	if s != nil && (s.gen == gen || f.store.Writing() && s.gen == gen-1 && f.store.Gen() == gen) {
		return s
	}
	return nil
}

// readSnapshot reads the versions group at addr, its current_version and its versions;
// the bytes are held (RLockBytes).
func (f *File) readSnapshot(addr uint64, known, found map[string]Version) *snapshot {
	s := &snapshot{byName: map[string]Version{}, broken: map[string]bool{}}
	m, err := f.bytesMeta(true)
	if err != nil {
		s.currentErr, s.listErr = err, err
		return s
	}
	s.current, s.currentErr = currentAttr(m, addr)
	if s.versions, s.listErr = f.versionList(m, addr, known, found, s.broken); s.listErr != nil {
		return s
	}
	slices.SortFunc(s.versions, func(a, b Version) int { return strings.Compare(a.Name, b.Name) })
	for _, v := range s.versions {
		s.byName[v.Name] = v
	}
	return s
}

// bytesMeta opens the file's bytes for h5meta (the chunk store's Meta, or with mapped its
// MappedMeta: thousands of small reads rather than one pread each), with the HDF5
// signature where a guarded sync of this File (h5.File.GuardSync: a rename, a deletion's
// compaction) puts its mark until its apply is durable: the bytes lock keeps each state
// the apply leaves whole, and the mark is there for other programs, which do not take
// it. The bytes are held.
func (f *File) bytesMeta(mapped bool) (*h5meta.File, error) {
	if f.signedAt < 0 && mapped {
		return f.store.MappedMeta()
	} else if f.signedAt < 0 {
		return f.store.Meta()
	}
	st, err := f.store.File().Stat()
	if err != nil {
		return nil, err
	}
	if mapped {
		return h5meta.Open(signed{h5meta.MapFile(f.store.File(), st.Size()), f.signedAt}, st.Size())
	}
	return h5meta.Open(signedFile{f.store.File(), f.signedAt}, st.Size())
}

// hdf5Signature opens every HDF5 file's superblock (HDF5 file format specification, II.A).
const hdf5Signature = "\x89HDF\r\n\x1a\n"

// signed reads r with hdf5Signature at at.
type signed struct {
	r  io.ReaderAt
	at int64
}

func (s signed) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.r.ReadAt(p, off)
	sign(p[:n], off, s.at)
	return n, err
}

// signedFile is signed for the file itself, which h5meta maps long mapping lists of.
type signedFile struct {
	*os.File
	at int64
}

func (s signedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.File.ReadAt(p, off)
	sign(p[:n], off, s.at)
	return n, err
}

// sign writes hdf5Signature over p, read at off, where it holds the bytes at at.
func sign(p []byte, off, at int64) {
	if off <= at && at+int64(len(hdf5Signature)) <= off+int64(len(p)) {
		copy(p[at-off:], hdf5Signature)
	}
}

// currentAttr reads current_version from the versions group at addr in m ("" if absent).
func currentAttr(m *h5meta.File, addr uint64) (string, error) {
	o, err := m.Inspect(addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", VersionsGroup, err)
	}
	for _, a := range o.Attrs {
		if a.Name != AttrCurrentVersion {
			continue
		}
		if a.Value == nil {
			return "", fmt.Errorf("%s: attribute current_version: %w", VersionsGroup, h5meta.ErrUnsupported)
		}
		s, isString := a.Value.(string)
		if !isString {
			return "", fmt.Errorf("%s: attribute current_version is %T, not a string", VersionsGroup, a.Value)
		}
		return s, nil
	}
	return "", nil
}

// versionList lists the versions linked from the group at addr in m, taking those in known
// as they are, adding the others it reads to found and the names of those whose metadata
// cannot be read to broken. Reading 10,000 versions' attributes is most of an
// `ls versions/`, so a long list is read by one goroutine per core. The bytes are held.
func (f *File) versionList(m *h5meta.File, addr uint64, known, found map[string]Version, broken map[string]bool) ([]Version, error) {
	links, err := m.Links(addr)
	if err != nil {
		return nil, err
	}
	type entry struct {
		v          Version
		keep, read bool // listed; read here (not known)
		broken     bool // listed, its metadata unreadable
		err        error
	}
	entries := make([]entry, len(links))
	list := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			l, e := links[i], &entries[i]
			if l.Name == FirstVersion || strings.Contains(l.Name, "/") {
				continue
			}
			if v, ok := known[l.Name]; ok {
				e.v, e.keep = v, true
				continue
			}
			o, err := m.Inspect(l.Addr)
			if errors.Is(err, h5meta.ErrUnsupported) {
				e.err = err
				continue
			}
			if err != nil {
				// A version whose metadata cannot be read is listed all the same: looking it
				// up answers the error, and the other versions stay readable.
				e.v, e.keep, e.broken = Version{Name: l.Name}, true, true
				continue
			}
			if !o.IsGroup {
				continue
			}
			attrs, err := objectAttrs(o)
			if err != nil {
				e.err = fmt.Errorf("%s/%s: %w", VersionsGroup, l.Name, err)
				continue
			}
			e.v, e.keep = versionFromAttrs(l.Name, attrs)
			e.read = e.keep
		}
	}
	workers := min(runtime.GOMAXPROCS(0), 4, 1+len(links)/256)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			list(w*len(links)/workers, (w+1)*len(links)/workers)
		}()
	}
	wg.Wait()
	out := make([]Version, 0, len(links))
	for _, e := range entries {
		if e.err != nil {
			return nil, e.err
		}
		if e.keep {
			out = append(out, e.v)
		}
		if e.read {
			found[e.v.Name] = e.v
		}
		if e.broken {
			broken[e.v.Name] = true
		}
	}
	return out, nil
}

// Version returns the metadata of a committed version; ok is false if there is no
// committed version of that name (or it was made after the moment AsOf pinned).
func (f *File) Version(name string) (v Version, ok bool, err error) {
	v, ok, err = f.version(name)
	if ok && f.hidden(v) {
		return Version{}, false, nil
	}
	return v, ok, err
}

func (f *File) version(name string) (v Version, ok bool, err error) {
	if !f.versioned || name == "" || name == FirstVersion || strings.Contains(name, "/") {
		return Version{}, false, nil
	}
	if s := f.snapshot(); s.listErr == nil {
		return s.version(f, name)
	}
	return f.readVersion(name) // a damaged list, or one h5meta does not decode
}

// readVersion is version through libhdf5 and the version's attributes.
func (f *File) readVersion(name string) (v Version, ok bool, err error) {
	f.mu.Lock()
	v, ok = f.meta[name]
	f.mu.Unlock()
	if ok {
		return v, true, nil
	}
	path := VersionGroup(name)
	if k, err := f.h.Kind(path); err != nil || k != h5.KindGroup {
		return Version{}, false, err
	}
	attrs, err := f.attrs(path)
	if err != nil {
		return Version{}, false, err
	}
	if v, ok = versionFromAttrs(name, attrs); !ok {
		return Version{}, false, nil
	}
	f.mu.Lock()
	f.meta[name] = v
	f.mu.Unlock()
	return v, true, nil
}

// MoveSlots runs fn, which rewrites the file in place moving raw_data slots, and then
// drops what f keeps of the layout (ForgetAll), with every read of a dataset's bytes held
// out: a read sees the file before the rewrite or after it, never a chunk map of before
// over the slots of after.
func (f *File) MoveSlots(fn func() error) error {
	f.slotsMu.Lock()
	defer f.slotsMu.Unlock()
	defer f.ForgetAll()
	return fn()
}

// ForgetAll drops everything f keeps of the file's layout (version metadata, datasets and
// their chunk maps, raw_data handles, slot indexes, decoded chunks): after a rewrite that
// moved chunks to other slots (a deletion of versions), everything is read again.
// Datasets and handles in use stay valid for their users and are closed with f.
func (f *File) ForgetAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.meta = map[string]Version{}
	f.snap.Store(nil)
	f.cur.Store(nil)
	for _, d := range f.datasets {
		if !droppable(d) {
			f.retired = append(f.retired, d)
		}
	}
	for _, r := range f.raws {
		f.retiredRaws = append(f.retiredRaws, r)
	}
	f.datasets, f.raws = map[string]*Dataset{}, map[string]*h5.Dataset{}
	f.mapped.reset()
	f.store.Reset()
}

// Forget drops what f keeps of the named versions (their datasets) and every version's
// metadata, which a rename or deletion of versions changed (a child's prev_version):
// they are read again from the file.
func (f *File) Forget(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.meta = map[string]Version{}
	f.snap.Store(nil)
	f.cur.Store(nil)
	for p, d := range f.datasets {
		for _, n := range names {
			if strings.HasPrefix(p, VersionsGroup+"/"+n+"/") {
				delete(f.datasets, p)
				if droppable(d) {
					f.mapped.chunks -= d.arr.NumChunks()
				} else {
					f.retired = append(f.retired, d) // may be in use: closed with f
				}
				break
			}
		}
	}
}

// CheckAttrs reads the attributes of the object at path from the file's bytes, as the
// mount does before it asks libhdf5 anything about them: an error means metadata that must
// not be handed to libhdf5, which can loop forever on some (a torn global heap, seen in
// H5Aread). nil also when h5meta does not decode them.
func (f *File) CheckAttrs(path string) error {
	_, err := f.bytesAttrs(path)
	if errors.Is(err, h5meta.ErrUnsupported) {
		return nil
	}
	return err
}

// Attrs returns the HDF5 attributes of the object at path, read from the file's bytes
// where h5meta decodes them (no libhdf5 open of a long virtual dataset), else by libhdf5.
func (f *File) Attrs(path string) ([]h5.Attr, error) { return f.attrs(path) }

// attrs reads the attributes of the object at path from the file's bytes (bytesAttrs),
// asking libhdf5 only for what h5meta does not decode.
func (f *File) attrs(path string) ([]h5.Attr, error) {
	attrs, err := f.bytesAttrs(path)
	if errors.Is(err, h5meta.ErrUnsupported) {
		return f.h.Attrs(path)
	}
	return attrs, err
}

// bytesAttrs reads the attributes of the object at path through h5meta: name and value,
// no types; an error wrapping ErrUnsupported for what h5meta does not decode.
func (f *File) bytesAttrs(path string) ([]h5.Attr, error) {
	addr, err := f.h.ObjectAddr(path)
	if err != nil {
		return nil, err
	}
	if !f.store.TryRLockBytes() { // a commit is writing: libhdf5 answers
		return nil, fmt.Errorf("a commit is being written: %w", h5meta.ErrUnsupported)
	}
	m, err := f.bytesMeta(false)
	var o *h5meta.Object
	if err == nil {
		o, err = m.Inspect(addr)
	}
	f.store.RUnlockBytes()
	var attrs []h5.Attr
	if err == nil {
		attrs, err = objectAttrs(o)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return attrs, nil
}

// objectAttrs converts h5meta's attributes; ErrUnsupported if one was not decoded.
func objectAttrs(o *h5meta.Object) ([]h5.Attr, error) {
	attrs := make([]h5.Attr, len(o.Attrs))
	for i, a := range o.Attrs {
		if a.Value == nil {
			return nil, fmt.Errorf("attribute %s: %w", a.Name, h5meta.ErrUnsupported)
		}
		attrs[i] = h5.Attr{Name: a.Name, Value: a.Value}
	}
	return attrs, nil
}

// versionFromAttrs reads a version group's attributes; ok is false if it is not committed.
func versionFromAttrs(name string, attrs []h5.Attr) (v Version, ok bool) {
	v = Version{Name: name}
	committed := true // files from before the flag existed are committed by construction
	for _, a := range attrs {
		switch a.Name {
		case AttrCommitted:
			if b, isBool := a.Value.(bool); isBool {
				committed = b
			}
		case AttrPrevVersion:
			if s, _ := a.Value.(string); s != FirstVersion {
				v.PrevVersion = s
			}
		case AttrTimestamp:
			v.Timestamp, _ = a.Value.(string)
		}
	}
	return v, committed
}

// Entry is one child of a group: a group or a dataset.
type Entry struct {
	Name    string
	IsGroup bool
}

// List lists the groups and datasets in the HDF5 group at path. Links of other kinds are
// left out; so is _version_data at the root. A hard link to an object that cannot be read
// is listed as a dataset (Dataset then returns the error).
func (f *File) List(path string) ([]Entry, error) {
	members, err := f.h.Members(path)
	if err != nil {
		return nil, f.gone(path, err)
	}
	out := make([]Entry, 0, len(members))
	for _, m := range members {
		if path == "/" && "/"+m.Name == DataRoot {
			continue
		}
		switch m.Kind {
		case h5.KindGroup:
			out = append(out, Entry{Name: m.Name, IsGroup: true})
		case h5.KindDataset, h5.KindBroken:
			// A broken object is listed as a dataset: opening it answers the error.
			out = append(out, Entry{Name: m.Name})
		}
	}
	return out, nil
}

// gone is err, a failure to open path, or ErrNotFound if path names nothing now: a
// version renamed or deleted since its name was looked up is not an I/O error.
func (f *File) gone(path string, err error) error {
	if k, kerr := f.h.Kind(path); kerr == nil && k == h5.KindMissing {
		return fmt.Errorf("%s: %w", path, ErrNotFound)
	}
	return err
}

// Kind tells whether path is a group, a dataset or missing.
func (f *File) Kind(path string) (h5.Kind, error) { return f.h.Kind(path) }

// stringAttr is the string attribute name of path ("" if it has none), read as attrs does.
func (f *File) stringAttr(path, name string) (string, error) {
	attrs, err := f.attrs(path)
	if err != nil {
		return "", err
	}
	for _, a := range attrs {
		if a.Name != name {
			continue
		}
		s, isString := a.Value.(string)
		if !isString {
			return "", fmt.Errorf("%s: attribute %s is %T, not a string", path, name, a.Value)
		}
		return s, nil
	}
	return "", nil
}
