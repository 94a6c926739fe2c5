package fsnode

import (
	"context"
	"log/slog"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
)

// Managing versions in read-write mounts, as a snapshot directory: mv renames a version
// (versionsNode.Rename), rmdir deletes one (versionsNode.Rmdir), and rm -r does as rmdir
// does: the unlinks and rmdirs inside the version that come first take the names out of
// the mount's view of the version only (groupNode.Unlink, Rmdir), the version itself
// changes at the rmdir of its directory. Until then, and after a remount, the file holds
// it whole. Moving current is current.go's.

var _ fs.NodeRmdirer = (*versionsNode)(nil)

// Rmdir of versions/NAME deletes the version as versioned-hdf5's delete_versions does
// (package lifecycle), returning once durable: its children's prev_version and, if it
// was current, current_version go to its nearest kept ancestor, and the chunks no kept
// version uses are dropped. Refused (EBUSY) while files are open for writing or stages
// are saved: both record raw_data slots, which a deletion moves.
func (n *versionsNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.m.commit == nil {
		return n.frozenDir.Rmdir(ctx, name)
	}
	if errn := n.m.busy("deleting a version", ""); errn != 0 {
		return errn
	}
	var plan *lifecycle.Plan
	err := n.m.commit.Rewrite(func(f *versions.File) (err error) {
		plan, err = lifecycle.Delete(f, []string{name})
		return err
	})
	if err != nil {
		en := errno(err)
		slog.Warn("version not deleted", "version", name, "errno", en, "err", err)
		return en
	}
	n.m.forgetRemoved(name)
	slog.Info("version deleted", "version", name, "current", plan.NewCurrent, "chunks_moved", plan.Moves(), "bytes_freed", plan.FreedBytes)
	return 0
}

var _ fs.NodeRenamer = (*versionsNode)(nil)

// Rename of versions/OLD to versions/NEW renames the version (its group, the
// prev_version of its children, current_version), returning once durable. A version a
// stage or an open write handle is based on is busy (EBUSY); a taken name is EEXIST.
func (n *versionsNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.m.commit == nil {
		return n.frozenDir.Rename(ctx, name, newParent, newName, flags)
	}
	if newParent.EmbeddedInode() != &n.Inode || flags&^unix.RENAME_NOREPLACE != 0 {
		return n.frozenDir.Rename(ctx, name, newParent, newName, flags)
	}
	if errn := n.m.busy("renaming a version", name); errn != 0 {
		return errn
	}
	if err := n.m.commit.RenameVersion(name, newName); err != nil {
		en := errno(err)
		slog.Warn("version not renamed", "version", name, "to", newName, "errno", en, "err", err)
		return en
	}
	n.m.forgetRemoved(name)
	slog.Info("version renamed", "version", name, "to", newName)
	// The kernel moves the version's dentry, whose nodes name the old path: have it look
	// the version up again (asynchronously: it may hold locks on our behalf now).
	go n.NotifyEntry(newName)
	return 0
}

// staleOr answers ESTALE instead of errn for a node of a version that was renamed or
// deleted (errn != 0): the kernel then looks the path up again (LOOKUP_REVAL), which
// finds the version under its new name, or nothing. A node's path names its version,
// and the kernel keeps a version's entries for ImmutableTimeout.
func (m *mount) staleOr(path string, immutable bool, errn syscall.Errno) syscall.Errno {
	if errn == 0 || !immutable {
		return errn
	}
	rest, ok := strings.CutPrefix(path, versions.VersionsGroup+"/")
	if !ok {
		return errn
	}
	version, _, _ := strings.Cut(rest, "/")
	if _, ok, err := m.file.Version(version); err == nil && !ok {
		return syscall.ESTALE
	}
	return errn
}

