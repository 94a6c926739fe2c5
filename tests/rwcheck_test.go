package tests

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nobodyWorld is a directory from which tests mount as user nobody: vh5fs, a FUSE device
// node anyone may open (bound over /dev/fuse in the test's mount namespace, so that the
// machine's own stays as it is) and a fuse.conf without user_allow_other (bound over
// /etc/fuse.conf there).
type nobodyWorld struct{ dir, bin string }

func newNobodyWorld(t *testing.T) nobodyWorld {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to set up the mount namespace")
	}
	for _, tool := range []string{"unshare", "setpriv", "fusermount3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	dir, err := os.MkdirTemp("", "vh5fs-nobody")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	w := nobodyWorld{dir: dir, bin: filepath.Join(dir, "vh5fs")}
	copyFile(t, vh5fsBin, w.bin)
	require.NoError(t, os.Chmod(w.bin, 0o755))
	if out, err := exec.Command("mknod", "-m", "0666", filepath.Join(dir, "fuse"), "c", "10", "229").CombinedOutput(); err != nil {
		t.Skipf("cannot make a FUSE device node: %v: %s", err, out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fuse.conf"), []byte("# no user_allow_other\n"), 0o644))
	return w
}

// nobodyScript runs, in a mount namespace of its own, SETUP as root in $WORLD, then the
// command as nobody (as root when AS=root), and unmounts MNT whatever happened.
const nobodyScript = `set -e
mount --bind "$WORLD/fuse" /dev/fuse
[ ! -e /etc/fuse.conf ] || mount --bind "$WORLD/fuse.conf" /etc/fuse.conf
cd "$WORLD"
eval "$SETUP"
set +e
as=""
[ "$AS" = root ] || as="setpriv --reuid=65534 --regid=65534 --clear-groups"
timeout -s INT 30 $as "$@"
rc=$?
umount -l "$MNT" 2>/dev/null
exit $rc`

// run runs argv as nobody (or root) after setup, and returns its stdout, stderr and exit
// status.
func (w nobodyWorld) run(t *testing.T, asRoot bool, setup, mnt string, argv ...string) (string, string, int) {
	t.Helper()
	as := "nobody"
	if asRoot {
		as = "root"
	}
	cmd := exec.Command("unshare", append([]string{"-m", "--propagation", "private", "sh", "-c", nobodyScript, "sh"}, argv...)...)
	cmd.Env = append(os.Environ(), "WORLD="+w.dir, "SETUP="+setup, "MNT="+mnt, "AS="+as)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v", err)
		code = exit.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// snapshot is every file under dir, its mode and its bytes' SHA-256, to show that nothing
// changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	require.NoError(t, filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[rel] += fmt.Sprintf(" %d bytes, sha256 %x", len(b), sha256.Sum256(b))
		}
		return nil
	}))
	return files
}

// TestReadWriteChecks: a read-write mount that could not commit is refused before it
// opens the file, with one line saying what is missing and how to fix it, and the file's
// directory is left exactly as it was (no bytes appended, no journal, no stages). The
// mounts run as nobody (root may write anything but a read-only filesystem), in the
// foreground and the background (fstab) form.
func TestReadWriteChecks(t *testing.T) {
	w := newNobodyWorld(t)
	const roFS = `mkdir ro; mount -t tmpfs -o size=4m,mode=0777 tmpfs ro; cp data/data.h5 ro/; chmod 0666 ro/data.h5; mount -o remount,ro ro`
	unwritableDir := "vh5fs: {file}: directory {dir}/data not writable by uid 65534: a read-write mount writes its " +
		"commit journal (data.h5.vh5fs-journal) and stages (.data.h5.vh5fs-stages) beside the file; make the directory " +
		"writable, move the file to one that is, or mount read-only (-o ro)"
	unwritableFile := "vh5fs: {file}: not writable by uid 65534 (mode 0644, owner uid 0): a read-write mount writes " +
		"new versions into the file; make it writable (chmod, chown), or mount read-only (-o ro)"
	unwritableStages := "vh5fs: {file}: stages directory {dir}/data/.data.h5.vh5fs-stages not writable by uid 65534: " +
		"a read-write mount keeps its stages there; make it writable, or mount read-only (-o ro)"
	readOnlyFS := "vh5fs: {dir}/ro/data.h5: its filesystem (tmpfs, mounted at {dir}/ro) is read-only: a read-write " +
		"mount writes new versions into the file; remount the filesystem read-write, or mount read-only (-o ro)"
	fg := []string{"mount", "-o", "rw", "{file}", "{mnt}"}
	bg := []string{"{file}", "{mnt}", "-o", "rw"}
	for _, tc := range []struct {
		name                         string
		dirMode, fileMode, stageMode os.FileMode // stageMode 0: no stages directory
		asRoot                       bool
		setup                        string   // shell, as root in the namespace, in {dir}
		args                         []string // {file} is {dir}/data/data.h5, {mnt} the mount point
		want                         string
	}{
		{"unwritable directory", 0o755, 0o666, 0, false, "", fg, unwritableDir},
		{"unwritable directory, background form", 0o755, 0o666, 0, false, "", bg, unwritableDir},
		{"unwritable file", 0o777, 0o644, 0, false, "", fg, unwritableFile},
		{"unwritable file, background form", 0o777, 0o644, 0, false, "", bg, unwritableFile},
		{"unwritable stages directory", 0o777, 0o666, 0o755, false, "", fg, unwritableStages},
		{"read-only filesystem", 0o777, 0o666, 0, false, roFS, []string{"mount", "-o", "rw", "{dir}/ro/data.h5", "{mnt}"}, readOnlyFS},
		{"read-only filesystem, root", 0o777, 0o666, 0, true, roFS, []string{"mount", "-o", "rw", "{dir}/ro/data.h5", "{mnt}"}, readOnlyFS},
		{"read-only filesystem, background form", 0o777, 0o666, 0, false, roFS, []string{"{dir}/ro/data.h5", "{mnt}", "-o", "rw"}, readOnlyFS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(w.dir, "case")
			require.NoError(t, err)
			require.NoError(t, os.Chmod(dir, 0o755))
			data, mnt := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
			require.NoError(t, os.Mkdir(mnt, 0o777))
			require.NoError(t, os.Chmod(mnt, 0o777))
			require.NoError(t, os.Mkdir(data, 0o755))
			file := filepath.Join(data, "data.h5")
			copyFile(t, fixturePath("basic_1d.h5"), file)
			require.NoError(t, os.Chmod(file, tc.fileMode))
			if tc.stageMode != 0 {
				stages := filepath.Join(data, ".data.h5.vh5fs-stages")
				require.NoError(t, os.Mkdir(stages, 0o700))
				require.NoError(t, os.Chmod(stages, tc.stageMode))
			}
			require.NoError(t, os.Chmod(data, tc.dirMode))
			before := snapshot(t, data)

			expand := strings.NewReplacer("{file}", file, "{dir}", dir, "{mnt}", mnt).Replace
			args := make([]string, len(tc.args))
			for i, a := range tc.args {
				args[i] = expand(a)
			}
			stdout, stderr, code := w.run(t, tc.asRoot, "cd "+dir+"; "+tc.setup, mnt, append([]string{w.bin}, args...)...)
			require.Equal(t, 1, code, "stdout %q stderr %q", stdout, stderr)
			require.Equal(t, expand(tc.want), oneLine(t, stderr))
			require.Equal(t, before, snapshot(t, data), "the file and its directory are untouched")
		})
	}
}

