// Package tests holds vh5fs's end-to-end tests: they build the vh5fs binary, really mount
// files with FUSE, and read them with ordinary system calls, shell tools and Python
// (Debian's h5py and numpy).
package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// vh5fsBin is the binary under test, built once by TestMain.
var vh5fsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vh5fs-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vh5fsBin = filepath.Join(dir, "vh5fs")
	build := exec.Command("go", "build", "-o", vh5fsBin, "../cmd/vh5fs")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building vh5fs:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// python is Debian's interpreter, which has python3-h5py and python3-numpy.
func python(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("python3 not found")
	return ""
}

// mounted is a running vh5fs mount.
type mounted struct {
	Dir    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

// mount starts `vh5fs mount [-o opts] file MNT` and waits until the mount is live. The
// mount is torn down (and must exit cleanly) when the test ends.
func mount(t *testing.T, file string, opts ...string) *mounted {
	t.Helper()
	mnt := t.TempDir()
	return startMount(t, mnt, vh5fsArgs(file, mnt, opts...))
}

// vh5fsArgs is the command line `vh5fs mount [-o opts] file mnt`.
func vh5fsArgs(file, mnt string, opts ...string) []string {
	args := []string{vh5fsBin, "mount"}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	return append(args, file, mnt)
}

// startMount runs argv, a command that mounts at mnt and serves in the foreground, waits
// until mnt is a mount point, and tears it down when the test ends.
func startMount(t *testing.T, mnt string, argv []string) *mounted {
	t.Helper()
	m := &mounted{Dir: mnt, cmd: exec.Command(argv[0], argv[1:]...), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	m.cmd.Stderr = m.stderr
	require.NoError(t, m.cmd.Start())
	go func() { m.done <- m.cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for !isMountpoint(t, mnt) {
		select {
		case err := <-m.done:
			t.Fatalf("vh5fs exited before mounting: %v\n%s", err, m.stderr)
		default:
		}
		require.True(t, time.Now().Before(deadline), "mount did not appear")
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { m.unmount(t) })
	return m
}

func (m *mounted) unmount(t *testing.T) {
	if m.cmd.ProcessState != nil {
		return
	}
	if isMountpoint(t, m.Dir) {
		if out, err := exec.Command("fusermount3", "-u", m.Dir).CombinedOutput(); err != nil {
			t.Errorf("fusermount3 -u: %v: %s", err, out)
			m.cmd.Process.Kill()
		}
	}
	select {
	case err := <-m.done:
		require.NoError(t, err, "vh5fs exit; stderr:\n%s", m.stderr)
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		t.Errorf("vh5fs did not exit after unmount")
	}
}

// wait waits for the process to exit and returns its error.
func (m *mounted) wait(t *testing.T) error {
	select {
	case err := <-m.done:
		m.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("vh5fs did not exit")
	}
	return nil
}

func (m *mounted) signal(t *testing.T, sig syscall.Signal) {
	require.NoError(t, m.cmd.Process.Signal(sig))
}

// isMountpoint reports whether dir is a mount point (per /proc/self/mountinfo).
func isMountpoint(t *testing.T, dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// run runs a command and returns its stdout, failing the test on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %v: %s", name, args, stderr.String())
	return string(out)
}
