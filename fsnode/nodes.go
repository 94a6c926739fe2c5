package fsnode

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/decoded"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
)

// mount is what every node of one mount shares.
type mount struct {
	file    *versions.File
	commit  *commit.Committer // nil for read-only mounts
	stages  *stage.Manager    // stage/ (read-write mounts of versioned files)
	live    bool              // -o live: follow a SWMR writer and other processes' commits (timeouts.go)
	delete  bool              // -o allow_delete: rmdir of a version deletes it (delete.go)
	reclaim *Reclaimer        // compacts what deletions leave (reclaim.go); nil: each deletion compacts
	mtime   time.Time         // the HDF5 file's mtime, for nodes without a version timestamp
	umask   uint32            // -o umask=: permission bits cleared from every mode but symlinks'

	cache         *decoded.Cache // -o cache: decoded copies of versions' datasets (dataset.go); nil: none
	noPassthrough bool           // -o nopassthrough: cache entries are read through vh5fs
	servedOnce    sync.Once      // logs that the kernel does not serve cache entries itself
	// server is the mount's FUSE server, set once Mount has it (nil in the package's tests):
	// what the first hot open asks whether the kernel takes backing files.
	server      atomic.Pointer[fuse.Server]
	backingMu   sync.Mutex // a leaf
	backingSeen bool       // the kernel was asked; GUARDED_BY(backingMu)
	backingOK   bool       // and took the probe; GUARDED_BY(backingMu)

	linksMu sync.Mutex        // a leaf
	links   map[string]string // links made in the root, by name: the version each names (current.go)
}

// ino derives a stable inode number from a node kind and HDF5 path. 1 is the root.
func ino(kind, path string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(path))
	if v := h.Sum64(); v > 1 {
		return v
	}
	return 2
}

// Names. An HDF5 link name is any non-empty byte string without "/" (libhdf5 also
// refuses to create "."), of any length; a file name is at most 255 bytes and the
// kernel gives "." and ".." their own meaning. Links whose names cannot be file names
// (longer than maxName, ".", "..") are left out of every listing and never looked up:
// the kernel refuses such names before they reach vh5fs (ENAMETOOLONG; "." and ".."
// it resolves itself), and a lookup that arrives anyway answers ENAMETOOLONG or ENOENT.
// Everything else (spaces, newlines, backslashes, leading dots, any UTF-8 or none) is
// served byte for byte as stored.

// maxName is the longest file name the kernel accepts (NAME_MAX), in bytes.
const maxName = 255

// servable reports whether an HDF5 link name can be served as a file name.
func servable(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= maxName && !strings.ContainsAny(name, "/\x00")
}

// badName answers a lookup of a name that servable refuses.
func badName(name string) syscall.Errno {
	if len(name) > maxName {
		return syscall.ENAMETOOLONG
	}
	return syscall.ENOENT
}

// Permissions. Only the mounting user gets in unless the mount has allow_other, which
// brings default_permissions (mountopts.Config.KernelOptions): the kernel then checks the
// modes below against the owner, the mounting user or -o uid=/gid= (fs.Options.UID/GID
// in mount.go). Directories are 0555 and files 0444; in read-write mounts the root is
// 0755 (it takes user.vh5fs.next_version, and setting a user.* xattr needs write
// permission) and the writable dataset files are 0644 (datasetNode.fill); -o umask=
// clears bits from all of these (perm). Symlinks are 0777, as always.

// perm clears the mount's umask from permission bits.
func (m *mount) perm(bits uint32) uint32 { return bits &^ m.umask }

// dirAttr fills the attributes every directory of the tree has.
func (m *mount) dirAttr(a *fuse.Attr, mtime time.Time) {
	a.Mode = fuse.S_IFDIR | m.perm(0o555)
	a.Nlink = 2
	setTime(a, mtime)
}

func setTime(a *fuse.Attr, t time.Time) {
	a.SetTimes(&t, &t, &t)
}

// rootNode is the mount's root directory.
type rootNode struct {
	fs.Inode
	frozenDir
	m *mount
}

var _ fs.NodeLookuper = (*rootNode)(nil)

