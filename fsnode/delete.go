package fsnode

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/vh5fs/vh5fs/history"
)

// Deleting a version through the mount: rmdir MNT/versions/NAME on a read-write mount with
// -o allow_delete, as rmdir .zfs/snapshot/NAME destroys a ZFS snapshot: the version goes
// although its directory has entries. Ordinary tools never get there by accident: rm -r,
// mv out of the mount and rm -rf * first unlink the version's files, which answer EROFS,
// and then leave the directory alone.

var _ fs.NodeRmdirer = (*versionsNode)(nil)

// Rmdir of versions/NAME deletes the version as versioned-hdf5's delete_versions does
// (package lifecycle), returning once durable: its children's prev_version and, if it
// was current, current_version go to its nearest kept ancestor. The chunks no kept
// version uses are dropped by the mount's Reclaimer (reclaim.go) once the deletions
// pause, all in one compaction; a mount without one drops them in the deletion's own
// sync. Without -o allow_delete it answers EPERM and logs how to delete a version.
// Refused (EBUSY) while files are open for writing or stages are saved: both record
// raw_data slots, which a deletion moves.
func (n *versionsNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.m.commit == nil {
		return n.frozenDir.Rmdir(ctx, name)
	}
	if !n.m.delete {
		slog.Warn("refused: "+deleteAdvice, "op", "rmdir", "path", "versions/"+name)
		return syscall.EPERM
	}
	start := time.Now()
	plan, err := history.Delete(n.m.commit, []string{name}, history.DeleteOptions{Pending: n.m.reclaim != nil})
	if err != nil {
		en := errno(err)
		slog.Warn("version not deleted"+stageAdvice(err), "version", name, "errno", en, "err", err)
		return en
	}
	if n.m.reclaim != nil {
		n.m.reclaim.Deleted()
		slog.Info("version deleted", "version", name, "current", plan.NewCurrent, "reclaim_pending", strings.Join(plan.Pending, ","), "elapsed", time.Since(start))
		return 0
	}
	slog.Info("version deleted", "version", name, "current", plan.NewCurrent, "chunks_moved", plan.Moves(), "bytes_freed", plan.FreedBytes, "elapsed", time.Since(start))
	return 0
}