// TestReadWriteChecksPass: a read-write mount as a user who may write the file and its
// directory passes the checks and commits.
func TestReadWriteChecksPass(t *testing.T) {
	w := newNobodyWorld(t)
	dir, err := os.MkdirTemp(w.dir, "data")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o777))
	file, mnt := filepath.Join(dir, "data.h5"), filepath.Join(dir, "mnt")
	copyFile(t, fixturePath("basic_1d.h5"), file)
	require.NoError(t, os.Chmod(file, 0o666))
	require.NoError(t, os.Mkdir(mnt, 0o777))
	require.NoError(t, os.Chmod(mnt, 0o777))

	// The whole session as nobody: mount in the background, commit a write, unmount.
	script := `"$0" "$1" "$2" -o rw,commit_name=by-nobody || exit 1
/usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); os.pwrite(fd, bytes(8), 0); os.fsync(fd); os.close(fd)' "$2/current/x" || exit 2
fusermount3 -u "$2"`
	stdout, stderr, code := w.run(t, false, "", mnt, "sh", "-c", script, w.bin, file, mnt)
	require.Equal(t, 0, code, "stdout %q stderr %q", stdout, stderr)
	// The daemon lets go of the file's lock as it exits, just after the unmount.
	require.Eventually(t, func() bool {
		out, _, code := vh5fsRun(t, "log", "--oneline", "-n", "1", file)
		return code == 0 && strings.HasPrefix(out, "by-nobody ")
	}, 10*time.Second, 50*time.Millisecond)
}

// TestBackgroundFusermountReason: when fusermount3 refuses a mount, the background form's
// one line gives fusermount3's own reason (the daemon's standard error goes nowhere), as
// the foreground form does: here allow_other from a user while /etc/fuse.conf lacks
// user_allow_other.
func TestBackgroundFusermountReason(t *testing.T) {
	w := newNobodyWorld(t)
	fusermount, err := exec.LookPath("fusermount3")
	require.NoError(t, err)
	dir, err := os.MkdirTemp(w.dir, "data")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	file, mnt := filepath.Join(dir, "data.h5"), filepath.Join(dir, "mnt")
	copyFile(t, fixturePath("basic_1d.h5"), file)
	require.NoError(t, os.Chmod(file, 0o644))
	require.NoError(t, os.Mkdir(mnt, 0o777))
	require.NoError(t, os.Chmod(mnt, 0o777))
	want := "vh5fs: mount " + mnt + ": " + fusermount + ": option allow_other only allowed if 'user_allow_other' is set in /etc/fuse.conf"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"background", []string{file, mnt, "-o", "ro,allow_other"}},
		{"foreground", []string{"mount", "-o", "allow_other", file, mnt}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := w.run(t, false, "", mnt, append([]string{w.bin}, tc.args...)...)
			require.Equal(t, 1, code, "stdout %q stderr %q", stdout, stderr)
			require.Equal(t, want, oneLine(t, stderr))
		})
	}
}
