package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
)

// TestKillDuringSync kills a read-write mount at every system call of its commits' syncs in
// turn: the daemon sends itself SIGKILL just before the N-th write, fsync, creation or
// removal of a file its syncs make (h5.SyncKillEnv), for N = 1, 2, ... until three commits
// in a row complete. After each kill, before anything repairs the file, h5py opens it as
// any program would, and every version it lists as committed must read exactly as one of
// the commits (or the original file) wrote it, the commits present a prefix of the three;
// then `vh5fs fsck --repair`, after which the same holds, with every commit whose sync had
// passed its commit point, and fsck finds nothing wrong. The head the commits move
// (current_version, or a branch) names the newest commit present whenever the file is
// whole (no journal to apply), and the other heads stay.
//
// Changes: one chunk; rows past the end (the dataset and raw_data grow); many chunks (the
// raw_data chunk index splits its nodes); one chunk written through branches/dev/.
func TestKillDuringSync(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts the file a few hundred times")
	}
	base := makeVersioned(t, "--shape", "65536", "--chunks", "256", "--gzip")
	onBranch := copyPath(t, base)
	_, stderr, code := vh5fsRun(t, "branch", onBranch, "dev")
	require.Zero(t, code, stderr)
	const rows = 65536
	for _, tc := range []struct {
		name      string
		base      string
		branch    string // the commits' branch; "": current
		off, size int    // in elements
	}{
		{"one chunk", base, "", 1000, 100},
		{"growing", base, "", rows - 50, 400},
		{"many chunks", base, "", 300, 256 * 150},
		{"on a branch", onBranch, "dev", 1000, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			killDuringSync(t, tc.base, tc.branch, tc.off, tc.size)
		})
	}
}

// killDuringSync is TestKillDuringSync for one kind of change, size elements at off,
// committed on branch ("": on current).
func killDuringSync(t *testing.T, base, branch string, off, size int) {
	const commits = 3
	before, heads, failed := committedState(t, base)
	require.Empty(t, failed)
	require.NotEmpty(t, heads)
	baseCurrent := strings.TrimPrefix(heads[0], "current ")
	// The reference: the commits with no kill, one version each.
	file := copyPath(t, base)
	done, _ := commitBands(t, file, branch, off, size, commits, "")
	require.Equal(t, commits, done)
	want := newVersions(t, before, digestLines(t, file))
	require.Len(t, want, commits)

	kills, apply, unreadable := 0, 0, 0
	for n := 1; ; n++ {
		file := copyPath(t, base)
		done, killed := commitBands(t, file, branch, off, size, commits, fmt.Sprint(n))
		if !killed {
			break // n is past the last system call of the syncs
		}
		kills++
		// A journal written whole (a kill loses no page the process wrote) records a commit
		// past its commit point; one created but not yet written records none.
		st, err := os.Stat(file + h5.JournalSuffix)
		journal := err == nil && st.Size() > 0
		if journal {
			apply++
		}
		// Before any repair: h5py reads every version it shows as committed as written.
		// Within the apply (a whole journal beside the file) the body may be half written,
		// and h5py may fail to open a new version; nothing it reads may be wrong.
		lines, heads, failed := committedState(t, file)
		if failed != nil {
			require.True(t, journal, "kill %d (commit %d): no journal, yet h5py cannot read the file: %s", n, done+1, failed)
			unreadable++
			t.Logf("kill %d (commit %d, in the apply): h5py: %s", n, done+1, failed)
		}
		what := fmt.Sprintf("kill %d, before repair", n)
		seen := checkVersions(t, before, want, lines, what)
		require.GreaterOrEqual(t, seen, done, "kill %d: a commit whose fsync returned is not committed", n)
		if !journal {
			checkHeads(t, heads, lines, want, seen, baseCurrent, branch, what)
		}

		out, err := exec.Command(vh5fsBin, "fsck", "--repair", file).CombinedOutput()
		require.NoError(t, err, "kill %d: fsck --repair: %s", n, out)
		after := seen
		if journal { // else the repair had nothing to complete: h5py read the file whole above
			lines, heads, failed = committedState(t, file)
			require.Empty(t, failed, "kill %d: after repair", n)
			what = fmt.Sprintf("kill %d, after repair", n)
			after = checkVersions(t, before, want, lines, what)
			checkHeads(t, heads, lines, want, after, baseCurrent, branch, what)
		}
		require.GreaterOrEqual(t, after, seen, "kill %d: the repair lost a version h5py had read as committed", n)
		if journal {
			require.Equal(t, min(done+1, commits), after, "kill %d: a commit past its commit point was not completed", n)
		}
		require.LessOrEqual(t, after, min(done+1, commits), "kill %d", n)
	}
	t.Logf("%d kills over the syncs of %d commits (%d with a whole journal beside the file, %d of them leaving h5py unable to open a new version before the repair): every version h5py listed as committed, before and after the repair, read as written",
		kills, commits, apply, unreadable)
	require.Greater(t, kills, 3*commits*5, "the kills cover every step of every sync")
}

// checkHeads requires heads (committedState's) to show the newest of the seen commits
// present in lines (or, with none, the base's current version) as the head the commits
// move: branch's, or current_version if branch is "". A commit on a branch leaves
// current_version at baseCurrent.
func checkHeads(t *testing.T, heads, lines, want []string, seen int, baseCurrent, branch, what string) {
	t.Helper()
	newest := baseCurrent
	if seen > 0 {
		newest = ""
		for _, l := range lines {
			if f := strings.Fields(l); strings.Join(f[2:], " ") == want[seen-1] {
				newest = f[0]
			}
		}
		require.NotEmpty(t, newest, "%s: commit %d is not in the lines", what, seen)
	}
	if branch == "" {
		require.Contains(t, heads, "current "+newest, "%s: current_version names the newest commit", what)
		return
	}
	require.Contains(t, heads, "current "+baseCurrent, "%s: a commit on branch %s moved current_version", what, branch)
	require.Contains(t, heads, "branch "+branch+" "+newest+" live", "%s: branch %s names the newest commit", what, branch)
}