func (n *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !servable(name) {
		return nil, badName(name)
	}
	defer n.m.enter()()
	if in, ok := n.lookupLink(ctx, name, out); ok {
		return in, 0
	}
	if n.m.file.Versioned() {
		switch name {
		case "versions":
			n.m.dirAttr(&out.Attr, n.m.mtime)
			out.SetEntryTimeout(n.m.mutable())
			out.SetAttrTimeout(n.m.mutable())
			return n.NewInode(ctx, &versionsNode{m: n.m, frozenDir: frozenDir{n.m, versions.VersionsGroup}}, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino("versions", "")}), 0
		case "current":
			cur, err := currentVersion(n.m)
			if err != nil {
				return nil, errno(err)
			}
			if !servable(cur) {
				return nil, syscall.ENOENT
			}
			linkAttr(&out.Attr, n.m, currentTarget(cur))
			out.SetEntryTimeout(n.m.mutable())
			out.SetAttrTimeout(n.m.mutable())
			return n.NewInode(ctx, &currentNode{m: n.m}, fs.StableAttr{Mode: fuse.S_IFLNK, Ino: ino("current", "")}), 0
		case tagsDir:
			n.m.dirAttr(&out.Attr, n.m.mtime)
			out.SetEntryTimeout(n.m.mutable())
			out.SetAttrTimeout(n.m.mutable())
			return n.NewInode(ctx, &tagsNode{frozenDir: frozenDir{n.m, tagsDir}}, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino(tagsDir, "")}), 0
		case branchesDir:
			n.m.dirAttr(&out.Attr, n.m.mtime)
			out.SetEntryTimeout(n.m.mutable())
			out.SetAttrTimeout(n.m.mutable())
			return n.NewInode(ctx, &branchesNode{frozenDir: frozenDir{n.m, branchesDir}}, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino(branchesDir, "")}), 0
		case atDir:
			n.m.dirAttr(&out.Attr, n.m.mtime)
			out.SetEntryTimeout(n.m.mutable())
			out.SetAttrTimeout(n.m.mutable())
			return n.NewInode(ctx, &atNode{frozenDir: frozenDir{n.m, atDir}}, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino(atDir, "")}), 0
		case "stage":
			if n.m.stages != nil {
				n.m.dirAttr(&out.Attr, n.m.mtime)
				out.SetEntryTimeout(n.m.mutable())
				out.SetAttrTimeout(n.m.mutable())
				return n.NewInode(ctx, &stagesNode{m: n.m, frozenDir: frozenDir{n.m, "stage"}}, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino("stages", "")}), 0
			}
		}
	}
	return lookupChild(ctx, &n.Inode, n.m, "/", name, nil, out)
}

var _ fs.NodeReaddirer = (*rootNode)(nil)

func (n *rootNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer n.m.enter()()
	var list []fuse.DirEntry
	if n.m.file.Versioned() {
		list = append(list, fuse.DirEntry{Name: "versions", Mode: fuse.S_IFDIR, Ino: ino("versions", "")})
		// A current_version that cannot be read is listed: looking it up answers the error,
		// and the rest of the root stays readable.
		if cur, err := n.m.file.CurrentVersion(); err != nil || servable(cur) {
			list = append(list, fuse.DirEntry{Name: "current", Mode: fuse.S_IFLNK, Ino: ino("current", "")})
		}
		list = append(list, fuse.DirEntry{Name: atDir, Mode: fuse.S_IFDIR, Ino: ino(atDir, "")},
			fuse.DirEntry{Name: tagsDir, Mode: fuse.S_IFDIR, Ino: ino(tagsDir, "")},
			fuse.DirEntry{Name: branchesDir, Mode: fuse.S_IFDIR, Ino: ino(branchesDir, "")})
		if n.m.stages != nil {
			list = append(list, fuse.DirEntry{Name: "stage", Mode: fuse.S_IFDIR, Ino: ino("stages", "")})
		}
	}
	plain, errn := listGroup(n.m, "/", "")
	if errn != 0 {
		return nil, errn
	}
	for _, e := range plain {
		if n.m.file.Versioned() && (e.Name == "versions" || e.Name == "current" || e.Name == atDir || e.Name == tagsDir || e.Name == branchesDir || (e.Name == "stage" && n.m.stages != nil)) {
			continue
		}
		list = append(list, e)
	}
	return fs.NewListDirStream(list), 0
}

var _ fs.NodeGetattrer = (*rootNode)(nil)

func (n *rootNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.dirAttr(&out.Attr, n.m.mtime)
	if n.m.commit != nil {
		out.Mode |= n.m.perm(0o200) // the owner sets user.vh5fs.next_version here
	}
	out.SetTimeout(n.m.mutable())
	return 0
}

func currentTarget(version string) string { return "versions/" + version }

