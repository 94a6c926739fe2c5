// Package compact rewrites a versioned-hdf5 file without the space no object uses any
// more. HDF5 never returns freed space to the file system (a versioned-hdf5 file keeps the
// bytes of deleted versions' chunks and rewritten metadata), so a file only grows; compact
// copies every object into a new file beside it, the raw_data chunks as stored (never
// decoded, a few MiB at a time), fsyncs it and renames it over the old one (or to another
// path). The rename is the commit point: a crash before it leaves the old file as it was.
//
// Chunks keep their raw_data slots, so versions, hash tables, virtual datasets and the
// stages kept beside the file read as before. The unused chunks that deletions through a
// mount leave pending (lifecycle.Pending) would survive the copy in their slots, so they
// are reclaimed first (lifecycle.Reclaim, in the file itself, through its journal): unless
// a stage is saved beside the file, whose slots the reclaim would move, as a mount defers
// it.
//
// The rename gives the path a new inode, which no one holding the old one sees: a
// compaction in place is refused while another process has the file open (the caller
// names them, Options.InUse), a file with several hard links is refused (only one name
// would get the new file), and a symbolic link is followed (its target is replaced, the
// link stays). Another path is written only if it is new, or with Options.Force.
package compact

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/durable"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

// Progress is told, as the copy goes, the raw_data chunk positions done of the total.
type Progress func(done, total int64)

// Options are a compaction's destination and checks.
type Options struct {
	// Out is where the copy goes: "" (or a name of the file itself) compacts in place.
	Out string
	// Force lets the copy replace an existing Out.
	Force bool
	// InUse, when set, returns an error naming the other processes that have path, the
	// file about to be replaced, open, or nil if none has: they would go on with the old
	// file. It is asked before the copy, and again just before the rename.
	InUse func(path string) error
	// Progress, when set, is told how the raw_data copy goes.
	Progress Progress
	// ReclaimProgress, when set, is told how the reclaim of a pending set goes.
	ReclaimProgress lifecycle.Progress
}

// Result is what a compaction did.
type Result struct {
	Before, After int64 // file sizes in bytes
	Chunks        int64 // bytes of raw_data chunks copied, as stored
	Lists         int   // virtual datasets whose mapping lists were copied as stored
	// Kept is set when a compaction in place was dropped because its copy was no smaller
	// than the file (HDF5's own free space can outweigh what a small file loses): the file
	// is left as it was, and After is the size the copy had.
	Kept bool
	// Out is the file written (or kept): a symbolic link given for the file or for
	// Options.Out resolved to its target.
	Out string
	// Reclaimed is the reclaim of the set deletions left pending, done in the file before
	// the copy (Before is the size before it); nil if none ran.
	Reclaimed *lifecycle.Plan
	// StillPending are the data groups left pending because of the stages saved beside
	// the file (Stages), which record raw_data slots a reclaim would move.
	StillPending, Stages []string
}

// ErrNotVersioned is returned for an HDF5 file without versioned-hdf5's layout.
var ErrNotVersioned = errors.New("not a versioned-hdf5 file (no " + versions.DataRoot + "): compact rewrites versioned-hdf5 " +
	"files only (h5repack rewrites any HDF5 file)")

