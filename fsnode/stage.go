package fsnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/xattrs"
)

// Stage trees (package stage) in read-write mounts: stage/ lists the stages; mkdir makes
// one on the current version, rmdir of an emptied one discards it, and renaming one into
// versions/ commits it as one version. Inside a stage every name is served from the
// stage's state, with entry and attribute timeouts of 0: the tree changes under the
// kernel (a rename into versions/ turns a stage into a version), so it asks each time.
//
// XattrBase on a stage's root shows and sets (rebases an unchanged stage) its base;
// XattrBranch sets a branch instead: an unchanged stage is rebased on the branch's head
// and commits on the branch (stage.Stage.SetBranch), and the root shows it;
// XattrCreate on a file created in a stage describes the new dataset.
const (
	XattrBase   = xattrs.Prefix + "base"
	XattrBranch = xattrs.Prefix + "branch"
	XattrCreate = xattrs.Prefix + "create"
)

// stageErr logs a refused or failed stage operation and answers its errno.
func stageErr(op, path string, err error) syscall.Errno {
	en := errno(err)
	if en != syscall.EIO {
		slog.Warn("stage: refused", "op", op, "path", path, "errno", en, "err", err)
	}
	return en
}

// stagesNode is stage/. It holds stages only: what it does not implement below (links,
// files, chmod) frozenDir refuses with a log line.
type stagesNode struct {
	fs.Inode
	frozenDir
	m *mount
}

func stageIno(st *stage.Stage, kind, p string) uint64 {
	return ino(kind, fmt.Sprintf("%d/%s", st.ID(), p))
}

var _ fs.NodeGetattrer = (*stagesNode)(nil)

func (n *stagesNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.dirAttr(&out.Attr, n.m.mtime)
	out.Mode |= n.m.perm(0o200)
	return 0
}

var _ fs.NodeLookuper = (*stagesNode)(nil)

func (n *stagesNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	st := n.m.stages.Get(name)
	if st == nil {
		return nil, syscall.ENOENT
	}
	return n.stageRoot(ctx, st, out), 0
}

func (n *stagesNode) stageRoot(ctx context.Context, st *stage.Stage, out *fuse.EntryOut) *fs.Inode {
	child := &stageDirNode{stageNode: stageNode{m: n.m, st: st}}
	child.attr(&out.Attr)
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	return n.NewInode(ctx, child, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: stageIno(st, "stagedir", "")})
}

var _ fs.NodeReaddirer = (*stagesNode)(nil)

func (n *stagesNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	var list []fuse.DirEntry
	for _, name := range n.m.stages.Names() {
		if st := n.m.stages.Get(name); st != nil {
			list = append(list, fuse.DirEntry{Name: name, Mode: fuse.S_IFDIR, Ino: stageIno(st, "stagedir", "")})
		}
	}
	return fs.NewListDirStream(list), 0
}

var _ fs.NodeMkdirer = (*stagesNode)(nil)

// Mkdir makes a stage on the current version.
func (n *stagesNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	// A stage records raw_data slots until it is committed or discarded, and a reclaim,
	// which moves them, waits for it: reclaim what deletions left first. Before the stage
	// manager's lock, which a reclaim's run takes (lock order, docs/ARCHITECTURE.md).
	n.m.reclaim.Flush()
	st, err := n.m.stages.Create(name)
	if err != nil {
		return nil, stageErr("mkdir", "stage/"+name, err)
	}
	slog.Info("stage created", "stage", name, "base", st.Base())
	return n.stageRoot(ctx, st, out), 0
}

var _ fs.NodeRmdirer = (*stagesNode)(nil)

// Rmdir discards a stage that rm -r emptied.
func (n *stagesNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if err := n.m.stages.Remove(name); err != nil {
		return stageErr("rmdir", "stage/"+name, err)
	}
	slog.Info("stage discarded", "stage", name)
	return 0
}

var _ fs.NodeRenamer = (*stagesNode)(nil)

