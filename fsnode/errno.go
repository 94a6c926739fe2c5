package fsnode

import (
	"errors"
	"log/slog"
	"os"
	"syscall"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/versions"
)

// errno is the one place engine errors become errno values. Anything unexpected is logged
// with its full message (HDF5's error stack included) and answered with EIO.
func errno(err error) syscall.Errno {
	var en syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &en):
		return en
	case errors.Is(err, versions.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, commit.ErrExists):
		return syscall.EEXIST
	case errors.Is(err, commit.ErrBusy):
		return syscall.EBUSY
	case errors.Is(err, commit.ErrFirst):
		return syscall.EPERM
	case errors.Is(err, commit.ErrName):
		return syscall.EINVAL
	case errors.Is(err, versions.ErrUnsupported):
		slog.Warn("unsupported", "err", err)
		return syscall.EOPNOTSUPP
	}
	slog.Error("request failed", "err", err)
	return syscall.EIO
}
