package fsnode

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/decoded"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
)

// Engines are what a mount serves: the file, and in read-write mounts its write side and
// (for versioned files) its stages; nil otherwise. The caller opens them and closes them
// once the server's Wait returns: the stages (saved for the next mount), the committer,
// then the file.
type Engines struct {
	File   *versions.File
	Commit *commit.Committer
	Stages *stage.Manager
	// Reclaim compacts what deletions through the mount leave (NewReclaimer); the caller
	// closes it once Wait returns, before the committer. nil: each deletion compacts.
	Reclaim *Reclaimer
	// Cache keeps decoded copies of committed versions' datasets (-o cache), which opens
	// of them are served from, by the kernel (passthrough) where it can; the caller closes
	// it once Wait returns, before the file. nil: no cache.
	Cache *decoded.Cache
}

// Mount serves e at mountpoint with the options in cfg and returns the running server;
// the caller waits on it (Wait) and ends it (Unmount).
func Mount(mountpoint string, e Engines, cfg mountopts.Config) (*fuse.Server, error) {
	f := e.File
	m, err := newMount(e, cfg)
	if err != nil {
		return nil, err
	}
	mountOpts := []string{"ro"}
	budget := int64(0) // a read-only mount stages nothing
	if cfg.ReadWrite {
		budget = cfg.StageMemBudget()
		mountOpts = []string{"rw"}
	}
	limitHeap(budget)
	root := &rootNode{m: m, frozenDir: frozenDir{m, "/"}}
	fsname := cfg.FSName
	if fsname == "" {
		fsname = f.Path()
	}
	negative := m.mutable()
	// Without allow_other the kernel lets only the mounting user in. allow_other brings
	// default_permissions (cfg.KernelOptions): the kernel checks every access against the
	// modes the nodes report (nodes.go: 0444/0555, writable dataset files 0644 in
	// read-write mounts, less -o umask), owned by the mounting user or -o uid=/gid=.
	// The nodes report uid and gid 0, which the bridge replaces with UID and GID when
	// those are not 0 (so uid=0 from another user reports 0 as asked).
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if cfg.HasUID {
		uid = cfg.UID
	}
	if cfg.HasGID {
		gid = cfg.GID
	}
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:      fsname,
			Name:        cfg.Subtype,
			AllowOther:  cfg.AllowOther,
			Debug:       cfg.Debug,
			DirectMount: true,
			// mount(2) flags: the kernel takes access-time options only as flags, never in
			// the option string (which would fail the mount with EINVAL).
			DirectMountFlags: mountFlags(cfg),
			Options:          append(mountOpts, cfg.KernelOptions()...),
			// security.* lookups never reach vh5fs.
			IgnoreSecurityLabels: true,
			// mmap of FOPEN_DIRECT_IO files (numpy.memmap in read-write mounts);
			// O_TRUNC arrives with OPEN (truncating the handle) instead of as a SETATTR without one;
			// READDIRPLUS only where the kernel sees stats follow (ls -l), so that a plain ls of
			// 10,000 versions is not 10,000 lookups.
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_READDIRPLUS_AUTO,
		},
		// No default entry or attribute timeout: every node sets its own, and the bridge
		// would replace a 0 (stages, branches, read-write dataset attributes: the kernel
		// must ask each time) with the default.
		NegativeTimeout: &negative,
		UID:             uid,
		GID:             gid,
		// Every node sets its mode; -o umask=0777 leaves 0, which must stay 0 (the bridge
		// would otherwise make it 0644/0755).
		NullPermissions: true,
	}
	TuneReads(&opts.MountOptions)
	if cfg.Debug {
		opts.Logger = log.New(os.Stderr, "fuse: ", log.Lmicroseconds)
	}
	var srv *fuse.Server
	reason, err := withFusermountStderr(func() (err error) {
		srv, err = fs.Mount(mountpoint, root, opts)
		return err
	})
	if err != nil {
		return nil, &mountError{mountpoint: mountpoint, reason: reason, err: err}
	}
	m.server.Store(srv)
	if err := RaiseReadAhead(mountpoint); err != nil {
		slog.Debug("read-ahead left as it is", "err", err)
	}
	return srv, nil
}

