package tests

import (
	"bufio"
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

// oneLine requires stderr to be exactly one line starting with "vh5fs: " and returns it.
func oneLine(t *testing.T, stderr string) string {
	t.Helper()
	require.True(t, strings.HasSuffix(stderr, "\n"), "%q", stderr)
	line := strings.TrimSuffix(stderr, "\n")
	require.NotContains(t, line, "\n", "one line")
	require.True(t, strings.HasPrefix(line, "vh5fs: "), line)
	return line
}

// TestLockConflictErrors: a file another process holds is reported as that, naming the
// vh5fs mount that holds it and what to do, in the foreground, background and command forms.
func TestLockConflictErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.h5")
	copyFile(t, fixturePath("basic_1d.h5"), file)
	mnt2 := t.TempDir()
	unmountLater(t, mnt2)

	rw := mount(t, file, "rw")
	heldRW := fmt.Sprintf("vh5fs: %s: in use by the read-write vh5fs mount at %s (pid %d), which holds its lock: "+
		"read through that mount, or unmount it first (umount %s)", file, rw.Dir, rw.cmd.Process.Pid, rw.Dir)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"ls", []string{"ls", file}, 1},
		{"log", []string{"log", file}, 1},
		{"info", []string{"info", file + ":v1"}, 1},
		{"fsck", []string{"fsck", file}, 1},
		{"mount ro", []string{"mount", file, mnt2}, 1},
		{"mount rw", []string{"mount", "-o", "rw", file, mnt2}, 1},
		// The daemon's open through the undo-journal driver fails without an HDF5 message:
		// the line must still say why.
		{"fstab form rw", []string{file, mnt2, "-o", "rw"}, 1},
		{"fstab form ro", []string{file, mnt2, "-o", "ro"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, tc.args...)
			require.Equal(t, tc.code, code, "stdout %q stderr %q", out, stderr)
			require.Equal(t, heldRW, oneLine(t, stderr))
			require.False(t, isMountpoint(t, mnt2))
		})
	}
	rw.unmount(t)

	ro := mount(t, file)
	_, stderr, code := vh5fsRun(t, "mount", "-o", "rw", file, mnt2)
	require.Equal(t, 1, code)
	require.Equal(t, fmt.Sprintf("vh5fs: %s: in use by the read-only vh5fs mount at %s (pid %d): a read-write open "+
		"needs the file to itself; unmount that first (umount %s), or mount read-only", file, ro.Dir, ro.cmd.Process.Pid, ro.Dir),
		oneLine(t, stderr))
	out, stderr, code := vh5fsRun(t, "ls", file)
	require.Equal(t, 0, code, "a read-only mount shares the file: %s", stderr)
	require.Equal(t, "x  <i8  [6]\n", out)
	ro.unmount(t)

	// Another program (h5py) writing the file.
	py := exec.Command(python(t), "-c", `import h5py, sys
f = h5py.File(sys.argv[1], "r+")
print("open", flush=True)
sys.stdin.read()`, file)
	stdin, err := py.StdinPipe()
	require.NoError(t, err)
	stdout, err := py.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, py.Start())
	defer func() { stdin.Close(); py.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "open\n", line)
	_, stderr, code = vh5fsRun(t, "log", file)
	require.Equal(t, 1, code)
	require.Equal(t, fmt.Sprintf("vh5fs: %s: another process holds the file's lock for writing (pid %d, python3): "+
		"wait until it closes the file (an HDF5 SWMR writer can be followed with -o live)", file, py.Process.Pid), oneLine(t, stderr))
}

// TestMountpointErrors: a mount point that is already mounted says so.
func TestMountpointErrors(t *testing.T) {
	file, err := filepath.Abs(fixturePath("basic_1d.h5"))
	require.NoError(t, err)
	m := mount(t, file)
	for _, args := range [][]string{
		{"mount", file, m.Dir},
		{file, m.Dir, "-o", "ro"},
		{"mount", file, m.Dir + "/"},
	} {
		mnt := args[len(args)-1]
		if !strings.HasPrefix(mnt, "/") {
			mnt = args[1]
		}
		_, stderr, code := vh5fsRun(t, args...)
		require.Equal(t, 1, code, "%v", args)
		require.Equal(t, fmt.Sprintf("vh5fs: mount point %s: already mounted (fuse.vh5fs %s); unmount it first (umount %s)",
			mnt, file, mnt), oneLine(t, stderr), "%v", args)
	}
}

