package tests

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/lifecycle"
)

// Deletions through a mount, one rmdir each: every rmdir writes its version's body and
// returns once it is durable; the mount reclaims the chunks of the whole run at once
// (fsnode/reclaim.go), and the file ends as versioned-hdf5's delete_versions of the set
// leaves it.

// TestBatchDeleteThroughMount removes each delete golden's versions with one rmdir each
// on a read-write mount with allow_delete: each version is gone from the mount once its
// rmdir returns, the data groups wait in the pending set, and after the unmount the whole
// file is versioned-hdf5's (conform.Files against the golden) with nothing pending.
func TestBatchDeleteThroughMount(t *testing.T) {
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	for _, d := range dels {
		if d.Commit != nil {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			t.Parallel()
			file := copyPath(t, d.Before)
			m := mount(t, file, "rw,allow_delete")
			for _, v := range d.Names {
				require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)), "rmdir %s", v)
				_, err := os.Stat(filepath.Join(m.Dir, "versions", v))
				require.ErrorIs(t, err, os.ErrNotExist, "%s is seen after its rmdir returned", v)
				m.logged(t, `msg="version deleted" version=`+v+` `)
			}
			names, err := os.ReadDir(filepath.Join(m.Dir, "versions"))
			require.NoError(t, err)
			for _, e := range names {
				require.NotContains(t, d.Names, e.Name())
			}
			target, err := os.Readlink(filepath.Join(m.Dir, "current"))
			require.NoError(t, err)
			require.Equal(t, "versions/"+d.CurrentAfter, target)
			m.unmount(t)
			require.NoError(t, conform.Files(file, d.After))
			_, err = os.Stat(lifecycle.PendingPath(file))
			require.ErrorIs(t, err, os.ErrNotExist, "nothing is left pending")
		})
	}
}

// TestBatchDeleteReclaimWaits: the reclaim runs once the deletions pause, while the mount
// goes on; it waits while a file is open for writing or a stage is saved (both record
// raw_data slots), saying so in the log, and runs once they are gone. A stage kept past
// the unmount keeps the set pending for the next mount, whose unmount reclaims it. (A
// stage made while nothing else holds the reclaim runs it first: TestBatchDeleteStage.)
func TestBatchDeleteReclaimWaits(t *testing.T) {
	const golden = "golden_delete_several"
	names := []string{"v2", "v4", "v5"}
	for _, tc := range []struct {
		name string
		// hold makes the reclaim wait and returns what lets it go; nil: nothing holds it.
		hold func(t *testing.T, mnt string) (release func())
		// pattern of the log line that says the reclaim waits
		waits string
	}{
		{"quiet", nil, ""},
		{"open for writing", func(t *testing.T, mnt string) func() {
			f, err := os.OpenFile(filepath.Join(mnt, "current", "x"), os.O_RDWR, 0)
			require.NoError(t, err)
			return func() { require.NoError(t, f.Close()) }
		}, `reclaim deferred while files are open for writing`},
		{"stage", func(t *testing.T, mnt string) func() {
			stageWhileHeld(t, mnt, "work")
			return func() { require.NoError(t, os.RemoveAll(filepath.Join(mnt, "stage", "work"))) }
		}, `reclaim deferred while stages are saved .* stages=work`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			file := copyPath(t, fixturePath(golden+"-before.h5"))
			want := fixturePath(golden + "-after.h5")
			m := mount(t, file, "rw,allow_delete")
			// Delete one version before the hold and the others after it: the hold comes
			// between deletions, as it would in use.
			require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", names[0])))
			var release func()
			if tc.hold != nil {
				release = tc.hold(t, m.Dir)
			}
			if tc.hold == nil { // files open for writing and saved stages refuse deletions
				for _, v := range names[1:] {
					require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)))
				}
			}
			if release != nil {
				m.logged(t, tc.waits)
				pending, err := lifecycle.Pending(file)
				require.NoError(t, err)
				require.NotEmpty(t, pending)
				release()
			}
			m.logged(t, `msg="deletions' chunks reclaimed" groups=`)
			_, err := os.Stat(lifecycle.PendingPath(file))
			require.ErrorIs(t, err, os.ErrNotExist)
			if tc.hold != nil {
				for _, v := range names[1:] {
					require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)))
				}
			}
			m.unmount(t)
			require.NoError(t, conform.Files(file, want))
		})
	}

	t.Run("stage past the unmount", func(t *testing.T) {
		t.Parallel()
		file := copyPath(t, fixturePath(golden+"-before.h5"))
		m := mount(t, file, "rw,allow_delete")
		require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "v2")))
		stageWhileHeld(t, m.Dir, "work")
		m.unmount(t)
		require.Contains(t, m.stderr.String(), "reclaim deferred while stages are saved")
		pending, err := lifecycle.Pending(file)
		require.NoError(t, err)
		require.NotEmpty(t, pending, "the set stays pending while the stage is saved")
		// The file reads as the deletion made it, unused chunks and all.
		ref := copyPath(t, fixturePath(golden+"-before.h5"))
		_, stderr, code := vh5fsRun(t, "delete", ref, "v2")
		require.Equal(t, 0, code, stderr)
		require.Equal(t, digestLines(t, ref), digestLines(t, file))

		m = mount(t, file, "rw,allow_delete")
		m.logged(t, `deletions' reclaim pending from an earlier mount`)
		require.NoError(t, os.RemoveAll(filepath.Join(m.Dir, "stage", "work")))
		for _, v := range []string{"v4", "v5"} {
			require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)))
		}
		m.unmount(t)
		require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")))
		_, err = os.Stat(lifecycle.PendingPath(file))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