// commitBands mounts file read-write (killed at the kill-th system call of its syncs, if
// kill is not empty) and commits up to commits versions through current/data (or
// branches/BRANCH/data), each writing size float64 elements at off, then unmounts: how
// many fsyncs returned, and whether the kill came.
func commitBands(t *testing.T, file, branch string, off, size, commits int, kill string) (int, bool) {
	path := filepath.Join("current", "data")
	if branch != "" {
		path = filepath.Join("branches", branch, "data")
	}
	m := mountKillable(t, file, kill)
	mnt := m.Dir
	done := 0
	for ; done < commits; done++ {
		rng := rand.New(rand.NewSource(int64(done)))
		b := make([]byte, 8*size)
		rng.Read(b)
		for i := 7; i < len(b); i += 8 {
			b[i] &= 0x3f // finite float64s
		}
		f, err := os.OpenFile(filepath.Join(mnt, path), os.O_RDWR, 0)
		if err != nil {
			break
		}
		_, err = f.WriteAt(b, int64(8*off))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			break
		}
	}
	if kill == "" {
		m.unmount(t)
		return done, false
	}
	killed := m.endKillable(t, done == commits)
	require.True(t, killed || done == commits, "the mount exited by itself")
	return done, killed
}

// mountKillable mounts file read-write, the daemon killed just before the kill-th system
// call of its syncs if kill is not empty (h5.SyncKillEnv).
func mountKillable(t *testing.T, file, kill string) *mounted {
	mnt := t.TempDir()
	var env []string
	if kill != "" {
		env = []string{h5.SyncKillEnv + "=" + kill}
	}
	return startMount(t, mnt, vh5fsArgs(file, mnt, "rw"), env...)
}

// endKillable ends a mount of mountKillable's whose kill may or may not have come:
// unmounts it first if unmount (its last sync may meet the kill too), then waits for the
// daemon. true if it died of the kill (its mount is then detached), false if it exited.
func (m *mounted) endKillable(t *testing.T, unmount bool) bool {
	if unmount {
		out, err := fusermountU(m.Dir)
		require.NoError(t, err, "%s", out)
	}
	err := m.wait(t)
	if err == nil {
		return false
	}
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the mount was killed")
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "%s", m.stderr)
	exec.Command("fusermount3", "-uz", m.Dir).Run()
	return true
}

// committedLines is tests/py/committed_digests.py's lines for file's committed versions,
// and what h5py could not read (nil if it read everything).
func committedLines(t *testing.T, file string) (lines []string, unreadable []string) {
	t.Helper()
	lines, _, unreadable = committedState(t, file)
	return lines, unreadable
}

// committedState is committedLines with the file's heads as h5py read them: "current V"
// and "branch NAME V live|dangling" (tests/py/committed_digests.py).
func committedState(t *testing.T, file string) (lines, heads, unreadable []string) {
	t.Helper()
	// libhdf5 may loop on metadata torn by a power loss: a reader that does not finish
	// could not read the file either.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", "py/committed_digests.py", file).CombinedOutput()
	if ctx.Err() != nil {
		return nil, nil, []string{"unreadable file: h5py did not finish in 10 s"}
	}
	require.NoError(t, err, "%s", out)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.HasPrefix(l, "unreadable "):
			unreadable = append(unreadable, l)
		case strings.HasPrefix(l, "head "):
			heads = append(heads, strings.TrimPrefix(l, "head "))
		case l != "":
			lines = append(lines, l)
		}
	}
	return lines, heads, unreadable
}

// digestLines is committedLines of a file h5py must read whole.
func digestLines(t *testing.T, file string) []string {
	t.Helper()
	lines, failed := committedLines(t, file)
	require.Empty(t, failed)
	return lines
}

// newVersions is the lines of after not in before, in commit order (each one's
// prev_version the one before), without their version names.
func newVersions(t *testing.T, before, after []string) []string {
	t.Helper()
	byPrev := map[string][]string{}
	for _, l := range after {
		if !slices.Contains(before, l) {
			f := strings.Fields(l)
			byPrev[f[1]] = f
		}
	}
	var out []string
	prev := ""
	for _, l := range before { // the newest base version is the first commit's parent
		f := strings.Fields(l)
		if byPrev[f[0]] != nil {
			prev = f[0]
		}
	}
	for f := byPrev[prev]; f != nil; f = byPrev[f[0]] {
		out = append(out, strings.Join(f[2:], " "))
	}
	require.Len(t, out, len(byPrev), "the new versions form a chain")
	return out
}

// checkVersions requires every line (a committed version's dataset as h5py read it) to be
// one of before's, or the content of one of the commits in want, those present forming a
// prefix of want: how many are present.
func checkVersions(t *testing.T, before, want, lines []string, what string) int {
	t.Helper()
	present := map[int]bool{}
	for _, l := range lines {
		if slices.Contains(before, l) {
			continue
		}
		f := strings.Fields(l)
		k := slices.Index(want, strings.Join(f[2:], " "))
		require.GreaterOrEqual(t, k, 0, "%s: version %s reads as no commit wrote it: %s", what, f[0], l)
		present[k] = true
	}
	for _, l := range before {
		require.Contains(t, lines, l, "%s: a version of the original file changed or disappeared", what)
	}
	for k := range len(present) {
		require.True(t, present[k], "%s: commit %d is present without commit %d", what, len(present), k+1)
	}
	return len(present)
}