// currentVersion is the version "current" points at ("" when there is none yet), read
// with its committed flag from one state of the file (versions.File.Current), so that a
// commit or a rename under way is never half seen. A current_version naming no committed
// version is an error: the link would dangle.
func currentVersion(m *mount) (string, error) {
	cur, committed, err := m.file.Current()
	if err != nil {
		return "", fmt.Errorf("current_version: %w", err)
	}
	if cur != "" && !committed {
		return "", fmt.Errorf("%s: current_version %q is not a committed version", m.file.Path(), cur)
	}
	return cur, nil
}

// currentNode is the "current" symlink, or a link made in the root to move it (link:
// its name there, which points at the version it was made with until it is renamed over
// current, see current.go).
type currentNode struct {
	fs.Inode
	m    *mount
	link string
}

// version is the version the link points at.
func (n *currentNode) version() (string, error) {
	if v, ok := n.m.pendingLink(n.link); ok {
		return v, nil
	}
	return currentVersion(n.m)
}

var _ fs.NodeReadlinker = (*currentNode)(nil)

func (n *currentNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	defer n.m.enter()()
	cur, err := n.version()
	if err != nil {
		return nil, errno(err)
	}
	if !servable(cur) {
		return nil, syscall.ENOENT
	}
	return []byte(currentTarget(cur)), 0
}

var _ fs.NodeGetattrer = (*currentNode)(nil)

func (n *currentNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	defer n.m.enter()()
	cur, err := n.version()
	if err != nil {
		return errno(err)
	}
	linkAttr(&out.Attr, n.m, currentTarget(cur))
	out.SetTimeout(n.m.mutable())
	return 0
}

// versionsNode is the versions/ directory.
type versionsNode struct {
	fs.Inode
	frozenDir
	m *mount
}

var _ fs.NodeLookuper = (*versionsNode)(nil)

func (n *versionsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !servable(name) {
		return nil, badName(name)
	}
	defer n.m.enter()()
	v, ok, err := n.m.file.Version(name)
	if err != nil {
		return nil, errno(err)
	}
	if !ok {
		return nil, syscall.ENOENT
	}
	n.m.dirAttr(&out.Attr, v.Time())
	// A version's content never changes, but in a live mount another process may delete
	// or rename it: there the kernel asks again at every path walk.
	out.SetEntryTimeout(ImmutableTimeout)
	if n.m.live {
		out.SetEntryTimeout(liveTimeout)
	}
	out.SetAttrTimeout(ImmutableTimeout)
	child := &groupNode{m: n.m, frozenDir: frozenDir{n.m, v.Path()}, path: v.Path(), version: v.Name, immutable: true, mtime: v.Time()}
	return n.NewInode(ctx, child, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino("group", v.Path()), Gen: versionGen(true, v.Time())}), 0
}

var _ fs.NodeReaddirer = (*versionsNode)(nil)

func (n *versionsNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer n.m.enter()()
	vs, err := n.m.file.Versions()
	if err != nil {
		return nil, errno(err)
	}
	list := make([]fuse.DirEntry, 0, len(vs))
	for _, v := range vs {
		if servable(v.Name) {
			list = append(list, fuse.DirEntry{Name: v.Name, Mode: fuse.S_IFDIR, Ino: ino("group", v.Path())})
		}
	}
	return fs.NewListDirStream(list), 0
}

var _ fs.NodeGetattrer = (*versionsNode)(nil)

func (n *versionsNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.dirAttr(&out.Attr, n.m.mtime)
	out.SetTimeout(n.m.mutable())
	return 0
}

// groupNode is an HDF5 group: a version's root group, a group inside a version, or a
// group of the plain tree.
type groupNode struct {
	fs.Inode
	frozenDir
	m         *mount
	path      string
	version   string    // set on a version's root group
	immutable bool      // inside a committed version
	branch    string    // reached through branches/NAME/ (branches.go)
	mtime     time.Time // the version's timestamp, or the file's mtime
}

var _ fs.NodeLookuper = (*groupNode)(nil)

func (n *groupNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !servable(name) {
		return nil, badName(name)
	}
	defer n.m.enter()()
	in, errn := lookupChild(ctx, &n.Inode, n.m, n.path, name, n, out)
	return in, n.m.staleOr(n.path, n.immutable, errn)
}

var _ fs.NodeReaddirer = (*groupNode)(nil)

func (n *groupNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	defer n.m.enter()()
	list, errn := listGroup(n.m, n.path, n.branch)
	if errn != 0 {
		return nil, n.m.staleOr(n.path, n.immutable, errn)
	}
	return fs.NewListDirStream(list), 0
}

