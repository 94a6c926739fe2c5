package fsnode

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// probeBacking registers fd as a backing file and unregisters it at once: whether the
// kernel takes this mount's backing files (it needs CAP_SYS_ADMIN in the initial user
// namespace, and Linux 6.9 or later).
func probeBacking(srv *fuse.Server, fd int) syscall.Errno {
	id, errno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fd)})
	if errno != 0 {
		return errno
	}
	return srv.UnregisterBackingFd(id)
}
