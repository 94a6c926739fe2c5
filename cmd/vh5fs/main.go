// Command vh5fs mounts a versioned-hdf5 file as a directory tree: every committed version
// is a directory and every dataset a file of raw bytes.
//
//	vh5fs mount [-o OPTIONS] FILE MOUNTPOINT   serve in the foreground until unmounted
//	vh5fs FILE MOUNTPOINT -o OPTIONS           as mount.fuse3 runs it (daemon.go)
//	vh5fs log|ls|info|diff|fsck ...            inspect the file (commands.go)
//	vh5fs delete FILE VERSION...               delete versions (delete.go)
//	vh5fs --version
//
// Ctrl-C, SIGTERM and `fusermount3 -u MOUNTPOINT` unmount cleanly.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/decoded"
	"github.com/vh5fs/vh5fs/fsnode"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/timearg"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// hdf5Version names the libhdf5 vh5fs was built against and, if another, the one it runs
// with: the file formats it can commit to follow them.
func hdf5Version() string {
	built, running := h5.HeaderVersion(), h5.LibraryVersion()
	if built == running {
		return "HDF5 " + built
	}
	return fmt.Sprintf("HDF5 %s (built against %s)", running, built)
}

const usage = `usage:
  vh5fs mount [-o OPTIONS] [--at TIME] FILE MOUNTPOINT
                                             serve in the foreground
  vh5fs FILE MOUNTPOINT [-o OPTIONS]         mount.fuse3 form: mount, serve in the background
  vh5fs log FILE [VERSION] [--at TIME] [-n N] [--oneline] [--json]
                                             history, newest first
  vh5fs log --all FILE [-n N]                every version, branches drawn as a graph
  vh5fs ls FILE [VERSION] [--at TIME]        a version's datasets
  vh5fs ls --stages FILE                     the stages kept beside FILE
  vh5fs info FILE[:VERSION[/DATASET|/GROUP]] [--at TIME]
  vh5fs diff [-v] FILE V1 V2 [DATASET] [--json]
                                             what changed between two versions (data and
                                             attributes); -v: chunks; --json: as JSON
  vh5fs fsck [--repair [--discard-journal]] FILE
                                             check the file's invariants; --repair completes
                                             an interrupted commit, --discard-journal drops it
  vh5fs refs FILE [VERSION] [--at TIME] [--all] [--url URL] [-o OUT.json]
                                             Zarr references for Dask/xarray
  vh5fs delete [-n] FILE VERSION...
  vh5fs delete [-n] FILE --keep-last N | --keep-every N | --before TIME
                                             delete versions as versioned-hdf5's
                                             delete_versions does; -n: what would go
  vh5fs tag FILE NAME [VERSION] | -d FILE NAME | -l FILE
                                             name a version for good (a tag holds it)
  vh5fs branch FILE NAME [VERSION] | -f FILE NAME VERSION | -d FILE NAME | -l FILE
                                             a second head: commits through
                                             branches/NAME/ move it, not current
  vh5fs compact FILE [-o OUT [--force]]      rewrite FILE without the space nothing uses
  vh5fs modify FILE DATASET [--chunks R[,C...]] [--compression gzip[=N]|lzf|none]
               [--shuffle|--no-shuffle] [--dtype DTYPE] [--fillvalue V] [-n] [--force]
                                             change a dataset's storage in every version
  vh5fs warm FILE [VERSION] [DATASET] [--cache DIR] [--cache-size SIZE]
                                             fill the decoded cache (-o cache) ahead of reads
  vh5fs help [COMMAND]
  vh5fs --version                            vh5fs's version and the HDF5 it is built with

Mounts the HDF5 file FILE (written by versioned-hdf5, or plain HDF5) at MOUNTPOINT, an
empty directory, and serves it in the foreground until Ctrl-C, SIGTERM or
'fusermount3 -u MOUNTPOINT'.

Options (-o, comma-separated, may repeat):
  ro            read-only (the default)
  rw            read-write: writing versions/<v>/<dataset> stages changes; fsync or
                close commits them as a new version (see docs/GUIDE.md); refused at once
                unless the file, its directory and its filesystem are writable; only
                versioned-hdf5 files (a plain HDF5 file mounts read-only)
  allow_delete  with rw: rmdir MNT/versions/<v> deletes the version (as vh5fs delete);
                without it that rmdir answers EPERM
  commit_name=NAME  name of the first version this mount commits (default: a UTC
                time stamp such as 20261202T140520.123456Z)
  stage_mem=SIZE  memory for written, not yet committed chunks, shared by the mount's
                open files (bytes, or K/M/G; default 32M; 0 keeps none in memory);
                beyond it they go to the .h5 ahead of the commit, or to a spill file
  live          follow an HDF5 SWMR writer (sizes and reads track its flushes) and
                commits of other processes (new versions appear); read-only, no
                file locking (see docs/GUIDE.md, "Live mounts")
  allow_other   let other users see the mount (the kernel then checks the modes:
                default_permissions)
  uid=N, gid=N  owner and group of every file (default: the mounting user's)
  umask=NNN     bits cleared from every mode (files 0444, 0644 in rw; dirs 0555)
  debug         trace every FUSE operation on stderr
  at=TIME       the file as it was at TIME (also --at; read-only): current is the
                version current then, later versions are not shown ('vh5fs help time')
  logfile=PATH  append the mount's log lines (errors, commits that failed, the
                -o debug trace of a background mount) to PATH, an absolute path
  fsname=NAME   the source shown by mount(8) and df (default: FILE)
  cache[=DIR]   keep a decoded copy of each committed version's dataset read whole (in
                DIR, an absolute path; default vh5fs/ in ~/.cache or $XDG_CACHE_HOME),
                filled in the background after the first read that reaches its end;
                later opens are served by the kernel from it (FUSE passthrough) at
                page-cache speed. Entries are named by content; see docs/GUIDE.md
  cache_size=SIZE  the cache directory's size (bytes, or K/M/G; default 2G): the least
                recently used entries go to make room
  nopassthrough  with cache: vh5fs reads cached datasets from their entries itself
  nosuid, nodev, noexec, noatime, relatime, sync, ... go to the kernel as mount flags;
  fstab-only options (defaults, nofail, x-*, ...) and blksize= are ignored;
  allow_root and auto_unmount are refused.

Versions are snapshots (as ZFS's .zfs/snapshot): nothing inside versions/<v>/ changes.
  cat, cp -a, rsync -a, find, numpy.memmap        read, in every mount
  rm, mv, chmod, touch, mkdir, ln inside <v>      EROFS (logged); so rm -r, rm -rf
                                                  versions/* and mv out of the mount fail
                                                  and leave every version whole
  mv versions/<v> versions/<w>                    rename (rw; undo: mv back)
  ln -sfn versions/<v> MNT/current                make <v> current (rw; also setfattr -n
                                                  user.vh5fs.current -v <v> MNT)
  rmdir versions/<v>                              delete <v> with rw,allow_delete (find
                                                  -delete and rmtree end in it); EPERM
                                                  without: use vh5fs delete FILE <v>
  write a dataset's bytes, fsync or close         a new version (rw); <v> unchanged
`