var _ fs.NodeGetattrer = (*groupNode)(nil)

func (n *groupNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.dirAttr(&out.Attr, n.mtime)
	out.SetTimeout(n.m.timeoutFor(n.immutable))
	return 0
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// listGroup lists the HDF5 group at path, reached through branch (if not "").
func listGroup(m *mount, path, branch string) ([]fuse.DirEntry, syscall.Errno) {
	entries, err := listDir(m, path)
	if err != nil {
		return nil, errno(err)
	}
	list := make([]fuse.DirEntry, 0, len(entries))
	for _, e := range entries {
		if !servable(e.Name) {
			continue
		}
		child := joinPath(path, e.Name)
		if e.IsGroup {
			list = append(list, fuse.DirEntry{Name: e.Name, Mode: fuse.S_IFDIR, Ino: ino(branchKind(branch)+"group", child)})
		} else {
			list = append(list, fuse.DirEntry{Name: e.Name, Mode: fuse.S_IFREG, Ino: ino(branchKind(branch)+"dataset", child)})
		}
	}
	return list, 0
}

// listDir lists the HDF5 group at dir. A group gone meanwhile (its version renamed or
// deleted) is ESTALE, never ENOENT: the kernel keeps an ENOENT lookup as a negative entry
// in the old directory, whose entry a rename moves to the new name, so the version's
// files would be missing under its new name too; ESTALE has the kernel walk again.
func listDir(m *mount, dir string) ([]versions.Entry, error) {
	entries, err := m.file.List(dir)
	if errors.Is(err, versions.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", syscall.ESTALE, err)
	}
	return entries, err
}

// lookupChild finds name in the HDF5 group at dir. parent carries the version's
// immutability and time down the tree (nil at the root of the plain tree).
func lookupChild(ctx context.Context, in *fs.Inode, m *mount, dir, name string, parent *groupNode, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if dir == "/" && "/"+name == versions.DataRoot {
		return nil, syscall.ENOENT
	}
	immutable, mtime, branch := false, m.mtime, ""
	if parent != nil {
		immutable, mtime, branch = parent.immutable, parent.mtime, parent.branch
	}
	path := joinPath(dir, name)
	entries, err := listDir(m, dir)
	if err != nil {
		return nil, errno(err)
	}
	for _, e := range entries {
		if e.Name != name {
			continue
		}
		out.SetEntryTimeout(m.timeoutFor(immutable))
		kind := branchKind(branch)
		if branch != "" {
			out.SetEntryTimeout(0) // the branch moves: each path walk looks its head up again
		}
		out.SetAttrTimeout(m.timeoutFor(immutable))
		if e.IsGroup {
			m.dirAttr(&out.Attr, mtime)
			child := &groupNode{m: m, frozenDir: frozenDir{m, path}, path: path, immutable: immutable, branch: branch, mtime: mtime}
			return in.NewInode(ctx, child, fs.StableAttr{Mode: fuse.S_IFDIR, Ino: ino(kind+"group", path), Gen: versionGen(immutable, mtime)}), 0
		}
		child := &datasetNode{m: m, path: path, immutable: immutable, branch: branch, mtime: mtime}
		if errn := child.fill(&out.Attr, nil); errn != 0 {
			return nil, errn
		}
		out.SetAttrTimeout(child.attrTimeout())
		return in.NewInode(ctx, child, fs.StableAttr{Mode: fuse.S_IFREG, Ino: ino(kind+"dataset", path), Gen: versionGen(immutable, mtime)}), 0
	}
	return nil, syscall.ENOENT
}

// branchKind prefixes the inode kinds of nodes reached through branch: nodes of their
// own, not those of versions/HEAD/, as go-fuse keeps one node per inode number and these
// commit on the branch.
func branchKind(branch string) string {
	if branch == "" {
		return ""
	}
	return "branch " + branch + " "
}

// versionGen is the generation of a node inside a version: its timestamp. A version
// deleted or renamed and another committed under its name have the same paths, so the
// same inode numbers, but not the same nodes: the kernel never serves one's cached pages
// for the other.
func versionGen(immutable bool, mtime time.Time) uint64 {
	if !immutable {
		return 0
	}
	return uint64(mtime.UnixNano())
}

func fileMtime(path string) time.Time {
	if st, err := os.Stat(path); err == nil {
		return st.ModTime()
	}
	return time.Time{}
}