// TestFuseDevicePermission: a user who may not open /dev/fuse is told so and what to do,
// not "fusermount exited with code 256". The test runs in a mount namespace of its own in
// which /dev/fuse is a root-only file, as user nobody.
func TestFuseDevicePermission(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to set up the namespace")
	}
	for _, tool := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	dir, err := os.MkdirTemp("", "vh5fs-devfuse")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "vh5fs")
	copyFile(t, vh5fsBin, bin)
	require.NoError(t, os.Chmod(bin, 0o755))
	file := filepath.Join(dir, "data.h5")
	copyFile(t, fixturePath("basic_1d.h5"), file)
	require.NoError(t, os.Chmod(file, 0o644))
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o777))
	fake := filepath.Join(dir, "fuse")
	require.NoError(t, os.WriteFile(fake, nil, 0o600))

	script := `mount --bind "$1" /dev/fuse || exit 99
setpriv --reuid=65534 --regid=65534 --clear-groups "$2" mount "$3" "$4"`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
		fake, bin, file, mnt).CombinedOutput()
	require.Error(t, err)
	require.Equal(t, 1, err.(*exec.ExitError).ExitCode(), "%s", out)
	require.Equal(t, "vh5fs: /dev/fuse: permission denied (uid 65534 may not open it): mount as root, or have it "+
		"made accessible (chmod 0666 /dev/fuse, the fuse3 package's default mode)", oneLine(t, string(out)))
}

// TestUsageErrors: a bad command line gets one line saying what is wrong and where to read
// more, not the whole help; mistakes a new user makes get a hint.
func TestUsageErrors(t *testing.T) {
	good := fixturePath("basic_1d.h5")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"frob"}, 2, `vh5fs: unknown command "frob"; see 'vh5fs help'`},
		{"unknown command with operands", []string{"lgo", "x.h5"}, 2, `vh5fs: unknown command "lgo"; see 'vh5fs help'`},
		{"log no file", []string{"log"}, 2, "vh5fs: log: needs FILE and at most one VERSION; see 'vh5fs help log'"},
		{"ls bad flag", []string{"ls", "--bogus", good}, 2, "vh5fs: ls: flag provided but not defined: -bogus; see 'vh5fs help ls'"},
		{"diff operands", []string{"diff", good, "v1"}, 2, "vh5fs: diff: needs FILE V1 V2 [DATASET]; see 'vh5fs help diff'"},
		{"mount operands", []string{"mount", good}, 2, "vh5fs: mount needs FILE and MOUNTPOINT; see 'vh5fs help mount'"},
		{"mount bad flag", []string{"mount", "-x", good, "/mnt"}, 2, "vh5fs: mount: flag provided but not defined: -x; see 'vh5fs help mount'"},
		{"fstab form operands", []string{good, "/mnt", "extra"}, 2, "vh5fs: expected FILE MOUNTPOINT, got 3 operands; see 'vh5fs FILE MOUNTPOINT -h'"},
		{"file alone", []string{good}, 2, "vh5fs: " + good + ": a file, not a command: mount it with 'vh5fs " + good +
			" MOUNTPOINT' (or 'vh5fs mount " + good + " MOUNTPOINT'), look inside with 'vh5fs info " + good + "'"},
		{"info with a slash", []string{"info", good + "/v1"}, 1, "vh5fs: " + good + "/v1: not a file; " + good +
			" is the HDF5 file: did you mean " + good + ":v1? (vh5fs info FILE:VERSION[/DATASET], vh5fs ls FILE VERSION)"},
		{"ls with a slash", []string{"ls", good + "/v1/x"}, 1, "vh5fs: " + good + "/v1/x: not a file; " + good +
			" is the HDF5 file: did you mean " + good + ":v1/x? (vh5fs info FILE:VERSION[/DATASET], vh5fs ls FILE VERSION)"},
		{"missing file keeps its message", []string{"info", "testdata/nope.h5/v1"}, 1, "vh5fs: testdata/nope.h5/v1: no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := vh5fsRun(t, tc.args...)
			require.Equal(t, tc.code, code, "stdout %q stderr %q", out, stderr)
			require.Empty(t, out)
			require.Equal(t, tc.want, oneLine(t, stderr))
		})
	}

	// -n1 as git takes it, equal to -n 1; -oro for mount likewise.
	for _, args := range [][]string{{"log", "-n1", good}, {"log", good, "-n1", "--oneline"}, {"log", "-n2", "--oneline", good}} {
		split := make([]string, 0, len(args)+1)
		for _, a := range args {
			if strings.HasPrefix(a, "-n") && len(a) > 2 {
				split = append(split, "-n", a[2:])
				continue
			}
			split = append(split, a)
		}
		want, stderr, code := vh5fsRun(t, split...)
		require.Equal(t, 0, code, stderr)
		got, stderr, code := vh5fsRun(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.Equal(t, want, got, "%v", args)
		require.NotEmpty(t, got)
	}
	out, _, code := vh5fsRun(t, "log", "-n1", "--oneline", good)
	require.Equal(t, 0, code)
	require.Equal(t, 1, strings.Count(out, "\n"), out)
}

