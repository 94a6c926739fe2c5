package fsnode

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/xattrs"
)

// Branches as directories: branches/NAME/ is the tree of branch NAME's head (package
// named), looked up anew at each path walk (entry timeouts of 0), so that a commit on the
// branch shows at the next open. Its files are nodes of their own (branchKind): on
// read-write mounts a write through one commits on the branch (writefile.Open with the
// branch), which moves the branch and leaves current_version alone. There, too, `mkdir
// MNT/branches/NAME` makes a branch at the current version, `setfattr -n user.vh5fs.head
// -v VERSION MNT/branches/NAME` moves it and `rmdir MNT/branches/NAME` deletes it (the
// versions stay), as rmdir of .zfs/snapshot/NAME destroys a snapshot whatever it holds;
// each is durable when it returns (history.Branch, MoveBranch, DeleteBranch). A branch
// whose head another program deleted is not listed and is ENOENT: it is never followed to
// another version (vh5fs branch -l and fsck show it).

// branchesDir is the name of the directory in the root.
const branchesDir = "branches"

// XattrHead on branches/NAME shows the branch's head; setting it moves the branch.
const XattrHead = xattrs.Prefix + "head"

type branchesNode struct {
	fs.Inode
	frozenDir
}

// branchDir answers a lookup of branches/name.
func (n *branchesNode) branchDir(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	b := &branchNode{name: name, frozenDir: frozenDir{n.fm, branchesDir + "/" + name}}
	v, errn := b.head()
	if errn != 0 {
		return nil, errn
	}
	n.fm.dirAttr(&out.Attr, v.Time())
	out.SetEntryTimeout(n.fm.mutable())
	out.SetAttrTimeout(0)
	return n.NewInode(ctx, b, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino(branchesDir, name)}), 0
}

var _ = (fs.NodeLookuper)((*branchesNode)(nil))

func (n *branchesNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	defer n.fm.enter()()
	return n.branchDir(ctx, name, out)
}

var _ = (fs.NodeReaddirer)((*branchesNode)(nil))

func (n *branchesNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer n.fm.enter()()
	r, err := named.Read(n.fm.file.HDF5())
	if err != nil {
		return nil, errno(err)
	}
	// Each branch's head is looked up alone (no list of every version): a file without
	// branches lists nothing without reading its versions.
	var list []fuse.DirEntry
	for _, name := range named.Names(r.Branches) {
		v, err := r.Head(name, n.fm.file.Version)
		if errors.Is(err, versions.ErrNotFound) {
			continue // dangling: not followed
		}
		if err != nil {
			return nil, errno(err)
		}
		if servable(v.Name) {
			list = append(list, fuse.DirEntry{Name: name, Mode: fuse.S_IFDIR, Ino: ino(branchesDir, name)})
		}
	}
	return fs.NewListDirStream(list), 0
}

var _ = (fs.NodeMkdirer)((*branchesNode)(nil))

// Mkdir makes a branch at the current version.
func (n *branchesNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fm.commit == nil {
		return n.frozenDir.Mkdir(ctx, name, mode, out)
	}
	cur, err := currentVersion(n.fm)
	if err == nil && cur == "" {
		err = versions.ErrNotFound
	}
	if err == nil {
		err = history.Branch(n.fm.commit, name, cur)
	}
	if errn := nameEdit(err, "branch made", "branch not made", "branch", name, "version", cur); errn != 0 {
		return nil, errn
	}
	defer n.fm.enter()()
	return n.branchDir(ctx, name, out)
}

var _ = (fs.NodeRmdirer)((*branchesNode)(nil))

// Rmdir deletes the branch; its versions stay.
func (n *branchesNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.fm.commit == nil {
		return n.frozenDir.Rmdir(ctx, name)
	}
	return nameEdit(history.DeleteBranch(n.fm.commit, name), "branch deleted", "branch not deleted", "branch", name)
}

// branchNode is branches/NAME.
type branchNode struct {
	fs.Inode
	frozenDir
	name string
}

// head is the branch's head now: ENOENT for a branch deleted or dangling.
func (n *branchNode) head() (versions.Version, syscall.Errno) {
	v, err := history.BranchHead(n.fm.file, n.name)
	if err != nil {
		return versions.Version{}, errno(err)
	}
	if !servable(v.Name) {
		return versions.Version{}, syscall.ENOENT
	}
	return v, 0
}

var _ = (fs.NodeLookuper)((*branchNode)(nil))

func (n *branchNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !servable(name) {
		return nil, badName(name)
	}
	defer n.fm.enter()()
	v, errn := n.head()
	if errn != 0 {
		return nil, errn
	}
	root := &groupNode{m: n.fm, path: v.Path(), version: v.Name, immutable: true, branch: n.name, mtime: v.Time()}
	return lookupChild(ctx, &n.Inode, n.fm, v.Path(), name, root, out)
}

var _ = (fs.NodeReaddirer)((*branchNode)(nil))

func (n *branchNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer n.fm.enter()()
	v, errn := n.head()
	if errn != 0 {
		return nil, errn
	}
	list, errn := listGroup(n.fm, v.Path(), n.name)
	if errn != 0 {
		return nil, errn
	}
	return fs.NewListDirStream(list), 0
}

var _ = (fs.NodeGetattrer)((*branchNode)(nil))

func (n *branchNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer n.fm.enter()()
	v, errn := n.head()
	if errn != 0 {
		return errn
	}
	n.fm.dirAttr(&out.Attr, v.Time())
	if n.fm.commit != nil {
		out.Mode |= n.fm.perm(0o200) // the owner sets user.vh5fs.head here
	}
	out.SetTimeout(n.fm.mutable())
	return 0
}

func (n *branchNode) xattrs() (*xattrs.Set, error) {
	v, err := history.BranchHead(n.fm.file, n.name)
	if err != nil {
		return nil, err
	}
	var x xattrs.Set
	x.Add(XattrHead, []byte(v.Name))
	return &x, nil
}

var _ = (fs.NodeGetxattrer)((*branchNode)(nil))

func (n *branchNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	defer n.fm.enter()()
	return getxattr(n, attr, dest)
}

var _ = (fs.NodeListxattrer)((*branchNode)(nil))

func (n *branchNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	defer n.fm.enter()()
	return listxattr(n, dest)
}

var _ = (fs.NodeSetxattrer)((*branchNode)(nil))

// Setxattr of user.vh5fs.head moves the branch to the version named.
func (n *branchNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.fm.commit == nil {
		return syscall.EROFS
	}
	if attr != XattrHead {
		slog.Warn("refused: the settable attribute of a branch is "+XattrHead, "op", "setfattr", "name", attr, "path", branchesDir+"/"+n.name)
		return syscall.EPERM
	}
	version := string(data)
	return nameEdit(history.MoveBranch(n.fm.commit, n.name, version), "branch moved", "branch not moved", "branch", n.name, "version", version)
}

var _ = (fs.NodeRemovexattrer)((*branchNode)(nil))

func (n *branchNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.fm.commit == nil {
		return syscall.EROFS
	}
	slog.Warn("refused: a branch always has a head: rmdir MNT/branches/NAME deletes the branch", "op", "removexattr", "name", attr, "path", branchesDir+"/"+n.name)
	return syscall.EPERM
}
