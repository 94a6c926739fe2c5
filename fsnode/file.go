package fsnode

import (
	"context"
	"log/slog"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Dataset files. A dataset's file in versions/ (datasetNode, dataset.go) and in a stage
// (stageFileNode, stage.go) embed fileNode, which answers Write, Flush, Fsync and Release
// through the handle vh5fs opened, a fileHandle; the two kinds differ in their handles:
//
//	                      versions/: writeHandle            stage: stageHandle
//	staged state          a writefile.Handle per open       the stage's dataset, shared
//	Flush (every close)   commits if written                nothing
//	Fsync                 commits, durable on return        saves the staged data (Sync)
//	Release (last close)  commits; rescue into a stage      nothing
//
// An open without a fileHandle takes no writes (EBADF) and has nothing to flush, sync or
// release: a read-only open in versions/, which has no handle (its reads go to
// versions.File.Read), and any open of a stage's dataset that takes no writes (baseHandle:
// variable-length strings). Every open of a stage's other datasets shares a stageHandle.
// Open, Read, Setattr and the settable xattrs are the kinds' own; both fill their
// attributes with fileAttr and serve their xattrs with getxattr and listxattr.
type fileNode struct {
	fs.Inode
}

// fileNodeOps are the requests both kinds answer through fileNode.
type fileNodeOps interface {
	fs.NodeWriter
	fs.NodeFlusher
	fs.NodeFsyncer
	fs.NodeReleaser
}

var (
	_ fileNodeOps = (*datasetNode)(nil)
	_ fileNodeOps = (*stageFileNode)(nil)
)

// reader reads a dataset's file through vh5fs's own handle.
type reader interface {
	read(dest []byte, off int64) (int, error)
}

// fileHandle is an open dataset file that takes writes.
type fileHandle interface {
	reader
	write(data []byte, off int64) error
	flush() syscall.Errno
	fsync() syscall.Errno
	release()
	// logArgs name the file in log lines.
	logArgs() []any
}

// readFrom answers a read through h: the bytes copied into dest.
func readFrom(h reader, dest []byte, off int64) (fuse.ReadResult, error) {
	nr, err := h.read(dest, off)
	if err != nil {
		return nil, err
	}
	return bytesResult(dest[:nr]), nil
}

// bytesResult is the reply to a read of the bytes b. go-fuse first tries to splice every
// fuse.ReadResultData reply, which for bytes in memory costs three system calls for
// nothing (and logs an error for replies of nearly 1 MiB); a vector of one slice goes
// straight to writev.
func bytesResult(b []byte) fuse.ReadResult { return fuse.ReadResultVector([][]byte{b}) }

var _ fs.NodeWriter = (*fileNode)(nil)

// Write writes at off (growing axis 0 past the end). A write the engine refuses (a spill
// file on a full disk, say: the write fails, what was staged before stays) is logged
// with its reason.
func (n *fileNode) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(fileHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	if err := h.write(data, off); err != nil {
		en := errno(err)
		slog.Error("write failed", append(h.logArgs(), "off", off, "len", len(data), "errno", en, "err", err)...)
		return 0, en
	}
	return uint32(len(data)), 0
}

var _ fs.NodeFlusher = (*fileNode)(nil)

// Flush runs on every close(2) of a descriptor.
func (n *fileNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(fileHandle); ok {
		return h.flush()
	}
	return 0
}

var _ fs.NodeFsyncer = (*fileNode)(nil)

func (n *fileNode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := fh.(fileHandle); ok {
		return h.fsync()
	}
	return 0
}

var _ fs.NodeReleaser = (*fileNode)(nil)

// Release runs on the last close of an open file.
func (n *fileNode) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	if h, ok := fh.(fileHandle); ok {
		h.release()
	}
	return 0
}

// opensForWriting reports whether open(2) flags ask to change the file.
func opensForWriting(flags uint32) bool {
	return flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0
}

// fileAttr fills the attributes of a dataset's file of size bytes: mode 0644 if it takes
// writes, else 0444.
func (m *mount) fileAttr(a *fuse.Attr, size int64, writable bool, mtime time.Time) {
	a.Mode = fuse.S_IFREG | m.perm(0o444)
	if writable {
		a.Mode = fuse.S_IFREG | m.perm(0o644)
	}
	a.Nlink = 1
	a.Size = uint64(size)
	a.Blocks = (a.Size + 511) / 512
	setTime(a, mtime)
}
