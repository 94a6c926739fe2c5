package tests

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The mount.fuse3 form. mount(8) drops the caller's PATH before running
// /sbin/mount.fuse3, which runs `/bin/sh -c 'SUBTYPE FILE MNT -o OPTS'`: the helper is
// found on sh's default PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin),
// not in a directory the test puts on PATH. So the test links the built binary into
// /usr/local/sbin under a name of its own (removed at the end), and also uses the forms
// that name the helper by absolute path ("fuse./abs/vh5fs" and "/abs/vh5fs#FILE").

func requireMountHelper(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mount(8) of a FUSE type needs root")
	}
	for _, p := range []string{"/sbin/mount.fuse3", "/usr/sbin/mount.fuse3"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Skip("mount.fuse3 not installed")
}

// installHelper links vh5fsBin into /usr/local/sbin as vh5fs-test-PID and returns the name.
func installHelper(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("vh5fs-test-%d", os.Getpid())
	link := filepath.Join("/usr/local/sbin", name)
	require.NoError(t, os.MkdirAll("/usr/local/sbin", 0o755))
	os.Remove(link)
	require.NoError(t, os.Symlink(vh5fsBin, link))
	t.Cleanup(func() { os.Remove(link) })
	return name
}

// daemonPid finds the background `vh5fs mount ... MNT` serving mnt.
func daemonPid(t *testing.T, mnt string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 3 && args[1] == "mount" && args[len(args)-1] == mnt {
			return pid
		}
	}
	t.Fatalf("no vh5fs daemon serving %s", mnt)
	return 0
}

// processGone reports whether pid has exited (gone, or a zombie awaiting its reaper).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

func mountTableLine(t *testing.T, mnt string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return line
		}
	}
	return ""
}

// checkServedAndUnmount reads the mount, then `umount`s it and requires the daemon to end.
func checkServedAndUnmount(t *testing.T, file, mnt string) {
	t.Helper()
	line := mountTableLine(t, mnt)
	require.NotEmpty(t, line, "not mounted")
	require.Contains(t, line, " - fuse.vh5fs "+file+" ")
	pid := daemonPid(t, mnt)
	require.Equal(t, []string{"v1", "v2", "v3", "v4"}, readDirNames(t, filepath.Join(mnt, "versions")))
	b, err := os.ReadFile(filepath.Join(mnt, "current", "x"))
	require.NoError(t, err)
	var want bytes.Buffer
	binary.Write(&want, binary.LittleEndian, []int64{0, 1, 2, 3, 40, 555})
	require.Equal(t, want.Bytes(), b)
	_, err = os.OpenFile(filepath.Join(mnt, "current", "x"), os.O_WRONLY, 0)
	require.Error(t, err, "ro mount")

	out, err := exec.Command("umount", mnt).CombinedOutput()
	require.NoError(t, err, "umount: %s", out)
	require.Empty(t, mountTableLine(t, mnt))
	deadline := time.Now().Add(10 * time.Second)
	for !processGone(pid) {
		require.True(t, time.Now().Before(deadline), "daemon %d still running after umount", pid)
		time.Sleep(20 * time.Millisecond)
	}
}

// unmountLater makes sure a failed test leaves nothing mounted.
func unmountLater(t *testing.T, mnt string) {
	t.Cleanup(func() {
		if mountTableLine(t, mnt) != "" {
			exec.Command("umount", mnt).Run()
		}
	})
}

