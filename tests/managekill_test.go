package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
)

// TestKillDuringManage kills a read-write mount just before each system call of the sync
// of a rename (mv versions/v3 versions/r3), of a revert (setfattr user.vh5fs.current) and of
// a tag (ln -s versions/v3 MNT/tags/release-1) and of a branch (mkdir MNT/branches/dev) in
// turn (h5.SyncKillEnv), until one run
// completes. After each kill, before any repair,
// h5py reads the file as the original or as the changed one (every version, its parent,
// its data, current_version, the names), or, for a kill inside a rename's guarded apply (the file
// marked, a whole journal beside it), finds no HDF5 file: never names half changed.
// `vh5fs fsck --repair` then leaves the file old (no journal) or changed (a whole journal:
// the kill came after the commit point).
func TestKillDuringManage(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts the file once per system call of the sync")
	}
	for _, tc := range []struct {
		name    string
		op      func(mnt string) error
		guarded bool // its sync is guarded (a revert writes one attribute in place)
	}{
		{"rename", func(mnt string) error {
			return os.Rename(filepath.Join(mnt, "versions", "v3"), filepath.Join(mnt, "versions", "r3"))
		}, true},
		{"revert", func(mnt string) error { return xattr.Set(mnt, "user.vh5fs.current", []byte("v2")) }, false},
		{"tag", func(mnt string) error { return os.Symlink("versions/v3", filepath.Join(mnt, "tags", "release-1")) }, false},
		{"branch", func(mnt string) error { return os.Mkdir(filepath.Join(mnt, "branches", "dev"), 0o755) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := fixturePath("golden_delete_middle-before.h5")
			state := func(file string) ([]string, []string) {
				lines, failed := committedLines(t, file)
				return append(lines, "current "+currentOf(t, file), "names "+namesOf(t, file)), failed
			}
			old, _ := state(base)
			ref := copyPath(t, base)
			_, killed := manageOnce(t, ref, "", tc.op)
			require.False(t, killed)
			changed, failed := state(ref)
			require.Empty(t, failed)
			require.NotEqual(t, old, changed, "the operation changes the file")

			kills, journals, hidden := 0, 0, 0
			for n := 1; ; n++ {
				file := copyPath(t, base)
				opErr, killed := manageOnce(t, file, fmt.Sprint(n), tc.op)
				if !killed {
					require.NoError(t, opErr, "run %d, not killed", n)
					lines, _ := state(file)
					require.Equal(t, changed, lines, "run %d, not killed", n)
					break
				}
				kills++
				st, err := os.Stat(file + h5.JournalSuffix)
				journal := err == nil && st.Size() > 0
				if journal {
					journals++
				}
				var lines []string
				if h5.GuardMarked(file) {
					require.True(t, journal, "kill %d: the file is marked, yet no journal can complete it", n)
					require.Error(t, opErr, "kill %d: the operation returned before its apply was whole", n)
					hidden++
				} else {
					var failed []string
					lines, failed = state(file)
					require.Empty(t, failed, "kill %d: h5py cannot read the file before the repair", n)
					require.True(t, slices.Equal(lines, old) || slices.Equal(lines, changed), "kill %d: the file reads neither old nor changed: %v", n, lines)
					if opErr == nil {
						require.Equal(t, changed, lines, "kill %d: the operation returned, so it is durable", n)
					}
				}
				out, err := exec.Command(vh5fsBin, "fsck", "--repair", file).CombinedOutput()
				require.NoError(t, err, "kill %d: fsck --repair: %s", n, out)
				lines, failed := state(file)
				require.Empty(t, failed)
				if journal {
					require.Equal(t, changed, lines, "kill %d, after repair: a journal past its commit point is rolled forward", n)
				} else {
					require.True(t, slices.Equal(lines, old) || slices.Equal(lines, changed), "kill %d, after repair: %v", n, lines)
				}
				_, err = os.Stat(file + h5.JournalSuffix)
				require.ErrorIs(t, err, os.ErrNotExist)
			}
			t.Logf("%d kills over the sync (%d with a whole journal, %d of them inside the guarded apply, which h5py refused as not HDF5): every other read before the repair, and every repair, left the file old or changed", kills, journals, hidden)
			require.Greater(t, kills, 5, "the kills cover the sync's steps")
			require.Equal(t, tc.guarded, hidden > 0, "kills inside a guarded apply")
		})
	}
}

// manageOnce mounts file read-write (killed at the kill-th system call of its syncs, if
// kill is not empty), runs op on the mount and unmounts: op's error, and whether the
// kill came.
func manageOnce(t *testing.T, file, kill string, op func(mnt string) error) (error, bool) {
	m := mountKillable(t, file, kill)
	opErr := op(m.Dir)
	if kill == "" {
		require.NoError(t, opErr)
		m.unmount(t)
		return nil, false
	}
	return opErr, m.endKillable(t, opErr == nil)
}

// currentOf is the current_version attribute of file, as h5py reads it.
func currentOf(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c",
		`import sys, h5py; print(h5py.File(sys.argv[1], "r")["_version_data/versions"].attrs["current_version"])`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// namesOf is the file's names attribute (package named) as h5py reads it, "none" if absent.
func namesOf(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("/usr/bin/python3", "-c",
		`import sys, h5py; print(h5py.File(sys.argv[1], "r")["_version_data/versions"].attrs.get("vh5fs_refs", "none"))`, file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}