func main() {
	if daemonChild() {
		os.Exit(runDaemonChild(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintf(os.Stdout, "vh5fs %s\n%s\n", version, hdf5Version())
		return 0
	case "-h", "--help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	case "help":
		return runHelp(args[1:], stderr)
	case "mount":
		return runMount(args[1:], stderr)
	}
	if c, ok := commands[args[0]]; ok {
		return c.run(args[1:], os.Stdout, stderr)
	}
	if isHelperForm(args) {
		return runHelper(args, stderr)
	}
	if len(args) == 1 && !strings.HasPrefix(args[0], "-") {
		if st, err := os.Stat(args[0]); err == nil && st.Mode().IsRegular() {
			fmt.Fprintf(stderr, "vh5fs: %s: a file, not a command: mount it with 'vh5fs %s MOUNTPOINT' "+
				"(or 'vh5fs mount %s MOUNTPOINT'), look inside with 'vh5fs info %s'\n", args[0], args[0], args[0], args[0])
			return 2
		}
	}
	fmt.Fprintf(stderr, "vh5fs: unknown command %q; see 'vh5fs help'\n", args[0])
	return 2
}

// interspersed parses fl's flags wherever they stand among args and returns the operands
// in order; "--" after an operand makes everything after it an operand.
func interspersed(fl *flag.FlagSet, args []string) ([]string, error) {
	var operands []string
	for rest := args; len(rest) > 0; {
		if err := fl.Parse(rest); err != nil {
			return nil, err
		}
		if fl.NArg() == 0 {
			break
		}
		operands = append(operands, fl.Arg(0))
		rest = fl.Args()[1:]
		if len(rest) > 0 && rest[0] == "--" {
			return append(operands, rest[1:]...), nil
		}
	}
	return operands, nil
}

// optionList collects repeated -o flags.
type optionList []string

func (o *optionList) String() string     { return strings.Join(*o, ",") }
func (o *optionList) Set(v string) error { *o = append(*o, v); return nil }

func runMount(args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("mount", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var opts optionList
	fl.Var(&opts, "o", "mount options")
	at := fl.String("at", "", "show the file as it was at this time (-o at=TIME)")
	// Accept options after the operands too (vh5fs mount FILE MNT -o ro), as mount(8) does;
	// "-oro" as mount(8) does too.
	operands, err := interspersed(fl, splitShortValues(fl, args))
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: mount: %v; see 'vh5fs help mount'\n", err)
		return 2
	}
	if len(operands) != 2 {
		fmt.Fprintf(stderr, "vh5fs: mount needs FILE and MOUNTPOINT; see 'vh5fs help mount'\n")
		return 2
	}
	cfg, err := mountopts.Parse(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 2
	}
	if *at != "" {
		cfg.At = *at
	}
	var atTime time.Time
	if cfg.At != "" {
		if atTime, err = timearg.Parse(cfg.At); err != nil {
			fmt.Fprintf(stderr, "vh5fs: mount: %v; see 'vh5fs help time'\n", err)
			return 2
		}
		if cfg.ReadWrite || cfg.Live {
			fmt.Fprintf(stderr, "vh5fs: mount: at=TIME shows the past, read-only: it cannot be combined with rw or live\n")
			return 2
		}
	}
	if cfg.LogFile != "" {
		lf, err := openLogFile(cfg.LogFile)
		if err != nil {
			fmt.Fprintf(stderr, "vh5fs: %v\n", err)
			return 1
		}
		defer lf.Close()
		stderr = logTo(stderr, lf)
	}
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	log.SetOutput(stderr) // go-fuse's own messages

	file, mnt := operands[0], operands[1]
	if err := checkMountpoint(mnt); err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	if err := checkFuseDevice(fuseDevice); err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	open := versions.Open
	switch {
	case cfg.ReadWrite && cfg.Live:
		fmt.Fprintf(stderr, "vh5fs: options rw and live cannot be combined (a live mount is read-only)\n")
		return 2
	case cfg.AllowDelete && !cfg.ReadWrite:
		fmt.Fprintf(stderr, "vh5fs: option allow_delete needs rw (a read-only mount deletes nothing)\n")
		return 2
	case cfg.ReadWrite:
		open = versions.OpenRW
	case cfg.Live:
		open = versions.OpenLive
	}
	if cfg.ReadWrite {
		if err := checkWritable(file); err != nil {
			fmt.Fprintf(stderr, "vh5fs: %v\n", err)
			return 1
		}
	}
	f, err := open(file)
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %s\n", openError(file, cfg.ReadWrite, err))
		return 1
	}
	defer f.Close()
	if cfg.ReadWrite && !f.Versioned() {
		fmt.Fprintf(stderr, "vh5fs: %s: not a versioned-hdf5 file (no _version_data): only versioned-hdf5 files mount read-write; a plain HDF5 file mounts read-only (-o ro)\n", file)
		return 1
	}
	if cfg.At != "" {
		if !f.Versioned() {
			fmt.Fprintf(stderr, "vh5fs: %s: at=TIME needs a versioned-hdf5 file (no _version_data)\n", file)
			return 1
		}
		if _, err := f.AsOf(atTime); err != nil {
			fmt.Fprintf(stderr, "vh5fs: %s: %v\n", file, err)
			return 1
		}
	}

	e := fsnode.Engines{File: f}
	switch {
	case cfg.Cache && (!f.Versioned() || cfg.Live):
		slog.Info("decoded cache off: it keeps committed versions only, which live mounts and plain files do not serve")
	case cfg.Cache:
		// Closed before the file (defers run last first): its fills read the file.
		if e.Cache = openCache(cfg); e.Cache != nil {
			defer e.Cache.Close()
		}
	}
	if cfg.ReadWrite {
		if e.Commit, err = commit.Open(f, commit.Options{StageMem: cfg.StageMemBudget(), Name: cfg.CommitName}); err != nil {
			if errors.Is(err, commit.ErrExists) {
				fmt.Fprintf(stderr, "vh5fs: %s: commit_name=%s: the file already has a version of that name\n", file, cfg.CommitName)
				return 2
			}
			fmt.Fprintf(stderr, "vh5fs: %v\n", err)
			return 1
		}
		// Let go of the committer's hash tables once unmounted: an HDF5 object left open
		// keeps the file open past its close.
		defer e.Commit.Close()
		if e.Stages, err = stage.Open(e.Commit); err != nil {
			fmt.Fprintf(stderr, "vh5fs: %v\n", err)
			return 1
		}
		defer func() {
			if err := e.Stages.Close(); err != nil { // saved for the next mount
				slog.Error("stages not saved", "err", err)
			}
		}()
		// Deletions' chunks are reclaimed at unmount, before the stages and the committer close.
		e.Reclaim = fsnode.NewReclaimer(e.Commit, e.Stages)
		defer e.Reclaim.Close()
	}

	// Catch the signals before mounting: the kernel shows the mount before fsnode.Mount
	// returns, and go-fuse holds a file open on it meanwhile (its poll probe). A SIGINT's
	// default action then would exit the process with that file open, and closing it waits
	// for a FLUSH that no one is left to answer: the process and the mount hang for good.
	// Caught, a signal waits in sigs and unmounts as soon as the mount is up.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	srv, err := fsnode.Mount(mnt, e, cfg)
	if err != nil {
		signal.Stop(sigs)
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	mountReady()
	slog.Info("mounted", "file", file, "mountpoint", mnt, "options", cfg.String(), "version", version, "hdf5", h5.LibraryVersion())
	go unmountOnSignal(srv, mnt, sigs)
	srv.Wait()
	signal.Stop(sigs)
	slog.Info("unmounted", "mountpoint", mnt)
	return 0
}

// openError turns an open failure into one line naming the file and the problem, without
// HDF5's error-stack noise where a plainer cause is known. rw tells a read-write open,
// which conflicts with every other process's lock, not only a writer's.
func openError(file string, rw bool, err error) string {
	if h5file, version, ok := fileInPath(file); ok && (errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
		return fmt.Sprintf("%s: not a file; %s is the HDF5 file: did you mean %s:%s? (vh5fs info FILE:VERSION[/DATASET], "+
			"vh5fs ls FILE VERSION)", file, h5file, h5file, version)
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("%s: no such file", file)
	case errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("%s: permission denied", file)
	case errors.Is(err, h5.ErrNotHDF5):
		return fmt.Sprintf("%s: not an HDF5 file", file)
	case errors.Is(err, versions.ErrDataVersion), errors.Is(err, h5.ErrTruncated):
		return err.Error()
	}
	var he *h5.Error
	if errors.As(err, &he) {
		if h, ok := conflictingHolder(file, rw); ok {
			return lockConflictMessage(file, h, rw)
		}
		reason := strings.ReplaceAll(he.Stack, "\n", "; ")
		if reason == "" && he.Err != nil {
			reason = he.Err.Error()
		}
		if reason == "" {
			reason = "libhdf5 gave no reason"
		}
		return fmt.Sprintf("%s: cannot read the file (corrupt or truncated?): %s", file, reason)
	}
	return err.Error()
}

// checkMountpoint requires an existing, empty directory that is not a mount point already
// (looked up in the mount table first: listing a mount whose server is gone would fail or
// hang).
func checkMountpoint(mnt string) error {
	if abs, err := filepath.Abs(mnt); err == nil {
		if m, ok := mountAt(abs); ok {
			return fmt.Errorf("mount point %s: already mounted (%s %s); unmount it first (umount %s)", mnt, m.fstype, m.source, mnt)
		}
	}
	st, err := os.Stat(mnt)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("mount point %s: no such directory", mnt)
		}
		return fmt.Errorf("mount point %s: %v", mnt, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mount point %s: not a directory", mnt)
	}
	d, err := os.Open(mnt)
	if err != nil {
		return fmt.Errorf("mount point %s: %v", mnt, err)
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("mount point %s: not empty", mnt)
	}
	return nil
}

const fuseDevice = "/dev/fuse"

// checkFuseDevice opens the FUSE device as the mounting user does. Without it, the mount
// fails later inside fusermount3 ("fusermount exited with code 256"), which names no cause.
func checkFuseDevice(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err == nil {
		f.Close()
		return nil
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: no such device: load the FUSE module (modprobe fuse); in a container, "+
			"pass the device in (docker run --device /dev/fuse --cap-add SYS_ADMIN)", dev)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%s: permission denied (uid %d may not open it): mount as root, or have it made "+
			"accessible (chmod 0666 %s, the fuse3 package's default mode)", dev, os.Getuid(), dev)
	}
	return fmt.Errorf("%s: %w", dev, err)
}