// busy refuses op on version (every version: "") while a stage is based on it (on any
// version: a deletion moves the raw_data slots stages record), with a log line that names
// the stages.
func (m *mount) busy(op, version string) syscall.Errno {
	saved, err := stage.Saved(m.file.Path())
	if err != nil {
		slog.Error("stages not read", "err", err)
		return syscall.EIO
	}
	var names []string
	for _, s := range saved {
		if version == "" || s.Base == version {
			names = append(names, s.Name)
		}
	}
	if len(names) > 0 {
		slog.Warn("refused: "+op+" while stages are based on the file's versions; commit each stage (mv MNT/stage/NAME MNT/versions/) or discard it (rm -r MNT/stage/NAME) first",
			"version", version, "stages", strings.Join(names, ","))
		return syscall.EBUSY
	}
	return 0
}

// versionOf is the version a path of the versions group lies in ("" if none).
func versionOf(path string) string {
	rest, ok := strings.CutPrefix(path, versions.VersionsGroup+"/")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "/")
	return v
}

// isRemoved reports whether rm took path (or a group above it) out of its version's view.
func (m *mount) isRemoved(path string) bool {
	m.linksMu.Lock()
	defer m.linksMu.Unlock()
	if len(m.removed) == 0 {
		return false
	}
	for p := path; versionOf(p) != ""; p = p[:strings.LastIndexByte(p, '/')] {
		if m.removed[p] {
			return true
		}
	}
	return false
}

// remove takes path out of its version's view, the first step of rm -r of the version.
func (m *mount) remove(path string) {
	m.linksMu.Lock()
	first := true
	v := versions.VersionsGroup + "/" + versionOf(path) + "/"
	for p := range m.removed {
		if strings.HasPrefix(p, v) {
			first = false
			break
		}
	}
	m.removed[path] = true
	m.linksMu.Unlock()
	if first {
		slog.Info("removing a version's files takes them out of this mount's view only; rmdir of the version's directory (rm -r does it) deletes the version",
			"path", mountPath(path))
	}
}

// forgetRemoved drops what rm took out of version's view (the version is deleted or
// renamed).
func (m *mount) forgetRemoved(version string) {
	m.linksMu.Lock()
	defer m.linksMu.Unlock()
	for p := range m.removed {
		if versionOf(p) == version {
			delete(m.removed, p)
		}
	}
}

var (
	_ fs.NodeUnlinker = (*groupNode)(nil)
	_ fs.NodeRmdirer  = (*groupNode)(nil)
)

// Unlink of a dataset in a version, in a read-write mount, is rm -r's first step of
// deleting the version: see the top of this file. Elsewhere it is refused.
func (n *groupNode) Unlink(ctx context.Context, name string) syscall.Errno {
	path := joinPath(n.path, name)
	if n.m.commit == nil || !n.immutable || n.m.stages == nil {
		return n.frozenDir.Unlink(ctx, name)
	}
	if n.m.isRemoved(path) {
		return syscall.ENOENT
	}
	if k, err := n.m.file.Kind(path); err != nil {
		return errno(err)
	} else if k == h5.KindMissing {
		return syscall.ENOENT
	} else if k == h5.KindGroup {
		return syscall.EISDIR
	}
	n.m.remove(path)
	return 0
}

// Rmdir of a group in a version whose members rm took out of view takes it out too.
func (n *groupNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	path := joinPath(n.path, name)
	if n.m.commit == nil || !n.immutable || n.m.stages == nil {
		return n.frozenDir.Rmdir(ctx, name)
	}
	if n.m.isRemoved(path) {
		return syscall.ENOENT
	}
	if k, err := n.m.file.Kind(path); err != nil {
		return errno(err)
	} else if k == h5.KindMissing {
		return syscall.ENOENT
	} else if k != h5.KindGroup {
		return syscall.ENOTDIR
	}
	entries, err := n.m.file.List(path)
	if err != nil {
		return errno(err)
	}
	for _, e := range entries {
		if !n.m.isRemoved(joinPath(path, e.Name)) {
			return syscall.ENOTEMPTY
		}
	}
	n.m.remove(path)
	return 0
}