// File compacts the versioned-hdf5 file at path as o says. The file is opened read-only,
// which HDF5's file locking refuses while a writer has it open (a read-write mount, h5py in
// "a" mode) and which keeps writers out until the copy is done. A file replaced (path
// itself, or an existing Out) is then locked exclusively for its rename, checked unchanged
// since the copy began, and asked of o.InUse once more.
func File(path string, o Options) (Result, error) {
	t, err := resolve(path, o.Out, o.Force)
	if err != nil {
		return Result{}, err
	}
	if t.replaced != nil && o.InUse != nil {
		if err := o.InUse(t.out); err != nil {
			return Result{}, err
		}
	}
	before := t.st.Size()
	if err := versions.CheckFileFormat(t.file); err != nil {
		return Result{}, err
	}
	src, err := h5.OpenSource(t.file)
	if err != nil {
		// The journal driver's open fails without libhdf5's reason (a truncated file's
		// sizes, say); the plain open gives it.
		var he *h5.Error
		if errors.As(err, &he) {
			if f, err2 := h5.Open(t.file); err2 != nil {
				err = err2
			} else {
				f.Close()
			}
		}
		return Result{}, err
	}
	defer func() { src.Close() }()
	switch k, err := src.Kind(versions.DataRoot); {
	case err != nil:
		return Result{}, err
	case k != h5.KindGroup:
		return Result{}, fmt.Errorf("%s: %w", path, ErrNotVersioned)
	}
	pending, err := lifecycle.Pending(t.file)
	if err != nil {
		return Result{}, err
	}
	var rec Result
	if len(pending) > 0 {
		// The source's shared lock would stand in the way of the read-write open; the
		// open above refused a file with an interrupted change, which OpenRW would recover.
		src.Close()
		if rec, err = t.reclaim(pending, o); err != nil {
			return Result{}, err
		}
		if src, err = h5.OpenSource(t.file); err != nil {
			return Result{}, err
		}
	}
	tmp := tmpName(t.out)
	res, err := copyFile(src, tmp, o.Progress)
	if err != nil {
		err = spaceFailure(tmp, err)
		os.Remove(tmp)
		return Result{}, err
	}
	src.Close() // its shared lock would stand in the way of the exclusive one
	res.Before, res.Out = before, t.out
	res.Reclaimed, res.StillPending, res.Stages = rec.Reclaimed, rec.StillPending, rec.Stages
	if t.inPlace {
		if st, err := os.Stat(tmp); err == nil && st.Size() >= t.st.Size() {
			res.After, res.Kept = st.Size(), true
			return res, os.Remove(tmp)
		}
	}
	if err := t.publish(tmp, o.InUse); err != nil {
		os.Remove(tmp)
		return Result{}, err
	}
	if st, err := os.Stat(t.out); err == nil {
		res.After = st.Size()
	}
	return res, nil
}

// reclaim completes the reclaim of the data groups deletions left pending, in t.file
// itself, which therefore must be the caller's alone (o.InUse, asked already when the
// file is compacted in place): the copy keeps slots, and would keep their unused chunks.
// A stage saved beside the file records raw_data slots, which the reclaim moves: the set
// then stays pending (Result.StillPending), as a mount leaves it.
func (t *target) reclaim(pending []string, o Options) (Result, error) {
	var in *stagedir.InUseError
	if err := stagedir.Check(t.file, stagedir.Reclaim(nil)); errors.As(err, &in) {
		return Result{StillPending: pending, Stages: in.Names()}, nil
	} else if err != nil {
		return Result{}, err
	}
	if !t.inPlace && o.InUse != nil {
		if err := o.InUse(t.file); err != nil {
			return Result{}, fmt.Errorf("reclaiming the chunks of deleted versions first: %w", err)
		}
	}
	f, err := versions.OpenRW(t.file)
	if err != nil {
		return Result{}, fmt.Errorf("reclaiming the chunks of deleted versions first: %w", err)
	}
	p, err := lifecycle.ReclaimProgress(f, o.ReclaimProgress)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Result{}, fmt.Errorf("reclaiming the chunks of deleted versions first: %w; nothing compacted", err)
	}
	// The reclaim wrote the file: what the rename checks unchanged is the file it left.
	st, err := os.Stat(t.file)
	if err != nil {
		return Result{}, err
	}
	t.st = st
	if t.inPlace {
		t.replaced = st
	}
	return Result{Reclaimed: p}, nil
}

// lowSpace is free space below which a failed copy is taken for a full filesystem: more
// than any one write of the copy (a chunk, a few MiB of them).
const lowSpace = 64 << 20

// spaceFailure tells a copy that failed for want of space from one that failed reading
// the file: libhdf5's error stack says no more than "file write failed". Called before
// tmp is removed, while it still takes the space it took.
func spaceFailure(tmp string, err error) error {
	var fs unix.Statfs_t
	if unix.Statfs(filepath.Dir(tmp), &fs) != nil || fs.Bavail*uint64(fs.Bsize) >= lowSpace {
		return err
	}
	return fmt.Errorf("writing the compacted copy %s: its filesystem is full (%d KiB left), nothing changed: "+
		"make room, or write the copy elsewhere (-o OUT); libhdf5 said: %v", tmp, fs.Bavail*uint64(fs.Bsize)>>10, err)
}

