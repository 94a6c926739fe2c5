// Command vh5fs mounts a versioned-hdf5 file as a directory tree: every committed version
// is a directory and every dataset a file of raw bytes.
//
//	vh5fs mount [-o OPTIONS] FILE MOUNTPOINT   serve in the foreground until unmounted
//	vh5fs FILE MOUNTPOINT -o OPTIONS           as mount.fuse3 runs it (daemon.go)
//	vh5fs log|ls|info|diff|fsck ...            inspect the file (commands.go)
//	vh5fs --version
//
// Ctrl-C, SIGTERM and `fusermount3 -u MOUNTPOINT` unmount cleanly.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/vh5fs/vh5fs/fsnode"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/versions"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage:
  vh5fs mount [-o OPTIONS] FILE MOUNTPOINT   serve in the foreground
  vh5fs FILE MOUNTPOINT [-o OPTIONS]         mount.fuse3 form: mount, serve in the background
  vh5fs log FILE [VERSION] [--at TIME] [-n N] [--oneline]
                                             history, newest first
  vh5fs ls FILE [VERSION] [--at TIME]        a version's datasets
  vh5fs info FILE[:VERSION[/DATASET]] [--at TIME]
  vh5fs diff FILE V1 V2 [DATASET]            chunks that differ between two versions
  vh5fs fsck [--repair] FILE                 check the file's invariants
  vh5fs refs FILE [VERSION] [--all] [--url URL] [-o OUT.json]
                                             Zarr references for Dask/xarray
  vh5fs help [COMMAND]
  vh5fs --version

Mounts the HDF5 file FILE (written by versioned-hdf5, or plain HDF5) at MOUNTPOINT, an
empty directory, and serves it in the foreground until Ctrl-C, SIGTERM or
'fusermount3 -u MOUNTPOINT'.

Options (-o, comma-separated, may repeat):
  ro            read-only (the default)
  rw            read-write: writing versions/<v>/<dataset> stages changes; fsync or
                close commits them as a new version (see README)
  commit_name=NAME  name of the first version this mount commits (default: a UTC
                time stamp such as 20261202T140520.123456Z)
  live          follow an HDF5 SWMR writer (sizes and reads track its flushes) and
                commits of other processes (new versions appear); read-only, no
                file locking (see README, "Live mounts")
  allow_other   let other users see the mount (the kernel then checks the modes:
                default_permissions)
  uid=N, gid=N  owner and group of every file (default: the mounting user's)
  umask=NNN     bits cleared from every mode (files 0444, 0644 in rw; dirs 0555)
  debug         trace every FUSE operation on stderr
  fsname=NAME   the source shown by mount(8) and df (default: FILE)
  nosuid, nodev, noexec, noatime, relatime, sync, ... go to the kernel as mount flags;
  fstab-only options (defaults, nofail, x-*, ...) and blksize= are ignored;
  allow_root and auto_unmount are refused.
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
		fmt.Fprintf(os.Stdout, "vh5fs %s\n", version)
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
	fmt.Fprintf(stderr, "vh5fs: unknown command %q\n%s", args[0], usage)
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
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprint(stderr, usage) }
	var opts optionList
	fl.Var(&opts, "o", "mount options")
	// Accept options after the operands too (vh5fs mount FILE MNT -o ro), as mount(8) does.
	operands, err := interspersed(fl, args)
	if err != nil {
		return 2
	}
	if len(operands) != 2 {
		fmt.Fprintf(stderr, "vh5fs: mount needs FILE and MOUNTPOINT\n%s", usage)
		return 2
	}
	cfg, err := mountopts.Parse(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 2
	}
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))

	file, mnt := operands[0], operands[1]
	if err := checkMountpoint(mnt); err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	open := versions.Open
	switch {
	case cfg.ReadWrite && cfg.Live:
		fmt.Fprintf(stderr, "vh5fs: options rw and live cannot be combined (a live mount is read-only)\n")
		return 2
	case cfg.ReadWrite:
		open = versions.OpenRW
	case cfg.Live:
		open = versions.OpenLive
	}
	f, err := open(file)
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %s\n", openError(file, err))
		return 1
	}
	defer f.Close()

	// Catch the signals before mounting: the kernel shows the mount before fsnode.Mount
	// returns, and go-fuse holds a file open on it meanwhile (its poll probe). A SIGINT's
	// default action then would exit the process with that file open, and closing it waits
	// for a FLUSH that no one is left to answer: the process and the mount hang for good.
	// Caught, a signal waits in sigs and unmounts as soon as the mount is up.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	srv, err := fsnode.Mount(mnt, f, cfg)
	if err != nil {
		signal.Stop(sigs)
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	mountReady()
	go func() {
		for sig := range sigs {
			slog.Info("unmounting", "signal", sig.String(), "mountpoint", mnt)
			if err := srv.Unmount(); err != nil {
				slog.Error("unmount failed; still serving", "mountpoint", mnt, "err", err)
			}
		}
	}()
	srv.Wait()
	signal.Stop(sigs)
	return 0
}

// openError turns an open failure into one line naming the file and the problem, without
// HDF5's error-stack noise where a plainer cause is known.
func openError(file string, err error) string {
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
		return fmt.Sprintf("%s: cannot read the file (corrupt or truncated?): %s", file, he.Stack)
	}
	return err.Error()
}

// checkMountpoint requires an existing, empty directory.
func checkMountpoint(mnt string) error {
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