// stageWhileHeld makes stage/NAME while a file open for writing holds the reclaim of the
// deletions just made (mkdir's own flush of it is then deferred, ErrBusy), and closes the
// file: the stage then holds the reclaim, as one an earlier mount left would.
func stageWhileHeld(t *testing.T, mnt, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(mnt, "current", "x"), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(mnt, "stage", name), 0o755))
	require.NoError(t, f.Close())
}

// TestBatchDeleteStage: a stage made right after rmdirs would hold their reclaim until it
// is committed or discarded (it records raw_data slots, which the reclaim moves), so mkdir
// reclaims first: nothing is pending once it returns, the stage is based on the file the
// reclaim left and commits on it, and after the rest of the deletions the versions the
// golden kept read as versioned-hdf5 left them.
func TestBatchDeleteStage(t *testing.T) {
	const golden = "golden_delete_several"
	file := copyPath(t, fixturePath(golden+"-before.h5"))
	m := mount(t, file, "rw,allow_delete")
	require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "v2")))
	pending, err := lifecycle.Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending, "the rmdir leaves its data groups pending")
	require.NoError(t, os.Mkdir(filepath.Join(m.Dir, "stage", "work"), 0o755))
	_, err = os.Stat(lifecycle.PendingPath(file))
	require.ErrorIs(t, err, os.ErrNotExist, "mkdir returned before the reclaim")
	m.logged(t, `msg="deletions' chunks reclaimed" groups=`)
	require.NotContains(t, m.stderr.String(), "reclaim deferred while stages are saved")
	require.NoError(t, os.RemoveAll(filepath.Join(m.Dir, "stage", "work")))
	for _, v := range []string{"v4", "v5"} {
		require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)))
	}
	m.unmount(t)
	require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")))
	_, err = os.Stat(lifecycle.PendingPath(file))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestBatchDeleteKilledThenFinished: each delete golden's versions removed by rmdirs, and