// copyFile copies every object of src into a new file at tmp, fsynced.
func copyFile(src *h5.File, tmp string, progress Progress) (Result, error) {
	raws, total, err := rawData(src)
	if err != nil {
		return Result{}, err
	}
	c, err := src.CopyTo(tmp)
	if err != nil {
		return Result{}, err
	}
	w := &walker{src: src, c: c, raws: raws, total: total, progress: progress}
	if err := w.tree("/"); err != nil {
		c.Close()
		return Result{}, err
	}
	if err := c.Close(); err != nil {
		return Result{}, err
	}
	if err := durable.Sync(tmp); err != nil {
		return Result{}, err
	}
	return Result{Chunks: w.bytes, Lists: w.lists}, nil
}

// rawData finds the raw_data datasets and their chunk positions in all.
func rawData(src *h5.File) (map[string]bool, int64, error) {
	raws := map[string]bool{}
	var total int64
	var walk func(dir string) error
	walk = func(dir string) error {
		members, err := src.Members(dir)
		if err != nil {
			return err
		}
		for _, m := range members {
			p := join(dir, m.Name)
			switch {
			case m.Kind == h5.KindGroup && p != versions.VersionsGroup:
				if err := walk(p); err != nil {
					return err
				}
			case m.Kind == h5.KindDataset && m.Name == versions.RawData:
				d, err := src.OpenDataset(p)
				if err != nil {
					return err
				}
				info := d.Info()
				d.Close()
				// Variable-length elements are stored as references to heap objects
				// elsewhere in the file: those chunks are copied by libhdf5 (H5Ocopy),
				// which copies what they reference.
				if info.Layout != h5.Chunked || info.Type.VlenString || !info.Type.Raw {
					continue
				}
				n := int64(1)
				for i, s := range info.Shape {
					n *= (s + info.Chunks[i] - 1) / info.Chunks[i]
				}
				raws[p] = true
				total += n
			}
		}
		return nil
	}
	if k, err := src.Kind(versions.DataRoot); err != nil || k != h5.KindGroup {
		return raws, 0, err
	}
	return raws, total, walk(versions.DataRoot)
}

type walker struct {
	src      *h5.File
	c        *h5.Copy
	raws     map[string]bool
	total    int64
	done     int64 // chunk positions of the raw_data copied before the current one
	bytes    int64
	lists    int
	progress Progress
}

// tree copies the group at dir: itself, then each member. Groups on the way to a raw_data
// and in the versions group are made one by one, and the virtual datasets of versions
// copied with their mapping lists as stored where they can (h5.Copy.Virtual); everything
// else is copied whole (H5Ocopy).
func (w *walker) tree(dir string) error {
	if err := w.c.Group(dir); err != nil {
		return err
	}
	list := w.src.Members
	if inVersions(dir) {
		list = w.src.MembersUnread // the virtual datasets' headers unread (h5.Copy.Virtual)
	}
	members, err := list(dir)
	if err != nil {
		return err
	}
	for _, m := range members {
		p := join(dir, m.Name)
		switch {
		case m.Kind == h5.KindGroup && (w.holdsRawData(p) || inVersions(p)):
			err = w.tree(p)
		case w.raws[p]:
			err = w.chunks(p)
		case m.Kind == h5.KindDataset && inVersions(p):
			err = w.virtual(p)
		case m.Kind == h5.KindGroup, m.Kind == h5.KindDataset:
			err = w.c.Object(p)
		case m.Kind == h5.KindBroken:
			err = fmt.Errorf("%s: the object this link names cannot be read", p)
		default:
			err = w.c.Link(p)
			if errors.Is(err, h5.ErrLinkKind) {
				err = fmt.Errorf("%s: external and user-defined links are not copied: %w", p, err)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// virtual copies a dataset of a version: with its mapping list as stored if it can.
func (w *walker) virtual(path string) error {
	ok, err := w.c.Virtual(path)
	if ok {
		w.lists++
	}
	if err != nil || ok {
		return err
	}
	return w.c.Object(path)
}

func inVersions(p string) bool {
	return p == versions.VersionsGroup || strings.HasPrefix(p, versions.VersionsGroup+"/")
}

func (w *walker) holdsRawData(dir string) bool {
	for p := range w.raws {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

func (w *walker) chunks(path string) error {
	var last, lastBytes int64
	err := w.c.Chunks(path, func(done, _, bytes int64) {
		last, lastBytes = done, bytes
		if w.progress != nil {
			w.progress(w.done+done, w.total)
		}
	})
	w.done += last
	w.bytes += lastBytes
	return err
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
