// Package compact rewrites an HDF5 file without the space no object uses any more. HDF5
// never returns freed space to the file system (a versioned-hdf5 file keeps the bytes of
// deleted versions' chunks and rewritten metadata), so a file only grows; compact copies
// every object into a new file beside it, the raw_data chunks as stored (never decoded,
// a few MiB at a time), fsyncs it and renames it over the old one (or to another path). The
// rename is the commit point: a crash before it leaves the old file as it was.
//
// Chunks keep their raw_data slots, so versions, hash tables, virtual datasets and the
// stages kept beside the file read as before.
package compact

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vh5fs/vh5fs/h5"
)

// dataRoot is where versioned-hdf5 keeps each dataset's raw_data and hash_table; its
// versions group holds only metadata and virtual datasets.
const (
	dataRoot      = "/_version_data"
	versionsGroup = dataRoot + "/versions"
)

// Progress is told, as the copy goes, the raw_data chunk positions done of the total.
type Progress func(done, total int64)

// Result is what a compaction did.
type Result struct {
	Before, After int64 // file sizes in bytes
	Chunks        int64 // bytes of raw_data chunks copied, as stored
	Lists         int   // virtual datasets whose mapping lists were copied as stored
	// Kept is set when a compaction in place was dropped because its copy was no smaller
	// than the file (HDF5's own free space can outweigh what a small file loses): the file
	// is left as it was, and After is the size the copy had.
	Kept bool
}

// File compacts the HDF5 file at path into out ("" or path: in place; a copy no smaller
// than the file is dropped, see Result.Kept). The file is
// opened read-only, which HDF5's file locking refuses while a writer has it open (a
// read-write mount, h5py in "a" mode) and which keeps writers out until the rename.
func File(path, out string, progress Progress) (Result, error) {
	if out == "" {
		out = path
	}
	st, err := os.Stat(path)
	if err != nil {
		return Result{}, err
	}
	src, err := h5.OpenSource(path)
	if err != nil {
		return Result{}, err
	}
	defer src.Close()
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".vh5fs-compact")
	res, err := copyFile(src, tmp, progress)
	if err != nil {
		os.Remove(tmp)
		return Result{}, err
	}
	res.Before = st.Size()
	if out == path {
		if st2, err := os.Stat(tmp); err == nil && st2.Size() >= res.Before {
			res.After, res.Kept = st2.Size(), true
			return res, os.Remove(tmp)
		}
	}
	if err := publish(tmp, out, st); err != nil {
		os.Remove(tmp)
		return Result{}, err
	}
	if st2, err := os.Stat(out); err == nil {
		res.After = st2.Size()
	}
	return res, nil
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
	if err := syncPath(tmp); err != nil {
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
			case m.Kind == h5.KindGroup && p != versionsGroup:
				if err := walk(p); err != nil {
					return err
				}
			case m.Kind == h5.KindDataset && m.Name == "raw_data":
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
	if k, err := src.Kind(dataRoot); err != nil || k != h5.KindGroup {
		return raws, 0, err
	}
	return raws, total, walk(dataRoot)
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
	return p == versionsGroup || strings.HasPrefix(p, versionsGroup+"/")
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

// publish gives tmp the old file's mode (and owner, where allowed) and renames it to out,
// then fsyncs the directory: the commit point.
func publish(tmp, out string, st os.FileInfo) error {
	if err := os.Chmod(tmp, st.Mode().Perm()); err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(tmp, int(sys.Uid), int(sys.Gid)); err != nil && !errors.Is(err, os.ErrPermission) {
			return err
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	return syncPath(filepath.Dir(out))
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}
