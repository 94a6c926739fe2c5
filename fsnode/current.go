package fsnode

import (
	"context"
	"log/slog"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/xattrs"
)

// Moving "current" (read-write mounts of versioned files) sets current_version, as
// versioned-hdf5's setter does, two ways:
//
//   - setfattr -n user.vh5fs.current -v VERSION MNT
//   - ln -sfn versions/VERSION MNT/current: ln makes the new link under a name of its
//     own, then renames it over current. The root holds such a link, pointing at a
//     version, until it is renamed over current (which moves current_version) or removed.
//
// Any other link in the root is refused, as in the rest of the tree.

// XattrCurrent, set on the mount's root in read-write mounts, moves current_version.
const XattrCurrent = xattrs.Prefix + "current"

// setCurrent moves current_version to version and logs it.
func (m *mount) setCurrent(version string) syscall.Errno {
	was, _ := m.file.CurrentVersion()
	if err := history.Revert(m.commit, version); err != nil {
		slog.Warn("current version not moved", "version", version, "err", err)
		return errno(err)
	}
	slog.Info("current version moved", "version", version, "was", was)
	return 0
}

// linkVersion is the version a link's target names: "versions/NAME" (or "./versions/NAME").
func linkVersion(target string) (string, bool) {
	v, ok := strings.CutPrefix(strings.TrimPrefix(target, "./"), "versions/")
	v = strings.TrimSuffix(v, "/")
	return v, ok && v != "" && !strings.Contains(v, "/")
}

// pendingLink returns the version a link made in the root under name points at.
func (m *mount) pendingLink(name string) (string, bool) {
	m.linksMu.Lock()
	defer m.linksMu.Unlock()
	v, ok := m.links[name]
	return v, ok
}

var _ fs.NodeSymlinker = (*rootNode)(nil)

// Symlink makes a link to a version in the root, for a rename over current (ln -sfn).
func (n *rootNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	version, ok := linkVersion(target)
	if n.m.commit == nil || !n.m.file.Versioned() || !ok {
		return n.frozenDir.Symlink(ctx, target, name, out)
	}
	if name == "current" || name == "versions" || name == "stage" {
		return nil, syscall.EEXIST
	}
	if k, err := n.m.file.Kind("/" + name); err != nil {
		return nil, errno(err)
	} else if k != h5.KindMissing {
		return nil, syscall.EEXIST
	}
	if _, ok, err := n.m.file.Version(version); err != nil {
		return nil, errno(err)
	} else if !ok && version != versions.FirstVersion {
		slog.Warn("refused: a link in the root must name a committed version, to be renamed over current", "target", target)
		return nil, syscall.ENOENT
	}
	n.m.linksMu.Lock()
	if _, taken := n.m.links[name]; taken {
		n.m.linksMu.Unlock()
		return nil, syscall.EEXIST
	}
	n.m.links[name] = version
	n.m.linksMu.Unlock()
	linkAttr(&out.Attr, n.m, currentTarget(version))
	return n.NewInode(ctx, &currentNode{m: n.m, link: name}, fs.StableAttr{Mode: fuse.S_IFLNK, Ino: ino("link", name)}), 0
}

var _ fs.NodeRenamer = (*rootNode)(nil)

// Rename of a link made by Symlink over current moves current_version to its version.
func (n *rootNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	version, ok := n.m.pendingLink(name)
	if !ok {
		return n.frozenDir.Rename(ctx, name, newParent, newName, flags)
	}
	if newParent.EmbeddedInode() != &n.Inode || newName != "current" || flags&fs.RENAME_EXCHANGE != 0 {
		slog.Warn("refused: a link to a version made in the root is only renamed over current (ln -sfn versions/VERSION MNT/current)", "link", name, "to", newName)
		return syscall.EPERM
	}
	if errn := n.m.setCurrent(version); errn != 0 {
		return errn
	}
	n.m.linksMu.Lock()
	delete(n.m.links, name) // the link is current now: it follows current_version
	n.m.linksMu.Unlock()
	return 0
}

var _ fs.NodeUnlinker = (*rootNode)(nil)

// Unlink removes a link made by Symlink that was not renamed over current.
func (n *rootNode) Unlink(ctx context.Context, name string) syscall.Errno {
	n.m.linksMu.Lock()
	_, ok := n.m.links[name]
	delete(n.m.links, name)
	n.m.linksMu.Unlock()
	if !ok {
		return n.frozenDir.Unlink(ctx, name)
	}
	return 0
}

// lookupLink answers the lookup of a link made by Symlink.
func (n *rootNode) lookupLink(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, bool) {
	version, ok := n.m.pendingLink(name)
	if !ok {
		return nil, false
	}
	linkAttr(&out.Attr, n.m, currentTarget(version))
	return n.NewInode(ctx, &currentNode{m: n.m, link: name}, fs.StableAttr{Mode: fuse.S_IFLNK, Ino: ino("link", name)}), true
}

// linkAttr fills a symlink's attributes.
func linkAttr(a *fuse.Attr, m *mount, target string) {
	a.Mode = fuse.S_IFLNK | 0o777
	a.Size = uint64(len(target))
	setTime(a, m.mtime)
}