// fileInPath splits path at its longest proper prefix that is a regular file:
// "data.h5/r1/temp" is data.h5 and "r1/temp" when data.h5 is a file.
func fileInPath(path string) (file, rest string, ok bool) {
	for i := len(path) - 1; i > 0; i-- {
		if path[i] != '/' {
			continue
		}
		if st, err := os.Stat(path[:i]); err == nil && st.Mode().IsRegular() {
			return path[:i], strings.Trim(path[i+1:], "/"), true
		}
	}
	return "", "", false
}

// openLogFile opens the -o logfile for appending (shared by every mount that names it).
func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("logfile: %w", err)
	}
	return f, nil
}

// logTo makes the mount's log go to lf as well as to w. A daemon's standard error is
// /dev/null: there lf takes its place as file descriptor 2, so that the FUSE trace of -o
// debug and anything the Go runtime prints on a crash land in lf too.
func logTo(w io.Writer, lf *os.File) io.Writer {
	if readyPipe != nil {
		if err := unix.Dup2(int(lf.Fd()), 2); err == nil {
			return w // w ends in os.Stderr, which is lf now
		}
	}
	return io.MultiWriter(w, lf)
}

// unmountGrace is how long a signalled mount that is busy (a file open) retries its
// unmount before detaching lazily.
const (
	unmountGrace = 5 * time.Second
	unmountRetry = 250 * time.Millisecond
)

