package fsnode

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/internal/timearg"
	"github.com/vh5fs/vh5fs/versions"
)

// Time as a directory: at/TIME is a symlink to the version current at TIME
// (versioned-hdf5's rule, versions.File.VersionAt), TIME in any form --at takes (`vh5fs
// help time`), e.g. at/2026-12-01T12:00Z/. A time names no file until it is looked up, so
// at/ lists nothing; TIME before the first version, or no time at all, is ENOENT. Like
// current, a link is resolved again at each readlink: a commit stamped before a future TIME
// moves it. Nothing in at/ changes (the tree's shape, immutable.go).

// atDir is the name of the directory in the root.
const atDir = "at"

type atNode struct {
	fs.Inode
	frozenDir
}

var _ = (fs.NodeLookuper)((*atNode)(nil))

func (n *atNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.fm.enter()()
	t, err := timearg.Parse(name)
	if err != nil {
		return nil, syscall.ENOENT
	}
	l := &atLink{m: n.fm, t: t}
	target, errn := l.target()
	if errn != 0 {
		return nil, errn
	}
	linkAttr(&out.Attr, n.fm, target)
	out.SetEntryTimeout(n.fm.mutable())
	out.SetAttrTimeout(n.fm.mutable())
	return n.NewInode(ctx, l, fs.StableAttr{Mode: fuse.S_IFLNK, Ino: ino(atDir, versions.CanonicalTimestamp(t))}), 0
}

var _ = (fs.NodeReaddirer)((*atNode)(nil))

func (n *atNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return fs.NewListDirStream(nil), 0
}

// atLink is at/TIME.
type atLink struct {
	fs.Inode
	m *mount
	t time.Time
}

// target is where the link points now: ../versions/NAME.
func (l *atLink) target() (string, syscall.Errno) {
	v, ok, err := l.m.file.VersionAt(l.t)
	if err != nil {
		return "", errno(err)
	}
	if !ok || !servable(v.Name) {
		return "", syscall.ENOENT
	}
	return "../" + currentTarget(v.Name), 0
}

var _ = (fs.NodeReadlinker)((*atLink)(nil))

func (l *atLink) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	defer l.m.enter()()
	target, errn := l.target()
	return []byte(target), errn
}

var _ = (fs.NodeGetattrer)((*atLink)(nil))

func (l *atLink) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer l.m.enter()()
	target, errn := l.target()
	if errn != 0 {
		return errn
	}
	linkAttr(&out.Attr, l.m, target)
	out.SetTimeout(l.m.mutable())
	return 0
}