// TestLogFile: -o logfile=PATH gets every line a background mount writes: its start and
// end, and the error that stops a mount.
func TestLogFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("umount(8) of a FUSE mount needs root")
	}
	file, err := filepath.Abs(fixturePath("basic_1d.h5"))
	require.NoError(t, err)
	logf := filepath.Join(t.TempDir(), "vh5fs.log")
	mnt := t.TempDir()
	unmountLater(t, mnt)
	_, stderr, code := vh5fsRun(t, file, mnt, "-o", "ro,logfile="+logf)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	other := t.TempDir()
	unmountLater(t, other)
	_, stderr, code = vh5fsRun(t, file, other, "-o", "ro,logfile="+logf+",bogus")
	require.Equal(t, 2, code, "option errors come before the log is open: %s", stderr)
	out, err := exec.Command("umount", mnt).CombinedOutput()
	require.NoError(t, err, "%s", out)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logf)
		if strings.Contains(string(b), "msg=unmounted") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A mount that fails writes its error line there too.
	_, stderr, code = vh5fsRun(t, file, filepath.Join(other, "missing"), "-o", "ro,logfile="+logf)
	require.Equal(t, 1, code)
	errLine := oneLine(t, stderr)
	require.Equal(t, "vh5fs: mount point "+filepath.Join(other, "missing")+": no such directory", errLine)

	b, err := os.ReadFile(logf)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 3, "%s", b)
	require.Regexp(t, `^time=\S+ level=INFO msg=mounted file=`+file+` mountpoint=`+mnt+` options="ro,logfile=`+logf+`" version=\S+ hdf5=\d+\.\d+\.\d+$`, lines[0])
	require.Regexp(t, `^time=\S+ level=INFO msg=unmounted mountpoint=`+mnt+`$`, lines[1])
	require.Equal(t, errLine, lines[2])

	// A request the daemon answers with an error is logged there, with the reason.
	dir := t.TempDir()
	gen, err := exec.Command(python(t), "py/make_plain_shapes.py", dir).CombinedOutput()
	require.NoError(t, err, "%s", gen)
	plain := filepath.Join(dir, "plain_shapes.h5")
	logf2 := filepath.Join(dir, "vh5fs.log")
	_, stderr, code = vh5fsRun(t, plain, mnt, "-o", "ro,logfile="+logf2)
	require.Equal(t, 0, code, stderr)
	_, err = os.Stat(filepath.Join(mnt, "external"))
	require.ErrorIs(t, err, syscall.EOPNOTSUPP)
	out, err = exec.Command("umount", mnt).CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err = os.ReadFile(logf2)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^time=\S+ level=WARN msg=unsupported err="/external: unsupported dataset: its raw data is in 1 external file\(s\)`, string(b))

	_, stderr, code = vh5fsRun(t, "mount", "-o", "logfile=relative.log", file, mnt)
	require.Equal(t, 2, code)
	require.Equal(t, `vh5fs: mount option "logfile": "relative.log" is not an absolute path`, oneLine(t, stderr))
}
