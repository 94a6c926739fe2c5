// Package tests holds vh5fs's end-to-end tests: they build the vh5fs binary, really mount
// files with FUSE, and read them with ordinary system calls, shell tools and Python
// (Debian's h5py and numpy).
package tests

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/syncbuf"
)

// vh5fsBin is the binary under test, built once by TestMain.
var vh5fsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vh5fs-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// VH5FS_BIN names a prebuilt binary, for soaks that run a compiled test binary in a
	// loop and must keep testing the same code while the working tree changes.
	vh5fsBin = os.Getenv("VH5FS_BIN")
	if vh5fsBin == "" {
		vh5fsBin = filepath.Join(dir, "vh5fs")
		build := exec.Command("go", "build", "-o", vh5fsBin, "../cmd/vh5fs")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building vh5fs:", err)
			os.Exit(1)
		}
	}
	flag.Parse()
	if d := testTimeout(); d > 0 {
		go dumpHungMounts(time.Now().Add(d - 45*time.Second))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testTimeout is go test's -timeout (0: none).
func testTimeout() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok {
			return d
		}
	}
	return 0
}

// live holds the running mounts, for dumpHungMounts.
var live struct {
	sync.Mutex
	mounts map[*mounted]bool
}

// dumpHungMounts waits until shortly before go test's timeout and then, if the tests are
// still running, stops every daemon still serving with SIGQUIT and prints its stderr, which
// then ends in the Go runtime's dump of all its goroutines: a hang shows where the daemon
// waits, not only where the test does. The timeout's own panic follows with the test's stacks.
func dumpHungMounts(at time.Time) {
	time.Sleep(time.Until(at))
	live.Lock()
	var hung []*mounted
	for m := range live.mounts {
		hung = append(hung, m)
	}
	live.Unlock()
	for _, m := range hung {
		fmt.Fprintf(os.Stderr, "\n=== tests still running near the timeout: goroutines of the daemon serving %s (%v)\n", m.Dir, m.cmd.Args)
		m.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			m.cmd.Process.Kill()
			<-m.done
		}
		os.Stderr.Write(m.stderr.Bytes())
		exec.Command("fusermount3", "-uz", m.Dir).Run()
	}
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
	stderr *syncbuf.Buffer // the daemon's, read while it writes
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

// startMount runs argv (with env added to the environment), a command that mounts at mnt
// and serves in the foreground, waits until mnt is a mount point, and tears it down when
// the test ends.
func startMount(t *testing.T, mnt string, argv []string, env ...string) *mounted {
	t.Helper()
	m := &mounted{Dir: mnt, cmd: exec.Command(argv[0], argv[1:]...), stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	m.cmd.Stderr = m.stderr
	m.cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
	require.NoError(t, m.cmd.Start())
	live.Lock()
	if live.mounts == nil {
		live.mounts = map[*mounted]bool{}
	}
	live.mounts[m] = true
	live.Unlock()
	go func() {
		err := m.cmd.Wait()
		live.Lock()
		delete(live.mounts, m)
		live.Unlock()
		m.done <- err
	}()
	// The daemon logs "mounted" once go-fuse has served its own first requests (a probe
	// file it opens in the mount): a request of the test's that locks the root before that
	// and outlives the daemon (killed by a crash test) would leave the probe, and so the
	// daemon, stuck for good.
	deadline := time.Now().Add(10 * time.Second)
	for !isMountpoint(t, mnt) || !strings.Contains(m.stderr.String(), "msg=mounted ") {
		select {
		case err := <-m.done:
			t.Fatalf("vh5fs exited before mounting: %v\n%s", err, m.stderr)
		default:
		}
		require.True(t, time.Now().Before(deadline), "mount did not appear")
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		if t.Failed() { // what the daemon logged tells what it saw
			log := m.stderr.String()
			t.Logf("vh5fs at %s logged (last 4000 bytes):\n%s", mnt, log[max(0, len(log)-4000):])
		}
		m.unmount(t)
	})
	return m
}

func (m *mounted) unmount(t *testing.T) {
	if m.cmd.ProcessState != nil {
		return
	}
	if isMountpoint(t, m.Dir) {
		if out, err := fusermountU(m.Dir); err != nil {
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

// fusermountU unmounts dir, retrying while it is busy for a moment. Busy for a moment
// need not be a leak (likely: a parallel test's forked child holds copies of every
// descriptor until it execs); a descriptor left open stays busy past the retries.
func fusermountU(dir string) ([]byte, error) {
	var out []byte
	var err error
	for try := 0; try < 40; try++ {
		if out, err = exec.Command("fusermount3", "-u", dir).CombinedOutput(); err == nil || !bytes.Contains(out, []byte("busy")) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return out, err
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

// logged waits until the daemon's log matches pattern and returns the match and its
// submatches. The log comes through a pipe that a goroutine copies into the buffer, so a
// line the daemon wrote before answering a call can reach the buffer after the caller has
// its answer.
func (m *mounted) logged(t *testing.T, pattern string) []string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(10 * time.Second)
	for {
		log := m.stderr.String()
		if match := re.FindStringSubmatch(log); match != nil {
			return match
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's log has no match for %q:\n%s", pattern, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
