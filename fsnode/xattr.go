package fsnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/xattrs"
)

// Extended attributes: only the user. namespace is served. Names in other namespaces
// (security.*, system.*, trusted.*) are answered with ENODATA before any HDF5 call, and an
// unknown name is ENODATA too (never ENOSYS, which would switch xattrs off for the mount).

// xattrSource is a node whose extended attributes are one xattrs.Set.
type xattrSource interface {
	xattrs() (*xattrs.Set, error)
}

// getxattr answers a getxattr of the node n.
func getxattr(n xattrSource, name string, dest []byte) (uint32, syscall.Errno) {
	if !userXattr(name) {
		return 0, syscall.ENODATA
	}
	x, err := n.xattrs()
	if err != nil {
		return 0, errno(err)
	}
	v, err := x.Get(name)
	if err != nil {
		return 0, errno(err) // xattrs.ErrMissing: ENODATA
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// listxattr answers a listxattr of the node n.
func listxattr(n xattrSource, dest []byte) (uint32, syscall.Errno) {
	x, err := n.xattrs()
	if err != nil {
		return 0, errno(err)
	}
	var size int
	for _, n := range x.Names() {
		size += len(n) + 1
	}
	if len(dest) < size {
		return uint32(size), syscall.ERANGE
	}
	off := 0
	for _, n := range x.Names() {
		off += copy(dest[off:], n)
		dest[off] = 0
		off++
	}
	return uint32(size), 0
}

// userXattr reports whether a name can exist here at all.
func userXattr(name string) bool { return strings.HasPrefix(name, "user.") }

var _ fs.NodeGetxattrer = (*rootNode)(nil)

func (n *rootNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(n, attr, dest)
}

func (n *rootNode) xattrs() (*xattrs.Set, error) {
	defer n.m.enter()()
	x, err := xattrs.Root(n.m.file)
	if err == nil && n.m.live {
		err = xattrs.AddLive(x, n.m.file)
	}
	if err == nil && n.m.commit != nil {
		if next := n.m.commit.NextName(); next != "" {
			x.Add(XattrNextVersion, []byte(next))
		}
	}
	return x, err
}

var _ fs.NodeListxattrer = (*rootNode)(nil)

func (n *rootNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(n, dest)
}

var _ fs.NodeGetxattrer = (*groupNode)(nil)

func (n *groupNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(n, attr, dest)
}

var _ fs.NodeListxattrer = (*groupNode)(nil)

func (n *groupNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(n, dest)
}

func (n *groupNode) xattrs() (*xattrs.Set, error) {
	defer n.m.hold()()
	return xattrs.Group(n.m.file, n.path, n.version)
}

func (n *datasetNode) xattrs() (*xattrs.Set, error) {
	defer n.m.hold()()
	d, err := n.m.file.Dataset(n.path)
	if err != nil {
		return nil, err
	}
	return xattrs.Dataset(d)
}

var _ fs.NodeGetxattrer = (*datasetNode)(nil)

func (n *datasetNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return getxattr(n, attr, dest)
}

var _ fs.NodeListxattrer = (*datasetNode)(nil)

func (n *datasetNode) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return listxattr(n, dest)
}

// Setting or removing attributes is refused: versions are immutable and the mount is
// read-only.

var _ fs.NodeSetxattrer = (*datasetNode)(nil)

// Setxattr: in read-write mounts, setting user.vh5fs.shape (a JSON list) resizes the
// dataset on any axis and commits a new version at once. Nothing else is settable.
func (n *datasetNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	switch {
	case n.m.commit == nil:
		return syscall.EROFS
	case attr == xattrs.Shape:
		return n.setShape(data)
	}
	return syscall.EPERM
}

var _ fs.NodeRemovexattrer = (*datasetNode)(nil)

func (n *datasetNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.m.commit == nil {
		return syscall.EROFS
	}
	return syscall.EPERM
}

// XattrNextVersion, set on the mount's root in read-write mounts, names the next commit
// (once); reading it shows the pending name.
const XattrNextVersion = xattrs.Prefix + "next_version"

var _ fs.NodeSetxattrer = (*rootNode)(nil)

func (n *rootNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	switch {
	case n.m.commit == nil:
		return syscall.EROFS
	case attr == XattrCurrent:
		return n.m.setCurrent(string(data))
	case attr != XattrNextVersion:
		return syscall.EPERM
	}
	if err := n.m.commit.SetNextName(string(data)); err != nil {
		slog.Warn("next version name refused", "name", string(data), "err", err)
		if errors.Is(err, commit.ErrExists) {
			return errno(err)
		}
		return syscall.EINVAL // refused for any other reason: not a usable name
	}
	return 0
}

var _ fs.NodeRemovexattrer = (*rootNode)(nil)

// Removexattr of user.vh5fs.next_version drops the pending name: the next commit takes a
// default one.
func (n *rootNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	switch {
	case n.m.commit == nil:
		return syscall.EROFS
	case attr != XattrNextVersion:
		return syscall.EPERM
	case n.m.commit.NextName() == "":
		return syscall.ENODATA
	}
	if err := n.m.commit.SetNextName(""); err != nil {
		return errno(err)
	}
	return 0
}

// parseShape reads a value of user.vh5fs.shape: a JSON list of lengths.
func parseShape(data []byte) ([]int64, error) {
	var shape []int64
	if err := json.Unmarshal(data, &shape); err != nil {
		return nil, fmt.Errorf("%s: not a JSON list of lengths: %w", data, syscall.EINVAL)
	}
	return shape, nil
}