// Rename of a stage into versions/ commits it as one version named newName, returning
// once the version is durable; anything else is refused.
func (n *stagesNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	vn, ok := newParent.(*versionsNode)
	// mv asks for RENAME_NOREPLACE, which a commit keeps: a taken name is EEXIST.
	if !ok || flags&^unix.RENAME_NOREPLACE != 0 {
		slog.Warn("stage: refused: a stage is committed by renaming it into versions/", "stage", name, "to", newName)
		return syscall.EPERM
	}
	res, err := n.m.stages.Commit(name, newName)
	if err != nil {
		en := errno(err)
		slog.Error("stage: commit failed; the stage is kept", "stage", name, "version", newName, "errno", en, "err", err)
		return en
	}
	logged := []any{"stage", name, "version", res.Name, "base", res.Base}
	if res.Branch != "" {
		logged = append(logged, "branch", res.Branch)
	}
	slog.Info("stage committed", logged...)
	// The kernel moves the stage's dentry to versions/newName: have it look the version
	// up instead (asynchronously: it may hold locks on our behalf now).
	go func() {
		vn.NotifyEntry(newName)
		n.NotifyEntry(name)
	}()
	return 0
}

// stageNode is what every node inside a stage holds.
type stageNode struct {
	m     *mount
	st    *stage.Stage
	path  string // inside the stage; "" is its root
	mtime atomic.Int64
}

func (n *stageNode) time() time.Time {
	if t := n.mtime.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return n.m.mtime
}

// where is p, a path inside the stage, as the user names it: stage/NAME/p.
func (n *stageNode) where(p string) string {
	if p == "" {
		return "stage/" + n.st.Name()
	}
	return "stage/" + n.st.Name() + "/" + p
}

func (n *stageNode) child(name string) string {
	if n.path == "" {
		return name
	}
	return n.path + "/" + name
}

// lookup makes the node of p, a group or a dataset of the stage.
func (n *stageNode) lookup(ctx context.Context, parent *fs.Inode, p string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	k, err := n.st.Kind(p)
	if err != nil {
		return nil, errno(err)
	}
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	switch k {
	case h5.KindGroup:
		child := &stageDirNode{stageNode: stageNode{m: n.m, st: n.st, path: p}}
		child.attr(&out.Attr)
		return parent.NewInode(ctx, child, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: stageIno(n.st, "stagedir", p)}), 0
	case h5.KindDataset:
		child := &stageFileNode{stageNode: stageNode{m: n.m, st: n.st, path: p}}
		if errn := child.attr(&out.Attr); errn != 0 {
			return nil, errn
		}
		return parent.NewInode(ctx, child, fs.StableAttr{Mode: fuse.S_IFREG, Ino: stageIno(n.st, "stagefile", p)}), 0
	}
	return nil, syscall.ENOENT
}

// stageDirNode is a group of a stage (its root too).
type stageDirNode struct {
	fs.Inode
	stageNode
}

func (n *stageDirNode) attr(a *fuse.Attr) {
	n.m.dirAttr(a, n.time())
	a.Mode |= n.m.perm(0o200)
}

var _ fs.NodeGetattrer = (*stageDirNode)(nil)

func (n *stageDirNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.attr(&out.Attr)
	return 0
}

var _ fs.NodeSetattrer = (*stageDirNode)(nil)

// Setattr takes times (kept while mounted, not committed); modes and owners are fixed.
func (n *stageDirNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errn := n.setTimes(in); errn != 0 {
		return errn
	}
	n.attr(&out.Attr)
	return 0
}

// setTimes records a change of times; anything else (mode, owner, size) is refused.
func (n *stageNode) setTimes(in *fuse.SetAttrIn) syscall.Errno {
	_, mode := in.GetMode()
	_, uid := in.GetUID()
	_, gid := in.GetGID()
	if mode || uid || gid {
		slog.Warn("stage: refused: modes and owners are fixed", "op", "setattr", "path", n.where(n.path))
		return syscall.EPERM
	}
	if t, ok := in.GetMTime(); ok {
		n.mtime.Store(t.UnixNano())
	}
	return 0
}

var _ fs.NodeLookuper = (*stageDirNode)(nil)

func (n *stageDirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !servable(name) {
		return nil, badName(name)
	}
	return n.lookup(ctx, &n.Inode, n.child(name), out)
}

var _ fs.NodeReaddirer = (*stageDirNode)(nil)

func (n *stageDirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ents, err := n.st.List(n.path)
	if err != nil {
		return nil, errno(err)
	}
	list := make([]fuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		if !servable(e.Name) {
			continue
		}
		if e.IsGroup {
			list = append(list, fuse.DirEntry{Name: e.Name, Mode: fuse.S_IFDIR, Ino: stageIno(n.st, "stagedir", n.child(e.Name))})
		} else {
			list = append(list, fuse.DirEntry{Name: e.Name, Mode: fuse.S_IFREG, Ino: stageIno(n.st, "stagefile", n.child(e.Name))})
		}
	}
	return fs.NewListDirStream(list), 0
}

