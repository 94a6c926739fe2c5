package tests

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
)

// TestKillDuringPassthroughWrite kills a read-write mount during a replacing write through
// passthrough (O_TRUNC: the kernel writes a staging file in the cache directory, which the
// commit loads): before the commit (the bytes are in the staging file only), at every
// system call of the commit's sync in turn (h5.SyncKillEnv, as TestKillDuringSync), and
// after it. Each time, before any repair, h5py reads every version it lists as committed
// exactly as the original file or the one commit wrote it, and a commit whose fsync
// returned is there; then fsck --repair completes a commit past its commit point; the next
// mount removes the staging file the killed one left.
func TestKillDuringPassthroughWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts the file a few dozen times")
	}
	if os.Geteuid() != 0 {
		t.Skip("passthrough needs CAP_SYS_ADMIN")
	}
	base := makeVersioned(t, "--shape", "65536", "--chunks", "256", "--gzip")
	before, _, failed := committedState(t, base)
	require.Empty(t, failed)
	rng := rand.New(rand.NewSource(52))
	content := make([]byte, 65536*8)
	rng.Read(content)
	for i := 7; i < len(content); i += 8 {
		content[i] &= 0x3f // finite float64s
	}
	// The reference: the commit with no kill.
	file := copyPath(t, base)
	synced, killed := ptReplace(t, file, t.TempDir(), content, "", false)
	require.True(t, synced)
	require.False(t, killed)
	want := newVersions(t, before, digestLines(t, file))
	require.Len(t, want, 1)

	// check reads the file before and after a repair; synced: the fsync returned, so the
	// commit must be there.
	check := func(t *testing.T, file, what string, synced bool) {
		t.Helper()
		lines, _, failed := committedState(t, file)
		// A journal written whole records a commit past its commit point; an empty one, none.
		st, err := os.Stat(file + h5.JournalSuffix)
		journal := err == nil && st.Size() > 0
		if !journal {
			require.Empty(t, failed, "%s: no journal, yet h5py cannot read the file", what)
		}
		seen := checkVersions(t, before, want, lines, what+", before repair")
		if synced {
			require.Equal(t, 1, seen, "%s: the commit whose fsync returned is not there", what)
		}
		out, err := exec.Command(vh5fsBin, "fsck", "--repair", file).CombinedOutput()
		require.NoError(t, err, "%s: fsck --repair: %s", what, out)
		lines, _, failed = committedState(t, file)
		require.Empty(t, failed, "%s: after repair", what)
		after := checkVersions(t, before, want, lines, what+", after repair")
		require.GreaterOrEqual(t, after, seen, "%s: the repair lost a version", what)
		if journal {
			require.Equal(t, 1, after, "%s: a commit past its commit point was not completed", what)
		}
	}
	// cleaned requires the next mount with the cache directory to remove the staging file.
	cleaned := func(t *testing.T, file, cache string) {
		t.Helper()
		require.NotEmpty(t, stagingFiles(t, cache), "the killed mount left its staging file")
		m := mount(t, file, "ro,cache="+cache)
		require.Empty(t, stagingFiles(t, cache), "the next start removes it")
		m.unmount(t)
	}

	t.Run("before the commit", func(t *testing.T) {
		file, cache := copyPath(t, base), t.TempDir()
		synced, killed := ptReplace(t, file, cache, content, "", true)
		require.False(t, synced)
		require.True(t, killed)
		check(t, file, "killed before the commit", false)
		lines := digestLines(t, file)
		require.ElementsMatch(t, before, lines, "only the uncommitted write is lost")
		cleaned(t, file, cache)
	})
	t.Run("during the commit", func(t *testing.T) {
		kills := 0
		for n := 1; ; n++ {
			file, cache := copyPath(t, base), t.TempDir()
			synced, killed := ptReplace(t, file, cache, content, fmt.Sprint(n), false)
			if !killed {
				break // n is past the last system call of the sync
			}
			kills++
			check(t, file, fmt.Sprintf("kill %d", n), synced)
			cleaned(t, file, cache)
		}
		require.Greater(t, kills, 5, "the kills cover the sync's steps")
	})
	t.Run("after the commit", func(t *testing.T) {
		file, cache := copyPath(t, base), t.TempDir()
		synced, killed := ptReplace(t, file, cache, content, "", true, true)
		require.True(t, synced)
		require.True(t, killed)
		check(t, file, "killed after the commit", true)
		cleaned(t, file, cache)
	})
}

// ptReplace mounts file read-write with its cache in cache (the daemon killed at the
// kill-th system call of its syncs if kill is not empty), replaces current/data with
// content through an O_TRUNC open, which must be passthrough, and fsyncs it, unless
// killFirst: then SIGKILL comes before the fsync, or right after it with killAfter. It
// reports whether the fsync returned success and whether the daemon was killed.
func ptReplace(t *testing.T, file, cache string, content []byte, kill string, killFirst bool, killAfter ...bool) (synced, killed bool) {
	t.Helper()
	mnt := t.TempDir()
	var env []string
	if kill != "" {
		env = []string{h5.SyncKillEnv + "=" + kill}
	}
	m := startMount(t, mnt, vh5fsArgs(file, mnt, "rw,cache="+cache), env...)
	f, err := os.OpenFile(filepath.Join(mnt, "current", "data"), os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	require.Len(t, stagingFiles(t, cache), 1, "the open is passthrough")
	_, err = f.Write(content)
	require.NoError(t, err)
	if killFirst && len(killAfter) == 0 {
		require.NoError(t, m.cmd.Process.Kill())
		f.Close()
		return false, m.endKillable(t, false)
	}
	synced = f.Sync() == nil
	if killFirst {
		require.True(t, synced)
		require.NoError(t, m.cmd.Process.Kill())
		f.Close()
		return synced, m.endKillable(t, false)
	}
	f.Close()
	return synced, m.endKillable(t, synced)
}