// newMount holds what every node of a mount of e shares. The node tree works on it with
// or without a kernel: Mount serves it, the package's tests call the nodes.
func newMount(e Engines, cfg mountopts.Config) (*mount, error) {
	f := e.File
	if cfg.ReadWrite != (e.Commit != nil) {
		return nil, fmt.Errorf("%s: a read-write mount needs the file's write side, and only it", f.Path())
	}
	return &mount{file: f, commit: e.Commit, stages: e.Stages, mtime: fileMtime(f.Path()), live: f.Live(), umask: cfg.Umask,
		delete: cfg.AllowDelete && e.Commit != nil, reclaim: e.Reclaim, links: map[string]string{},
		cache: e.Cache, noPassthrough: cfg.NoPassthrough}, nil
}

// Detach unmounts mountpoint lazily (umount -l): the mount leaves the tree at once, and
// the kernel keeps the connection, so files still open keep being served, until the last
// of them is closed; then the server's Wait returns. Not root, it asks fusermount3 -uz.
func Detach(mountpoint string) error {
	err := unix.Unmount(mountpoint, unix.MNT_DETACH)
	if err == nil || !errors.Is(err, unix.EPERM) {
		return err
	}
	if out, ferr := exec.Command("fusermount3", "-uz", mountpoint).CombinedOutput(); ferr != nil {
		return fmt.Errorf("fusermount3 -uz %s: %v: %s", mountpoint, ferr, strings.TrimSpace(string(out)))
	}
	return nil
}

// heapRoom is the Go heap a mount needs beside its staged chunks: chunk maps, commit
// plans, caches, and the plans of reads in flight (a read of 128 KiB of one-byte chunks
// plans 131,072 pieces: without the limit, a read-only mount of a 10M-chunk version
// reading it whole peaked at 489 MiB).
const heapRoom = 160 << 20

// limitHeap sets a soft limit on the Go heap of the staged chunks' budget plus heapRoom
// (unless GOMEMLIMIT sets one): the store bounds the staged chunks held, but the heap
// would otherwise grow to twice what is live between collections, and a large commit's
// plan would double the daemon's peak RSS.
func limitHeap(budget int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(max(budget, 0) + heapRoom)
}

// TuneReads sets the options that shape reads and writes through a mount: requests of up
// to 1 MiB (the kernel's read-ahead, which sizes buffered READs, is RaiseReadAhead's, once
// mounted). The benchmark's loopback reference mounts with them too, so that vh5fs is
// measured against a ceiling with the same settings.
func TuneReads(o *fuse.MountOptions) {
	o.MaxReadAhead = 1 << 20
	o.MaxWrite = 1 << 20
}

// mountFlags are the mount(2) flags of the direct mount: MS_NOSUID|MS_NODEV as fusermount3
// sets them (go-fuse then applies nosuid/suid/nodev/dev/noexec/exec from the options on
// top), MS_RDONLY for read-only mounts (so the mount table says ro, as with fusermount3),
// and the access-time flags, later option winning per flag as in mount(8). The kernel
// keeps no access times for FUSE inodes (S_NOATIME) and vh5fs reports a fixed atime, so
// those flags only show in the mount table. When go-fuse falls back to fusermount3 (not
// root), these flags are not used: fusermount3 gets "ro"/"rw" and the options.
func mountFlags(cfg mountopts.Config) uintptr {
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !cfg.ReadWrite {
		flags |= unix.MS_RDONLY
	}
	for _, f := range []struct {
		flag mountopts.Flag
		bit  uintptr
	}{
		{cfg.Atime.NoAtime, unix.MS_NOATIME},
		{cfg.Atime.NoDiratime, unix.MS_NODIRATIME},
		{cfg.Atime.Relatime, unix.MS_RELATIME},
		{cfg.Atime.Strictatime, unix.MS_STRICTATIME},
		{cfg.Atime.Lazytime, unix.MS_LAZYTIME},
	} {
		switch f.flag {
		case mountopts.FlagSet:
			flags |= f.bit
		case mountopts.FlagClear:
			flags &^= f.bit
		}
	}
	return flags
}