var _ fs.NodeMkdirer = (*stageDirNode)(nil)

// Mkdir creates a group.
func (n *stageDirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	if err := n.st.Mkdir(p); err != nil {
		return nil, stageErr("mkdir", n.where(p), err)
	}
	return n.lookup(ctx, &n.Inode, p, out)
}

var _ fs.NodeRmdirer = (*stageDirNode)(nil)

// Rmdir removes an empty group.
func (n *stageDirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	p := n.child(name)
	if err := n.st.Rmdir(p); err != nil {
		return stageErr("rmdir", n.where(p), err)
	}
	return 0
}

var _ fs.NodeUnlinker = (*stageDirNode)(nil)

// Unlink deletes a dataset.
func (n *stageDirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	p := n.child(name)
	if err := n.st.Unlink(p); err != nil {
		return stageErr("unlink", n.where(p), err)
	}
	return 0
}

var _ fs.NodeCreater = (*stageDirNode)(nil)

// Create makes a new dataset (a 1-D dataset of bytes until user.vh5fs.create says more).
func (n *stageDirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p := n.child(name)
	d, err := n.st.Create(p)
	if err != nil {
		return nil, nil, 0, stageErr("create", n.where(p), err)
	}
	in, errn := n.lookup(ctx, &n.Inode, p, out)
	if errn != 0 {
		return nil, nil, 0, errn
	}
	return in, &stageHandle{st: n.st, d: d}, fuse.FOPEN_DIRECT_IO, 0
}

var _ fs.NodeMknoder = (*stageDirNode)(nil)

// Mknod makes a new dataset, as Create; other kinds of file are refused.
func (n *stageDirNode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := n.child(name)
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		slog.Warn("stage: refused: only regular files (datasets) and directories (groups)", "op", "mknod", "path", n.where(p))
		return nil, syscall.EPERM
	}
	if _, err := n.st.Create(p); err != nil {
		return nil, stageErr("mknod", n.where(p), err)
	}
	return n.lookup(ctx, &n.Inode, p, out)
}

var (
	_ fs.NodeRenamer   = (*stageDirNode)(nil)
	_ fs.NodeSymlinker = (*stageDirNode)(nil)
	_ fs.NodeLinker    = (*stageDirNode)(nil)
)

// Rename inside a stage is refused: versioned-hdf5 has no renames (a new path is a new
// data group), and a copy says so more honestly.
func (n *stageDirNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	slog.Warn("stage: refused: datasets and groups cannot be renamed; copy and delete instead", "op", "rename", "path", n.where(n.child(name)))
	return syscall.EPERM
}

func (n *stageDirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	slog.Warn("stage: refused: no links in a stage", "op", "symlink", "path", n.where(n.child(name)))
	return nil, syscall.EPERM
}

func (n *stageDirNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	slog.Warn("stage: refused: no links in a stage", "op", "link", "path", n.where(n.child(name)))
	return nil, syscall.EPERM
}

// Attributes of a stage's groups and datasets: user.hdf5.NAME in the JSON form getfattr
// shows; the stage's root also has user.vh5fs.base.

// hdf5Attrs adds the object's HDF5 attributes to x.
func (n *stageNode) hdf5Attrs(x *xattrs.Set) error {
	attrs, err := n.st.Attrs(n.path)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		x.Add(xattrs.HDF5Prefix+a.Name, a.JSON)
	}
	return nil
}

func (n *stageDirNode) xattrs() (*xattrs.Set, error) {
	var x xattrs.Set
	if n.path == "" {
		x.Add(XattrBase, []byte(n.st.Base()))
		if b := n.st.Branch(); b != "" {
			x.Add(XattrBranch, []byte(b))
		}
	}
	return &x, n.hdf5Attrs(&x)
}

var _ fs.NodeGetxattrer = (*stageDirNode)(nil)

func (n *stageDirNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(n, attr, dest)
}

var _ fs.NodeListxattrer = (*stageDirNode)(nil)

func (n *stageDirNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(n, dest)
}

var _ fs.NodeSetxattrer = (*stageDirNode)(nil)