// the daemon killed (SIGKILL) before its reclaim, which a file open for writing holds:
// the file reads as the deletion made it, and plain fsck passes, naming the pending set in
// one line. `vh5fs compact` or `vh5fs fsck --repair` then reclaims it: the file is the one
// versioned-hdf5's delete_versions of the set made (conform.Files), nothing pending.
func TestBatchDeleteKilledThenFinished(t *testing.T) {
	dels, err := fixture.Deletes()
	require.NoError(t, err)
	finishers := map[string][]string{"compact": {"compact"}, "fsck --repair": {"fsck", "--repair"}}
	for _, d := range dels {
		if d.Commit != nil {
			continue
		}
		for name, args := range finishers {
			t.Run(d.Name+"/"+name, func(t *testing.T) {
				t.Parallel()
				file := copyPath(t, d.Before)
				m := mount(t, file, "rw,allow_delete")
				for _, v := range d.Names {
					require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)), "rmdir %s", v)
				}
				hold, err := os.OpenFile(anyDataset(t, filepath.Join(m.Dir, "current")), os.O_RDWR, 0)
				require.NoError(t, err)
				pending, err := lifecycle.Pending(file)
				require.NoError(t, err)
				m.signal(t, syscall.SIGKILL)
				m.wait(t)
				hold.Close() // the daemon is gone: an error, nothing to commit
				require.NoError(t, exec.Command("fusermount3", "-uz", m.Dir).Run())
				require.NotContains(t, m.stderr.String(), "chunks reclaimed", "killed before the reclaim")

				// Before the repair: the deletion as h5py reads it, and a pending set fsck names.
				again, err := lifecycle.Pending(file)
				require.NoError(t, err)
				require.Equal(t, pending, again)
				require.Equal(t, digestLines(t, d.After), digestLines(t, file))
				out, stderr, code := vh5fsRun(t, "fsck", file)
				require.Equal(t, 0, code, "fsck: %s%s", out, stderr)
				if len(pending) > 0 {
					require.Contains(t, out, fmt.Sprintf("%s: pending: %d data group", file, len(pending)))
					require.Contains(t, out, strings.Join(pending, ", "))
				} else {
					require.NotContains(t, out, "pending")
				}

				out, stderr, code = vh5fsRun(t, append(args, file)...)
				require.Equal(t, 0, code, "%s: %s%s", name, out, stderr)
				if len(pending) > 0 {
					require.Contains(t, out, file+": reclaimed the chunks of deleted versions pending in ")
				}
				require.NoError(t, conform.Files(file, d.After))
				_, err = os.Stat(lifecycle.PendingPath(file))
				require.ErrorIs(t, err, os.ErrNotExist, "nothing left pending")
				out, stderr, code = vh5fsRun(t, "fsck", file)
				require.Equal(t, 0, code, "fsck: %s%s", out, stderr)
				require.NotContains(t, out, "pending")
			})
		}
	}
}

// anyDataset is the first dataset file that takes writes under dir (a symbolic link followed), in
// name order.
func anyDataset(t *testing.T, dir string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	var found string
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		// Files vh5fs reads through libhdf5 alone take no writes.
		if info, err := e.Info(); err == nil && info.Mode().Perm()&0o200 != 0 {
			found = p
			return filepath.SkipAll
		}
		return nil
	}))
	require.NotEmpty(t, found, "no dataset under %s", dir)
	return found
}

// TestBatchDeleteCLIReclaims: a set left pending (a stage kept it past the unmount) is
// reclaimed by the next `vh5fs delete`, with the versions it names: the file is the one
// delete_versions of them all makes.
func TestBatchDeleteCLIReclaims(t *testing.T) {
	const golden = "golden_delete_several"
	file := copyPath(t, fixturePath(golden+"-before.h5"))
	m := mount(t, file, "rw,allow_delete")
	require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", "v2")))
	stageWhileHeld(t, m.Dir, "work")
	m.unmount(t)
	pending, err := lifecycle.Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending)
	m = mount(t, file, "rw")
	require.NoError(t, os.RemoveAll(filepath.Join(m.Dir, "stage", "work")))
	// A mount without allow_delete reclaims at unmount too; stop it before that by
	// killing it: the set stays pending for the CLI.
	m.signal(t, syscall.SIGKILL)
	m.wait(t)
	exec.Command("fusermount3", "-uz", m.Dir).Run()
	pending, err = lifecycle.Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending)
	_, stderr, code := vh5fsRun(t, "delete", file, "v4", "v5")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")))
	_, err = os.Stat(lifecycle.PendingPath(file))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestKillDuringBatchDelete kills a read-write mount with allow_delete just before each
