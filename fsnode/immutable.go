package fsnode

import (
	"context"
	"log/slog"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Changes to the tree. Versions are immutable and the plain tree is read-only, so every
// call that would change names, links, modes or owners is refused with the errno that says
// why: EROFS in read-only mounts, and in read-write mounts EPERM (the tree's shape is
// fixed; a dataset changes only by writing its bytes, which makes a new version) or, for a
// new file, EROFS. Each refusal in a read-write mount is logged, so that the user of a
// background mount can find why. (go-fuse answers 0 for an unlink or rmdir a node does not
// implement: without these, `rm` would report success and change nothing.)

// refuse is the answer to a change of the tree: op names it in the log.
func (m *mount) refuse(op, path string) syscall.Errno {
	if m.commit == nil {
		return syscall.EROFS
	}
	slog.Warn("refused: versions and the plain tree cannot be changed this way; write a dataset's bytes to make a new version",
		"op", op, "path", path)
	return syscall.EPERM
}

// frozenDir, embedded in every directory node kind, refuses every change to the
// directory's entries and attributes.
type frozenDir struct {
	fm   *mount
	path string // the directory's HDF5 path, for the log
}

func (d *frozenDir) refuse(op, name string) syscall.Errno {
	return d.fm.refuse(op, joinPath(d.path, name))
}

var (
	_ fs.NodeUnlinker  = (*frozenDir)(nil)
	_ fs.NodeRmdirer   = (*frozenDir)(nil)
	_ fs.NodeRenamer   = (*frozenDir)(nil)
	_ fs.NodeMkdirer   = (*frozenDir)(nil)
	_ fs.NodeCreater   = (*frozenDir)(nil)
	_ fs.NodeSymlinker = (*frozenDir)(nil)
	_ fs.NodeLinker    = (*frozenDir)(nil)
	_ fs.NodeMknoder   = (*frozenDir)(nil)
	_ fs.NodeSetattrer = (*frozenDir)(nil)
)

func (d *frozenDir) Unlink(ctx context.Context, name string) syscall.Errno {
	return d.refuse("unlink", name)
}

func (d *frozenDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	return d.refuse("rmdir", name)
}

func (d *frozenDir) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return d.refuse("rename", name)
}

func (d *frozenDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuse("mkdir", name)
}

// Create answers EROFS, the file system's own word for "no new files here".
func (d *frozenDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if d.fm.commit != nil {
		slog.Warn("refused: no new files in versions or the plain tree; write an existing dataset's bytes to make a new version",
			"op", "create", "path", joinPath(d.path, name))
	}
	return nil, nil, 0, syscall.EROFS
}

func (d *frozenDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuse("symlink", name)
}

func (d *frozenDir) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuse("link", name)
}

func (d *frozenDir) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuse("mknod", name)
}

// Setattr refuses chmod, chown and touch of a directory.
func (d *frozenDir) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.refuse("setattr", "")
}