// unmountOnSignal unmounts on the first signal. A mount with open files is busy: it retries
// for unmountGrace (the files may be about to close), then detaches lazily, so that the
// mount point is free at once and the open files are still served until they close (a
// dirty read-write handle still commits at its close); the process exits after the last.
// A second signal detaches at once.
func unmountOnSignal(srv *fuse.Server, mnt string, sigs <-chan os.Signal) {
	sig := <-sigs
	slog.Info("unmounting", "signal", sig.String(), "mountpoint", mnt)
	err := srv.Unmount()
	if err == nil {
		return
	}
	slog.Warn("mount point busy (a file is open?); retrying the unmount", "mountpoint", mnt, "for", unmountGrace.String(), "err", err)
	tick := time.NewTicker(unmountRetry)
	defer tick.Stop()
	deadline := time.After(unmountGrace)
	for {
		select {
		case <-tick.C:
			if err := srv.Unmount(); err == nil {
				slog.Info("unmounted after retrying", "mountpoint", mnt)
				return
			}
			continue
		case <-deadline:
		case sig = <-sigs:
			slog.Info("second signal: detaching now", "signal", sig.String())
		}
		break
	}
	if err := fsnode.Detach(mnt); err != nil {
		slog.Error("lazy unmount failed; still serving", "mountpoint", mnt, "err", err)
		return
	}
	slog.Warn("detached the mount lazily: it is gone from the tree; files still open are served until they close, then vh5fs exits", "mountpoint", mnt)
}

// openCache opens the decoded cache of -o cache; nil, logged, when it cannot be: the
// mount then reads as without one.
func openCache(cfg mountopts.Config) *decoded.Cache {
	dir, err := cfg.CacheDirectory()
	if err == nil {
		var c *decoded.Cache
		if c, err = decoded.Open(dir, cfg.CacheBytes()); err == nil {
			slog.Debug("decoded cache", "dir", dir, "size", cfg.CacheBytes())
			return c
		}
	}
	slog.Warn("decoded cache off: reads go on without it", "err", err)
	return nil
}
