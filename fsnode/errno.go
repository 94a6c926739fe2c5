package fsnode

import (
	"errors"
	"log/slog"
	"os"
	"syscall"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/xattrs"
)

// errnos are the engines' sentinel errors and the errno each is answered with.
var errnos = []struct {
	err error
	en  syscall.Errno
}{
	{versions.ErrNotFound, syscall.ENOENT},
	{os.ErrNotExist, syscall.ENOENT},
	{versions.ErrUnsupported, syscall.EOPNOTSUPP},
	{xattrs.ErrMissing, syscall.ENODATA},
	{commit.ErrExists, syscall.EEXIST},
	{commit.ErrBusy, syscall.EBUSY},
	{commit.ErrFirst, syscall.EPERM},
	{commit.ErrName, syscall.EINVAL},
	{lifecycle.ErrNoVersion, syscall.ENOENT},
	{lifecycle.ErrFirstVersion, syscall.EPERM},
	{stage.ErrNotExist, syscall.ENOENT},
	{stage.ErrExist, syscall.EEXIST},
	{stage.ErrInvalid, syscall.EINVAL},
	{stage.ErrNotEmpty, syscall.ENOTEMPTY},
	{stage.ErrNotDir, syscall.ENOTDIR},
	{stage.ErrIsDir, syscall.EISDIR},
	{stage.ErrBusy, syscall.EBUSY},
	{stage.ErrStale, syscall.ESTALE},
	{stage.ErrNoAttr, syscall.ENODATA},
	{stagedir.ErrInUse, syscall.EBUSY},
	{named.ErrHeld, syscall.EBUSY},
	{named.ErrExists, syscall.EEXIST},
	{named.ErrVersionName, syscall.EEXIST},
	{named.ErrNotFound, syscall.ENOENT},
	{named.ErrName, syscall.EINVAL},
}

// errno is the one place errors become errno values, for every node. An error carrying a
// syscall.Errno (the kernel's, or one writefile wraps) keeps it; an engine's sentinel
// error gets its errno from errnos. Anything else is logged with its full message (HDF5's
// error stack included) and answered with EIO.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	for _, e := range errnos {
		if errors.Is(err, e.err) {
			if e.err == versions.ErrUnsupported {
				slog.Warn("unsupported", "err", err)
			}
			return e.en
		}
	}
	slog.Error("request failed", "err", err)
	return syscall.EIO
}
