//go:build !linux

package fsnode

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// probeBacking: FUSE passthrough is Linux's.
func probeBacking(srv *fuse.Server, fd int) syscall.Errno { return syscall.ENOTSUP }
