package main

// The mount.fuse3 form. mount(8) runs /sbin/mount.fuse3 for type fuse.vh5fs, which runs
// `/bin/sh -c 'vh5fs FILE MOUNTPOINT -o OPTIONS'` (vh5fs found on sh's default PATH:
// mount(8) drops the caller's PATH) with OPTIONS such as "ro,allow_other,dev,suid" —
// mount.fuse3 adds "rw" when neither ro nor rw is given, and "dev,suid" unless nodev/nosuid.
// The helper must return once the file system is mounted and keep serving in the
// background. vh5fs re-executes itself as `vh5fs mount -o OPTIONS FILE MOUNTPOINT` in a new
// session, its standard streams on /dev/null, with a readiness pipe on fd 3
// (VH5FS_READY_FD=3): the child writes "ready" once the mount is live, or the one-line
// error it would have printed. The parent exits 0 on "ready", else prints the line and
// exits 1. `umount MOUNTPOINT` (or fusermount3 -u) ends the daemon cleanly.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/vh5fs/vh5fs/mountopts"
)

const readyEnv = "VH5FS_READY_FD"

// readyPipe is the write end of the readiness pipe in a daemon child (nil otherwise).
var (
	readyPipe *os.File
	readyOnce sync.Once
	readySent bool
)

// mountReady is called by runMount once the file system is mounted.
func mountReady() {
	readyOnce.Do(func() {
		if readyPipe != nil {
			readyPipe.WriteString("ready\n")
			readyPipe.Close()
		}
		readySent = true
	})
}

// isHelperForm reports the mount.fuse3 form: FILE MOUNTPOINT [options], FILE not a command.
func isHelperForm(args []string) bool {
	return len(args) >= 2 && !strings.HasPrefix(args[0], "-")
}

func helperUsage(w io.Writer) {
	fmt.Fprint(w, `usage: vh5fs FILE MOUNTPOINT [-o OPTIONS]

The form mount.fuse3 runs for 'mount -t fuse.vh5fs FILE MOUNTPOINT -o OPTIONS' and for
/etc/fstab lines such as

  /data/run.h5  /mnt/run  fuse.vh5fs  ro,allow_other  0 0

Mounts FILE at MOUNTPOINT, returns once the mount is ready and keeps serving in the
background until 'umount MOUNTPOINT'. OPTIONS are those of 'vh5fs mount' (see
'vh5fs help'); mount(8) passes rw unless ro is given. vh5fs must be on /bin/sh's default
PATH (e.g. /usr/local/bin) for mount(8) to find it.
`)
}

// runHelper is the parent of the mount.fuse3 form.
func runHelper(args []string, stderr io.Writer) int {
	fl := flag.NewFlagSet("vh5fs", flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	var opts optionList
	fl.Var(&opts, "o", "mount options")
	operands, err := interspersed(fl, splitShortValues(fl, args))
	if errors.Is(err, flag.ErrHelp) {
		helperUsage(os.Stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v; see 'vh5fs FILE MOUNTPOINT -h'\n", err)
		return 2
	}
	if len(operands) != 2 {
		fmt.Fprintf(stderr, "vh5fs: expected FILE MOUNTPOINT, got %d operands; see 'vh5fs FILE MOUNTPOINT -h'\n", len(operands))
		return 2
	}
	cfg, err := mountopts.Parse(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 2
	}
	file, mnt := operands[0], operands[1]
	if _, err := os.Stat(file); err != nil && !strings.ContainsAny(file, "/.") {
		// Most likely a mistyped command (vh5fs lgo x.h5), not a file name.
		fmt.Fprintf(stderr, "vh5fs: unknown command %q; see 'vh5fs help'\n", file)
		return 2
	}
	// The daemon runs in /, so hand it absolute paths; the mount table shows the file's.
	for _, p := range []*string{&file, &mnt} {
		if abs, err := filepath.Abs(*p); err == nil {
			*p = abs
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: cannot find my own executable: %v\n", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	defer r.Close()
	childArgs := []string{"mount"}
	if len(opts) > 0 {
		childArgs = append(childArgs, "-o", strings.Join(opts, ","))
	}
	childArgs = append(childArgs, file, mnt)
	cmd := exec.Command(exe, childArgs...)
	cmd.Env = append(os.Environ(), readyEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cfg.Debug {
		cmd.Stderr = os.Stderr // the trace goes where the caller's stderr goes
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		fmt.Fprintf(stderr, "vh5fs: starting the daemon: %v\n", err)
		return 1
	}
	w.Close()
	msg, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	if string(bytes.TrimSpace(msg)) == "ready" {
		cmd.Process.Release()
		return 0
	}
	werr := cmd.Wait()
	line := strings.TrimSpace(string(msg))
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if line == "" {
		line = fmt.Sprintf("vh5fs: %s: mounting at %s failed: %v", file, mnt, werr)
	}
	fmt.Fprintln(stderr, line)
	return 1
}

// daemonChild reports whether this process is the background child of runHelper, and if so
// takes the readiness pipe.
func daemonChild() bool {
	v := os.Getenv(readyEnv)
	if v == "" {
		return false
	}
	os.Unsetenv(readyEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return false
	}
	syscall.CloseOnExec(fd) // not for fusermount3 or anything else we start
	readyPipe = os.NewFile(uintptr(fd), "ready")
	return readyPipe != nil
}

// firstLine keeps the first line written to it (the error runMount reports) and passes
// everything on to w.
type firstLine struct {
	mu   sync.Mutex
	w    io.Writer
	line string
	done bool
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	if !f.done {
		f.line += string(p)
		if i := strings.IndexByte(f.line, '\n'); i >= 0 {
			f.line, f.done = f.line[:i], true
		}
	}
	f.mu.Unlock()
	return f.w.Write(p)
}

// runDaemonChild runs `vh5fs mount ...` and reports readiness or the error on the pipe.
func runDaemonChild(args []string) int {
	capture := &firstLine{w: os.Stderr}
	code := run(args, capture)
	readyOnce.Do(func() {
		capture.mu.Lock()
		line := capture.line
		capture.mu.Unlock()
		if line == "" {
			line = fmt.Sprintf("vh5fs: mount exited with status %d before the mount was ready", code)
		}
		readyPipe.WriteString(line + "\n")
		readyPipe.Close()
	})
	return code
}