func (n *stageDirNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if (attr == XattrBase || attr == XattrBranch) && n.path == "" {
		set := n.st.SetBase
		if attr == XattrBranch {
			set = n.st.SetBranch
		}
		if err := set(string(data)); err != nil {
			return stageErr("setfattr "+attr, n.where(n.path), err)
		}
		return 0
	}
	return n.setHDF5Attr(attr, data)
}

// setHDF5Attr sets user.hdf5.NAME; other names are refused.
func (n *stageNode) setHDF5Attr(attr string, data []byte) syscall.Errno {
	name, ok := strings.CutPrefix(attr, xattrs.HDF5Prefix)
	if !ok {
		slog.Warn("stage: refused: settable attributes are user.hdf5.NAME (and user.vh5fs.create, user.vh5fs.shape on datasets, user.vh5fs.base and user.vh5fs.branch on a stage)",
			"op", "setfattr", "name", attr, "path", n.where(n.path))
		return syscall.EPERM
	}
	if err := n.st.SetAttr(n.path, name, data); err != nil {
		return stageErr("setfattr "+attr, n.where(n.path), err)
	}
	return 0
}

var _ fs.NodeRemovexattrer = (*stageDirNode)(nil)

func (n *stageDirNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.removeHDF5Attr(attr)
}

func (n *stageNode) removeHDF5Attr(attr string) syscall.Errno {
	name, ok := strings.CutPrefix(attr, xattrs.HDF5Prefix)
	if !ok {
		return syscall.EPERM
	}
	if err := n.st.RemoveAttr(n.path, name); err != nil {
		return stageErr("setfattr -x "+attr, n.where(n.path), err)
	}
	return 0
}

// stageFileNode is a dataset of a stage.
type stageFileNode struct {
	fileNode
	stageNode
}

// dataset is the stage's shared state of the file (opened on first use). A dataset of
// the base that takes no writes (one vh5fs reads through libhdf5 alone) has none: base
// serves it.
func (n *stageFileNode) dataset() (d *stage.Dataset, base *versions.Dataset, err error) {
	d, err = n.st.Open(n.path)
	if errors.Is(err, versions.ErrUnsupported) {
		base, err = n.st.BaseDataset(n.path)
		return nil, base, err
	}
	return d, nil, err
}

func (n *stageFileNode) attr(a *fuse.Attr) syscall.Errno {
	if d := n.st.Peek(n.path); d != nil {
		n.m.fileAttr(a, d.Size(), true, n.time())
		return 0
	}
	base, err := n.st.BaseDataset(n.path)
	if err != nil {
		return errno(err)
	}
	n.m.fileAttr(a, base.Size(), base.Stageable() || base.TextWritable(), n.time())
	return 0
}

var _ fs.NodeGetattrer = (*stageFileNode)(nil)

func (n *stageFileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	return n.attr(&out.Attr)
}

var _ fs.NodeOpener = (*stageFileNode)(nil)

// Open: every handle of the file shares the stage's dataset, read and written through
// vh5fs (FOPEN_DIRECT_IO), so each sees every write made in the stage.
func (n *stageFileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	d, base, err := n.dataset()
	if err != nil {
		return nil, 0, errno(err)
	}
	if d == nil {
		if opensForWriting(flags) {
			return nil, 0, syscall.EACCES
		}
		return &baseHandle{base: base}, fuse.FOPEN_DIRECT_IO, 0
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := d.Truncate(0); err != nil {
			return nil, 0, stageErr("open O_TRUNC", n.where(n.path), err)
		}
	}
	return &stageHandle{st: n.st, d: d}, fuse.FOPEN_DIRECT_IO, 0
}

// stageHandle is an open file of a stage: its dataset, which every open shares.
type stageHandle struct {
	st *stage.Stage
	d  *stage.Dataset
}

var _ fileHandle = (*stageHandle)(nil)

func (h *stageHandle) read(dest []byte, off int64) (int, error) { return h.d.ReadAt(dest, off) }

func (h *stageHandle) write(data []byte, off int64) error {
	_, err := h.d.WriteAt(data, off)
	return err
}

// flush and release: a stage's data is committed by the stage's commit, not by a close.
func (h *stageHandle) flush() syscall.Errno { return 0 }
func (h *stageHandle) release()             {}

// fsync saves the dataset's staged data to the stage's files on disk (it does not
// commit: renaming the stage into versions/ does).
func (h *stageHandle) fsync() syscall.Errno {
	if err := h.st.Sync(h.d); err != nil {
		en := errno(err)
		slog.Error("stage: saving the dataset failed", "stage", h.st.Name(), "dataset", h.d.Path(), "errno", en, "err", err)
		return en
	}
	return 0
}

