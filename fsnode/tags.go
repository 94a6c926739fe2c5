package fsnode

import (
	"context"
	"log/slog"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/named"
)

// Tags as links: tags/NAME links to ../versions/VERSION, the version tag NAME holds (package
// named). On read-write mounts `ln -s versions/VERSION MNT/tags/NAME` tags a version and
// `rm MNT/tags/NAME` deletes the tag, each durable when it returns (history.Tag, Untag); a
// taken name is EEXIST, as a tag never moves. A tag whose version another program deleted
// links to "(dangling) VERSION of TIMESTAMP", which leads nowhere: never to a later version
// of the same name. Nothing else in tags/ changes.

// tagsDir is the name of the directory in the root.
const tagsDir = "tags"

type tagsNode struct {
	fs.Inode
	frozenDir
}

// tagTarget is where tag name's link points now ("" and ENOENT if there is no such tag).
func tagTarget(m *mount, name string) (string, syscall.Errno) {
	r, err := named.Read(m.file.HDF5())
	if err != nil {
		return "", errno(err)
	}
	t, ok := r.Tags[name]
	if !ok {
		return "", syscall.ENOENT
	}
	if _, live, err := t.In(m.file.Version); err != nil {
		return "", errno(err)
	} else if !live || !servable(t.Version) {
		return "(dangling) " + t.Version + " of " + t.Timestamp, 0
	}
	return "../" + currentTarget(t.Version), 0
}

func (n *tagsNode) newLink(ctx context.Context, name, target string, out *fuse.EntryOut) *fs.Inode {
	linkAttr(&out.Attr, n.fm, target)
	out.SetEntryTimeout(n.fm.mutable())
	out.SetAttrTimeout(n.fm.mutable())
	return n.NewInode(ctx, &tagLink{m: n.fm, name: name}, fs.StableAttr{Mode: fuse.S_IFLNK, Ino: ino(tagsDir, name)})
}

var _ = (fs.NodeLookuper)((*tagsNode)(nil))

func (n *tagsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.fm.enter()()
	target, errn := tagTarget(n.fm, name)
	if errn != 0 {
		return nil, errn
	}
	return n.newLink(ctx, name, target, out), 0
}

var _ = (fs.NodeReaddirer)((*tagsNode)(nil))

func (n *tagsNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer n.fm.enter()()
	r, err := named.Read(n.fm.file.HDF5())
	if err != nil {
		return nil, errno(err)
	}
	var list []fuse.DirEntry
	for _, name := range named.Names(r.Tags) {
		list = append(list, fuse.DirEntry{Name: name, Mode: fuse.S_IFLNK, Ino: ino(tagsDir, name)})
	}
	return fs.NewListDirStream(list), 0
}

var _ = (fs.NodeSymlinker)((*tagsNode)(nil))

// Symlink tags the version target names: versions/VERSION, ../versions/VERSION or
// ./versions/VERSION.
func (n *tagsNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fm.commit == nil {
		return n.frozenDir.Symlink(ctx, target, name, out)
	}
	version, ok := linkVersion(strings.TrimPrefix(target, "../"))
	if !ok {
		slog.Warn("refused: a tag links to a version: ln -s versions/VERSION MNT/tags/NAME", "op", "symlink", "path", tagsDir+"/"+name, "target", target)
		return nil, syscall.EINVAL
	}
	if errn := nameEdit(history.Tag(n.fm.commit, name, version), "version tagged", "version not tagged", "tag", name, "version", version); errn != 0 {
		return nil, errn
	}
	target, errn := tagTarget(n.fm, name)
	if errn != 0 {
		return nil, errn
	}
	return n.newLink(ctx, name, target, out), 0
}

var _ = (fs.NodeUnlinker)((*tagsNode)(nil))

// Unlink deletes the tag.
func (n *tagsNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.fm.commit == nil {
		return n.frozenDir.Unlink(ctx, name)
	}
	return nameEdit(history.Untag(n.fm.commit, name), "tag deleted", "tag not deleted", "tag", name)
}

// nameEdit answers a change of the file's names (package named) made through the mount,
// and logs it: done on success, failed with the errno and the error otherwise.
func nameEdit(err error, done, failed string, args ...any) syscall.Errno {
	if err != nil {
		en := errno(err)
		slog.Warn(failed, append(args, "errno", en, "err", err)...)
		return en
	}
	slog.Info(done, args...)
	return 0
}

// tagLink is tags/NAME.
type tagLink struct {
	fs.Inode
	m    *mount
	name string
}

var _ = (fs.NodeReadlinker)((*tagLink)(nil))

func (l *tagLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	defer l.m.enter()()
	target, errn := tagTarget(l.m, l.name)
	return []byte(target), errn
}

var _ = (fs.NodeGetattrer)((*tagLink)(nil))

func (l *tagLink) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer l.m.enter()()
	target, errn := tagTarget(l.m, l.name)
	if errn != 0 {
		return errn
	}
	linkAttr(&out.Attr, l.m, target)
	out.SetTimeout(l.m.mutable())
	return 0
}