// system call of its syncs in turn (h5.SyncKillEnv), until one run completes: the syncs
// of three rmdirs' bodies, then the reclaim's, at unmount. After each kill, before any
// repair, h5py reads the file as the original or as the deletion of the first k of the
// versions (k at least the number of rmdirs that returned), or, inside a guarded apply
// (the file marked, a whole journal beside it), finds no HDF5 file; never a version half
// changed. `vh5fs fsck --repair` then leaves one of those states, with every rmdir that
// returned and the one whose journal was whole; a read-write mount that deletes the rest
// ends in versioned-hdf5's file (conform.Files against the golden), nothing pending.
func TestKillDuringBatchDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts the file once per system call of the syncs")
	}
	const golden = "golden_delete_several"
	names := []string{"v2", "v4", "v5"}
	base := fixturePath(golden + "-before.h5")
	// states[k]: how h5py reads the file once the first k versions are deleted.
	states := [][]string{digestLines(t, base)}
	for k := 1; k <= len(names); k++ {
		ref := copyPath(t, base)
		_, stderr, code := vh5fsRun(t, append([]string{"delete", ref}, names[:k]...)...)
		require.Equal(t, 0, code, stderr)
		states = append(states, digestLines(t, ref))
	}
	stateOf := func(lines []string) int {
		for k, s := range states {
			if slices.Equal(s, lines) {
				return k
			}
		}
		return -1
	}

	kills, journals, hidden := 0, 0, 0
	for n := 1; ; n++ {
		file := copyPath(t, base)
		mnt := t.TempDir()
		m := startMount(t, mnt, vh5fsArgs(file, mnt, "rw,allow_delete"), fmt.Sprintf("%s=%d", h5.SyncKillEnv, n))
		returned := 0
		for _, v := range names {
			if err := syscall.Rmdir(filepath.Join(mnt, "versions", v)); err != nil {
				break
			}
			returned++
		}
		if !m.endKillable(t, returned == len(names)) {
			require.Equal(t, len(names), returned, "run %d, not killed", n)
			require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")), "run %d, not killed", n)
			break
		}
		kills++
		st, err := os.Stat(file + h5.JournalSuffix)
		journal := err == nil && st.Size() > 0
		if journal {
			journals++
		}
		before := -1
		if h5.GuardMarked(file) {
			require.True(t, journal, "kill %d: the file is marked, yet no journal can complete it", n)
			hidden++
		} else {
			lines, failed := committedLines(t, file)
			require.Empty(t, failed, "kill %d: h5py cannot read the file before the repair", n)
			before = stateOf(lines)
			require.GreaterOrEqual(t, before, 0, "kill %d: the file reads as no deletion left it: %v", n, lines)
			require.GreaterOrEqual(t, before, returned, "kill %d: a version whose rmdir returned is back", n)
		}
		out, err := exec.Command(vh5fsBin, "fsck", "--repair", file).CombinedOutput()
		require.NoError(t, err, "kill %d: fsck --repair: %s", n, out)
		_, err = os.Stat(file + h5.JournalSuffix)
		require.ErrorIs(t, err, os.ErrNotExist)
		after := stateOf(digestLines(t, file))
		require.GreaterOrEqual(t, after, max(before, returned), "kill %d, after repair", n)
		require.LessOrEqual(t, after, min(returned+1, len(names)), "kill %d, after repair", n)
		if journal && returned < len(names) {
			require.Equal(t, returned+1, after, "kill %d: a body past its commit point was not completed", n)
		}

		// The rest of the run, on a mount of the repaired file: the pending set left by
		// the kill is reclaimed with it.
		m = mount(t, file, "rw,allow_delete")
		for _, v := range names[after:] {
			require.NoError(t, syscall.Rmdir(filepath.Join(m.Dir, "versions", v)), "kill %d", n)
		}
		m.unmount(t)
		require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")), "kill %d, once the rest is deleted", n)
		_, err = os.Stat(lifecycle.PendingPath(file))
		require.ErrorIs(t, err, os.ErrNotExist, "kill %d", n)
	}
	t.Logf("%d kills over the syncs of %d rmdirs and the reclaim (%d with a whole journal, %d of them inside a guarded apply, which h5py refused as not HDF5): every other read before the repair, and every repair, left the file as the deletion of a prefix of the run, never losing a returned rmdir",
		kills, len(names), journals, hidden)
	require.Greater(t, kills, 4*(len(names)+1), "the kills cover every sync's steps")
	require.Positive(t, hidden, "kills fall inside the guarded applies")
}