// TestFstabMount mounts through mount(8) and mount.fuse3: `mount -t fuse.TYPE`, an fstab
// line (mount -T FSTAB MNT) and the absolute-path forms; each returns once the mount is
// ready, serves in the background and ends with `umount`.
func TestFstabMount(t *testing.T) {
	requireMountHelper(t)
	name := installHelper(t)
	file, err := filepath.Abs("testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		args func(mnt, fstab string) []string
	}{
		{"mount -t fuse.vh5fs", func(mnt, _ string) []string {
			return []string{"-t", "fuse." + name, file, mnt, "-o", "ro,allow_other"}
		}},
		{"fstab line", func(mnt, fstab string) []string {
			line := fmt.Sprintf("%s %s fuse.%s ro,allow_other,nofail,x-systemd.automount,_netdev 0 0\n", file, mnt, name)
			require.NoError(t, os.WriteFile(fstab, []byte(line), 0o644))
			return []string{"-T", fstab, mnt}
		}},
		{"fstab absolute helper", func(mnt, fstab string) []string {
			line := fmt.Sprintf("%s %s fuse.%s ro,noatime,nodev,nosuid 0 0\n", file, mnt, vh5fsBin)
			require.NoError(t, os.WriteFile(fstab, []byte(line), 0o644))
			return []string{"-T", fstab, mnt}
		}},
		{"type#source", func(mnt, _ string) []string {
			return []string{"-t", "fuse", vh5fsBin + "#" + file, mnt, "-o", "ro,default_permissions"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := t.TempDir()
			args := tc.args(mnt, filepath.Join(t.TempDir(), "fstab"))
			unmountLater(t, mnt)
			start := time.Now()
			out, err := exec.Command("mount", args...).CombinedOutput()
			require.NoError(t, err, "mount %v: %s", args, out)
			require.Less(t, time.Since(start), 10*time.Second)
			checkServedAndUnmount(t, file, mnt)
		})
	}

	t.Run("errors", func(t *testing.T) {
		mnt := t.TempDir()
		unmountLater(t, mnt)
		for _, tc := range []struct {
			source, opts, want string
		}{
			{"/nonexistent/run.h5", "ro", "vh5fs: /nonexistent/run.h5: no such file"},
			{file, "ro,bogus", `vh5fs: unknown mount option "bogus"`},
			{"/etc/hostname", "ro", "vh5fs: /etc/hostname: not an HDF5 file"},
		} {
			out, err := exec.Command("mount", "-t", "fuse."+name, tc.source, mnt, "-o", tc.opts).CombinedOutput()
			require.Error(t, err)
			require.Contains(t, string(out), tc.want)
			require.Empty(t, mountTableLine(t, mnt))
		}
	})
}

// TestFstabHelperForm runs the helper form directly, as mount.fuse3 does, with a relative
// FILE: it returns 0 once the mount is live, the daemon keeps serving, umount ends it.
// Errors come back from the daemon as the one line it would have printed.
func TestFstabHelperForm(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("umount(8) of a FUSE mount needs root")
	}
	mnt := t.TempDir()
	unmountLater(t, mnt)
	cmd := exec.Command(vh5fsBin, "testdata/fixtures/basic_1d.h5", mnt, "-o", "ro,dev,suid")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, stderr.String())
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("helper did not return (does the daemon hold its stdout/stderr?)")
	}
	require.Empty(t, stderr.String())
	file, err := filepath.Abs("testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	checkServedAndUnmount(t, file, mnt)

	busy := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(busy, "x"), nil, 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"testdata/fixtures/basic_1d.h5", busy, "-o", "ro"}, 1, "vh5fs: mount point " + busy + ": not empty"},
		{[]string{"testdata/extra/data_version_3.h5", mnt, "-o", "ro"}, 1, "data_version_3.h5: unsupported data_version 3"},
		{[]string{"testdata/fixtures/basic_1d.h5", mnt, "-o", "frob"}, 2, `unknown mount option "frob"`},
		{[]string{"testdata/fixtures/basic_1d.h5", mnt, "extra"}, 2, "expected FILE MOUNTPOINT"},
	} {
		out, errOut, code := vh5fsRun(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s%s", tc.args, out, errOut)
		first, _, _ := strings.Cut(errOut, "\n")
		require.Contains(t, first, tc.want)
		require.True(t, strings.HasPrefix(first, "vh5fs: "), first)
		require.Empty(t, mountTableLine(t, mnt))
	}
}
