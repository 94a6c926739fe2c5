package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeInstall runs `make install DESTDIR=...` and checks what it installed: the binary
// with the version string it was built with, a man page that groff renders without a
// warning, bash completion, the licence. Then it mounts with `mount -t fuse.vh5fs` using the
// installed binary: mount(8) finds the helper only on /bin/sh's default PATH, so the test
// runs in a mount namespace of its own where DESTDIR's bin is bind-mounted over
// /usr/local/bin — the machine's /usr/local stays untouched.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	dest := t.TempDir()
	bin := filepath.Join(t.TempDir(), "vh5fs")
	const version = "9.8.7-installtest"
	out, err := exec.Command("make", "-C", "..", "--no-print-directory", "install",
		"DESTDIR="+dest, "BIN="+bin, "VERSION="+version).CombinedOutput()
	require.NoError(t, err, "make install: %s", out)

	prefix := filepath.Join(dest, "usr/local")
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{"bin/vh5fs", 0o755},
		{"share/man/man1/vh5fs.1", 0o644},
		{"share/bash-completion/completions/vh5fs", 0o644},
		{"share/doc/vh5fs/LICENSE", 0o644},
		{"share/doc/vh5fs/README.md", 0o644},
		{"share/doc/vh5fs/GUIDE.md", 0o644},
	} {
		st, err := os.Stat(filepath.Join(prefix, tc.path))
		require.NoError(t, err, tc.path)
		require.Equal(t, tc.mode, st.Mode().Perm(), tc.path)
	}

	installed := filepath.Join(prefix, "bin/vh5fs")
	out, err = exec.Command(installed, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `^vh5fs `+regexp.QuoteMeta(version)+`\nHDF5 \d+\.\d+\.\d+( \(built against \d+\.\d+\.\d+\))?\n$`, string(out))

	lic, err := os.ReadFile(filepath.Join(prefix, "share/doc/vh5fs/LICENSE"))
	require.NoError(t, err)
	require.Contains(t, string(lic), "BSD 3-Clause License")
	require.Contains(t, string(lic), "Copyright (c) 2026, the vh5fs authors")

	t.Run("man page", func(t *testing.T) {
		if _, err := exec.LookPath("groff"); err != nil {
			t.Skip("groff not installed (scripts/deps.sh installs groff-base)")
		}
		page := filepath.Join(prefix, "share/man/man1/vh5fs.1")
		out, err := exec.Command("groff", "-man", "-ww", "-z", page).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Empty(t, string(out), "groff warnings")
		text, err := exec.Command("groff", "-man", "-Tutf8", "-P-cbou", page).Output()
		require.NoError(t, err)
		// Every command and the options a user needs first are documented.
		for _, w := range []string{"vh5fs mount", "vh5fs log", "vh5fs ls", "vh5fs info", "vh5fs diff",
			"vh5fs fsck", "mount -t fuse.vh5fs", "commit_name=", "allow_other", "EXIT STATUS"} {
			require.Contains(t, strings.ReplaceAll(string(text), "\u2010", "-"), w)
		}
	})

	t.Run("bash completion", func(t *testing.T) {
		script := `source "$1"
complete -p vh5fs
COMP_WORDS=(vh5fs l); COMP_CWORD=1; _vh5fs; echo "first: ${COMPREPLY[*]}"
COMP_WORDS=(vh5fs mount -o ro,a); COMP_CWORD=3; _vh5fs; echo "opts: ${COMPREPLY[*]}"
COMP_WORDS=(vh5fs help f); COMP_CWORD=2; _vh5fs; echo "help: ${COMPREPLY[*]}"`
		cmd := exec.Command("bash", "-c", script, "bash",
			filepath.Join(prefix, "share/bash-completion/completions/vh5fs"))
		cmd.Dir = t.TempDir() // no file names among the words completed
		require.NoError(t, os.WriteFile(filepath.Join(cmd.Dir, "log.h5"), nil, 0o644))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, "complete -o filenames -F _vh5fs vh5fs\nfirst: log ls log.h5\nopts: ro,allow_other ro,at=\nhelp: fsck\n", string(out))
	})

	t.Run("mount -t fuse.vh5fs", func(t *testing.T) {
		requireMountHelper(t)
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("unshare not installed")
		}
		file, err := filepath.Abs("testdata/fixtures/basic_1d.h5")
		require.NoError(t, err)
		mnt := t.TempDir()
		// The daemon's cmdline names the executable mount.fuse3 found (processes may exit
		// while the loop looks); umount at exit even when a step fails, so no daemon
		// outlives the namespace's last shell.
		script := `set -eu
mount --bind "$1/usr/local/bin" /usr/local/bin
mount -t fuse.vh5fs "$2" "$3" -o ro
trap 'umount "$3"' EXIT
ls "$3/versions" | tr '\n' ' '; echo
od -A n -t d8 -v "$3/current/x" | tr -s ' \n' ' '; echo
for p in /proc/[0-9]*; do
  if [ "$(cat "$p/cmdline" 2>/dev/null | tr '\0' ' ')" = "/usr/local/bin/vh5fs mount -o ro,dev,suid $2 $3 " ]; then
    echo "daemon: $(readlink "$p/exe")"
  fi
done
grep -c " $3 " /proc/self/mountinfo`
		out, err := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
			dest, file, mnt).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, "v1 v2 v3 v4 \n 0 1 2 3 40 555 \ndaemon: /usr/local/bin/vh5fs\n1\n", string(out))
		require.Empty(t, mountTableLine(t, mnt), "the mount lived in the namespace only")
	})

	out, err = exec.Command("make", "-C", "..", "--no-print-directory", "uninstall", "DESTDIR="+dest).CombinedOutput()
	require.NoError(t, err, "make uninstall: %s", out)
	for _, p := range []string{"bin/vh5fs", "share/man/man1/vh5fs.1", "share/bash-completion/completions/vh5fs", "share/doc/vh5fs"} {
		_, err := os.Stat(filepath.Join(prefix, p))
		require.ErrorIs(t, err, os.ErrNotExist, "uninstall removes %s", p)
	}
}