func (h *stageHandle) logArgs() []any { return []any{"stage", h.st.Name(), "dataset", h.d.Path()} }

// baseHandle is an open file of a stage that takes no writes: the base's dataset.
type baseHandle struct{ base *versions.Dataset }

func (h *baseHandle) read(dest []byte, off int64) (int, error) { return h.base.ReadAt(dest, off) }

var _ fs.NodeReader = (*stageFileNode)(nil)

func (n *stageFileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(reader) // a stageHandle or a baseHandle
	if !ok {
		return nil, syscall.EBADF
	}
	r, err := readFrom(h, dest, off)
	if err != nil {
		en := errno(err)
		slog.Error("read failed", "stage", n.st.Name(), "dataset", n.path, "off", off, "errno", en, "err", err)
		return nil, en
	}
	return r, 0
}

var _ fs.NodeSetattrer = (*stageFileNode)(nil)

// Setattr: truncate resizes axis 0 (whole rows); times are kept while mounted.
func (n *stageFileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errn := n.setTimes(in); errn != 0 {
		return errn
	}
	if size, ok := in.GetSize(); ok {
		d, _, err := n.dataset()
		if err != nil {
			return errno(err)
		}
		if d == nil {
			return syscall.EACCES
		}
		if err := d.Truncate(int64(size)); err != nil {
			return stageErr("truncate", n.where(n.path), err)
		}
	}
	return n.attr(&out.Attr)
}

// Attributes of a stage's dataset: what the base's shows, with the stage's shape and
// attributes; settable: user.hdf5.NAME, user.vh5fs.create (a created dataset, before its
// first write), user.vh5fs.shape (resize, not committed).

func (n *stageFileNode) xattrs() (*xattrs.Set, error) {
	var x xattrs.Set
	var base *versions.Dataset // a dataset of the base: what it shows besides the shape
	d := n.st.Peek(n.path)
	if d != nil && d.Created() {
		spec := d.Spec()
		fill := any(0)
		if len(spec.FillValue) > 0 {
			fill = spec.FillValue
		}
		x.Add(xattrs.DType, []byte(spec.DType))
		for _, a := range []struct {
			name string
			v    any
		}{{XattrCreate, spec}, {xattrs.Chunks, spec.Chunks}, {xattrs.FillValue, fill}} {
			if err := x.AddJSON(a.name, a.v); err != nil {
				return nil, err
			}
		}
	} else {
		var err error
		if base, err = n.st.BaseDataset(n.path); err != nil {
			return nil, err
		}
		bx, err := xattrs.Dataset(base)
		if err != nil {
			return nil, err
		}
		for _, name := range []string{xattrs.DType, xattrs.Chunks, xattrs.FillValue, xattrs.Filters} {
			if v, err := bx.Get(name); err == nil {
				x.Add(name, v)
			}
		}
	}
	var shape []int64
	if d != nil {
		shape = d.Shape()
	} else {
		shape = base.Shape
	}
	if err := x.AddJSON(xattrs.Shape, shape); err != nil {
		return nil, err
	}
	return &x, n.hdf5Attrs(&x)
}

var _ fs.NodeGetxattrer = (*stageFileNode)(nil)

func (n *stageFileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(n, attr, dest)
}

var _ fs.NodeListxattrer = (*stageFileNode)(nil)

func (n *stageFileNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(n, dest)
}

var _ fs.NodeSetxattrer = (*stageFileNode)(nil)

func (n *stageFileNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	switch attr {
	case XattrCreate:
		if err := n.st.SetSpec(n.path, data); err != nil {
			return stageErr("setfattr "+attr, n.where(n.path), err)
		}
		return 0
	case xattrs.Shape:
		shape, err := parseShape(data)
		if err != nil {
			return stageErr("setfattr "+attr, n.where(n.path), err)
		}
		d, _, err := n.dataset()
		if err == nil && d == nil {
			err = syscall.EACCES
		}
		if err == nil {
			err = d.Reshape(shape)
		}
		if err != nil {
			return stageErr("setfattr "+attr, n.where(n.path), err)
		}
		return 0
	}
	return n.setHDF5Attr(attr, data)
}

var _ fs.NodeRemovexattrer = (*stageFileNode)(nil)

func (n *stageFileNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.removeHDF5Attr(attr)
}
