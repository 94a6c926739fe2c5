package fsnode

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

// Managing versions in read-write mounts, as a snapshot directory: mv renames a version
// (versionsNode.Rename), rmdir deletes one on mounts with -o allow_delete (delete.go).
// Everything inside a version is immutable (immutable.go). Moving current is current.go's.

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
	if err := history.Rename(n.m.commit, name, newName); err != nil {
		en := errno(err)
		slog.Warn("version not renamed"+stageAdvice(err), "version", name, "to", newName, "errno", en, "err", err)
		return en
	}
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

// stageAdvice is what a mount's user does about a history edit that stages are in the way
// of (stagedir.ErrInUse), as the log line's tail; "" for any other error.
func stageAdvice(err error) string {
	if !errors.Is(err, stagedir.ErrInUse) {
		return ""
	}
	return ": stages are based on the file's versions; commit each stage (mv MNT/stage/NAME MNT/versions/) or discard it (rm -r MNT/stage/NAME) first"
}
