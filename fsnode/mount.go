package fsnode

import (
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/versions"
)

// Mount serves f at mountpoint with the options in cfg and returns the running server;
// the caller waits on it (Wait) and ends it (Unmount).
func Mount(mountpoint string, f *versions.File, cfg mountopts.Config) (*fuse.Server, error) {
	m := &mount{file: f, mtime: fileMtime(f.Path()), live: f.Live()}
	mountOpts := []string{"ro"}
	if cfg.ReadWrite {
		c, err := commit.New(f)
		if err != nil {
			return nil, err
		}
		if cfg.CommitName != "" {
			if err := c.SetNextName(cfg.CommitName); err != nil {
				return nil, err
			}
		}
		m.commit = c
		mountOpts = []string{"rw"}
	}
	root := &rootNode{m: m}
	fsname := cfg.FSName
	if fsname == "" {
		fsname = f.Path()
	}
	entry, attr, negative := m.mutable(), m.mutable(), m.mutable()
	// Without allow_other the kernel lets only the mounting user (and root with allow_root)
	// in. allow_other brings default_permissions (cfg.KernelOptions): the kernel checks
	// every access against the modes the nodes report (nodes.go: 0444/0555, writable
	// dataset files 0644 in read-write mounts), owned by the mounting user (UID, GID).
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:       fsname,
			Name:         cfg.Subtype,
			AllowOther:   cfg.AllowOther,
			Debug:        cfg.Debug,
			DirectMount:  true,
			MaxReadAhead: 1 << 20,
			Options:      append(mountOpts, cfg.KernelOptions()...),
			MaxWrite:     1 << 20,
			// security.* lookups never reach vh5fs.
			IgnoreSecurityLabels: true,
			// mmap of FOPEN_DIRECT_IO files (numpy.memmap in read-write mounts);
			// O_TRUNC arrives with OPEN (truncating the handle) instead of as a SETATTR without one;
			// READDIRPLUS only where the kernel sees stats follow (ls -l), so that a plain ls of
			// 10,000 versions is not 10,000 lookups.
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_READDIRPLUS_AUTO,
		},
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &negative,
		UID:             uint32(os.Getuid()),
		GID:             uint32(os.Getgid()),
	}
	if cfg.Debug {
		opts.Logger = log.New(os.Stderr, "fuse: ", log.Lmicroseconds)
	}
	srv, err := fs.Mount(mountpoint, root, opts)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if err := raiseReadAhead(mountpoint, readAheadKB); err != nil {
		slog.Debug("read-ahead left as it is", "err", err)
	}
	return srv, nil
}
