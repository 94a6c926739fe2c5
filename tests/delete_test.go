package tests

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/internal/conform"
)

// TestCmdDelete: `vh5fs delete` deletes what it is told, or what a policy picks, as
// versioned-hdf5 does (the goldens); -n changes nothing; refusals are one line, exit 1 or
// 2, and leave the file as it was.
func TestCmdDelete(t *testing.T) {
	middle := fixturePath("golden_delete_middle-before.h5")   // v1 -> v2 -> v3 -> v4
	several := fixturePath("golden_delete_several-before.h5") // v1 .. v5, one a day
	for _, c := range []struct {
		name  string
		src   string
		args  []string // after FILE
		code  int
		out   []string // lines stdout must hold
		err   string   // stderr's start, after "vh5fs: "
		after string   // the golden the file must equal ("" : the file must not change)
	}{
		{"dry run", middle, []string{"-n", "v2"}, 0, []string{
			"would delete 1 of 4 versions:", "  v2  2024-01-02 00:00:00.000000+0000",
			"would relink v3: prev_version v2 -> v1",
			"would drop 2 chunks; would move 6 of the 13 kept in the data groups compacted",
			"would free 60 B of chunk data: HDF5 keeps freed space in the file until vh5fs compact"}, "", ""},
		{"middle", middle, []string{"v2"}, 0, []string{"deleted 1 of 4 versions:", "relinked v3: prev_version v2 -> v1"}, "",
			"golden_delete_middle-after.h5"},
		{"several", several, []string{"v2", "v4", "v5"}, 0, []string{
			"moved current_version: v5 -> v3", "dropped data groups: tmp/z"}, "", "golden_delete_several-after.h5"},
		{"keep last", several, []string{"--keep-last", "2", "-n"}, 0, []string{"would delete 3 of 5 versions:",
			"  v1  2024-01-01 00:00:00.000000+0000", "  v3  2024-01-03 00:00:00.000000+0000"}, "", ""},
		{"keep every", several, []string{"--keep-every", "2", "-n"}, 0, []string{"would delete 2 of 5 versions:",
			"  v2  2024-01-02 00:00:00.000000+0000", "  v4  2024-01-04 00:00:00.000000+0000"}, "", ""},
		{"before", several, []string{"--before", "2024-01-03", "-n"}, 0, []string{"would delete 2 of 5 versions:",
			"  v1  2024-01-01 00:00:00.000000+0000", "  v2  2024-01-02 00:00:00.000000+0000"}, "", ""},
		{"nothing before", several, []string{"--before", "2020-01-01"}, 0, []string{"no version to delete (5 kept)"}, "", ""},
		{"first version", middle, []string{"__first_version__"}, 1, nil, "%s: cannot delete __first_version__; nothing deleted", ""},
		{"unknown", middle, []string{"v2", "v9"}, 1, nil, `%s: no such version: "v9"; nothing deleted`, ""},
		{"strings", fixturePath("golden_delete_strings_several-before.h5"), []string{"s1", "s4"}, 0,
			[]string{"deleted 2 of 4 versions:", "moved current_version: s4 -> s3"}, "", "golden_delete_strings_several-after.h5"},
		{"names and policy", middle, []string{"v2", "--keep-last", "1"}, 2, nil, "delete: name versions or give a policy, not both", ""},
		{"two policies", middle, []string{"--keep-last", "1", "--before", "2024-01-02"}, 2, nil, "delete: --keep-last, --keep-every and --before are alternatives", ""},
		{"nothing named", middle, nil, 2, nil, "delete: needs the VERSIONs to delete", ""},
		{"keep-last not a number", middle, []string{"--keep-last", "x"}, 2, nil, `delete: --keep-last "x": not a whole number; see 'vh5fs help delete'`, ""},
		{"keep-every not whole", middle, []string{"--keep-every", "1.5"}, 2, nil, `delete: --keep-every "1.5": not a whole number`, ""},
		{"keep-last zero", middle, []string{"--keep-last", "0"}, 2, nil, "delete: --keep-last 0: N must be a positive number", ""},
		{"keep-every negative", middle, []string{"--keep-every=-2"}, 2, nil, "delete: --keep-every -2: N must be a positive number", ""},
		{"dry run not a switch value", middle, []string{"-n=maybe", "v2"}, 2, nil, `delete: -n "maybe": not true or false`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := copyPath(t, c.src)
			orig, err := os.ReadFile(file)
			require.NoError(t, err)
			stdout, stderr, code := vh5fsRun(t, append([]string{"delete", file}, c.args...)...)
			require.Equal(t, c.code, code, "stdout %s\nstderr %s", stdout, stderr)
			if code == 0 {
				require.Empty(t, stderr, "no progress or other noise when stderr is no terminal")
			}
			lines := strings.Split(stdout, "\n")
			for _, want := range c.out {
				require.True(t, slices.ContainsFunc(lines, func(l string) bool { return strings.HasSuffix(l, want) }),
					"no line %q in\n%s", want, stdout)
			}
			if c.err != "" {
				want := "vh5fs: " + c.err
				if strings.Contains(c.err, "%s") {
					want = "vh5fs: " + fmt.Sprintf(c.err, file)
				}
				require.True(t, strings.HasPrefix(stderr, want), "stderr %q, want %q", stderr, want)
				require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			}
			if c.after == "" {
				now, err := os.ReadFile(file)
				require.NoError(t, err)
				require.Equal(t, orig, now, "the file is untouched")
				return
			}
			require.NoError(t, conform.Files(file, fixturePath(c.after)))
			_, _, code = vh5fsRun(t, "fsck", file)
			require.Equal(t, 0, code)
			// The size said is the size measured, whichever way it went.
			now, err := os.Stat(file)
			require.NoError(t, err)
			want := fmt.Sprintf("; %s %s: HDF5 keeps freed space in the file until vh5fs compact", file, sizePhrase(int64(len(orig)), now.Size()))
			require.True(t, slices.ContainsFunc(lines, func(l string) bool {
				return strings.HasPrefix(l, "freed ") && strings.HasSuffix(l, want)
			}), "no line ending %q in\n%s", want, stdout)
		})
	}
}

// TestCmdDeleteProgress: on a terminal (script(1) gives delete one) stderr draws a bar
// of the data groups planned, then of the chunks moved, then the time of the journaled
// sync, and the line is erased before the report; a dry run plans only. Without a
// terminal there is nothing (TestCmdDelete).
func TestCmdDeleteProgress(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) not installed")
	}
	const bar = `\r\x1b\[Kdelete \[[#.]{30}\] `
	for _, c := range []struct {
		name, args string
		want       []string // in this order
	}{
		{"delete", "v2", []string{
			bar + `2/2 data groups planned`,
			bar + `0/6 chunks moved \(in \S+\)`,
			bar + `6/6 chunks moved \(in \S+\)`,
			`\r\x1b\[Kdelete: writing the journal and applying it \(\d+s\)(\r\x1b\[K)+\S+: deleted 1 of 4 versions:`,
		}},
		{"dry run", "-n v2 v3", []string{
			bar + `2/2 data groups planned(\r\x1b\[K)+\S+: would delete 2 of 4 versions:`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := copyPath(t, fixturePath("golden_delete_middle-before.h5"))
			out, err := exec.Command("script", "-qec", vh5fsBin+" delete "+file+" "+c.args, "/dev/null").CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Regexp(t, strings.Join(c.want, `[\s\S]*`), string(out))
			if c.name == "dry run" {
				require.NotContains(t, string(out), "chunks moved")
				require.NotContains(t, string(out), "journal")
			}
		})
	}
}

// TestCmdDeleteMounted: a file mounted read-write (or read-only) is refused, naming the
// mount, and left as it was; after the unmount the deletion goes through.
func TestCmdDeleteMounted(t *testing.T) {
	for _, opt := range []string{"rw", "ro"} {
		t.Run(opt, func(t *testing.T) {
			file := copyPath(t, fixturePath("golden_delete_middle-before.h5"))
			m := mount(t, file, opt)
			orig, err := os.ReadFile(file)
			require.NoError(t, err)
			_, stderr, code := vh5fsRun(t, "delete", file, "v2")
			require.Equal(t, 1, code, stderr)
			mode := map[string]string{"rw": "read-write", "ro": "read-only"}[opt]
			require.True(t, strings.HasPrefix(stderr, fmt.Sprintf("vh5fs: %s: in use by the %s vh5fs mount at %s (pid ", file, mode, m.Dir)), stderr)
			require.Contains(t, stderr, "unmount it first (umount "+m.Dir+")")
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			now, err := os.ReadFile(file)
			require.NoError(t, err)
			require.Equal(t, orig, now)
			m.unmount(t)
			_, stderr, code = vh5fsRun(t, "delete", file, "v2")
			require.Equal(t, 0, code, stderr)
			require.NoError(t, conform.Files(file, fixturePath("golden_delete_middle-after.h5")))
		})
	}
}

// TestKillDuringDelete kills `vh5fs delete` just before each system call of its sync in
// turn (h5.SyncKillEnv), until one run completes. After each kill, before any repair,
// h5py reads the file as any program would: exactly the original, or exactly the file
// the deletion makes, or, for a kill inside the guarded apply (the file marked, a whole
// journal beside it), no HDF5 file at all: never a version half changed, wrong or
// missing. Then `vh5fs fsck --repair` leaves the file entirely old (no journal) or
// entirely new (conform.Files against an uninterrupted deletion), and finds it sound.
func TestKillDuringDelete(t *testing.T) {
	for _, d := range []struct{ golden, del string }{
		{"golden_delete_middle", "v2"},
		{"golden_delete_several", "v2,v4,v5"},
		{"golden_delete_strings_middle", "s2"}, // string chunks moved as delete_versions moves them
	} {
		t.Run(d.golden, func(t *testing.T) {
			t.Parallel()
			base := fixturePath(d.golden + "-before.h5")
			names := strings.Split(d.del, ",")
			old := digestLines(t, base)
			ref := copyPath(t, base)
			_, stderr, code := vh5fsRun(t, append([]string{"delete", ref}, names...)...)
			require.Equal(t, 0, code, stderr)
			require.NoError(t, conform.Files(ref, fixturePath(d.golden+"-after.h5")))
			newLines := digestLines(t, ref)

			kills, journals, hidden := 0, 0, 0
			for n := 1; ; n++ {
				file := copyPath(t, base)
				cmd := exec.Command(vh5fsBin, append([]string{"delete", file}, names...)...)
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", h5.SyncKillEnv, n))
				out, err := cmd.CombinedOutput()
				if err == nil {
					require.NoError(t, conform.Files(file, ref), "run %d, not killed", n)
					break
				}
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "kill %d: %s", n, out)
				kills++
				st, err := os.Stat(file + h5.JournalSuffix)
				journal := err == nil && st.Size() > 0
				if journal {
					journals++
				}
				finished, marked := beforeRepair(t, file, n, old, newLines)
				if marked {
					require.True(t, journal, "kill %d: the file is marked, yet no journal can complete it", n)
					hidden++
				}
				out, err = exec.Command(vh5fsBin, "fsck", "--repair", file).CombinedOutput()
				require.NoError(t, err, "kill %d: fsck --repair: %s", n, out)
				if journal || finished {
					require.NoError(t, conform.Files(file, ref), "kill %d, after repair: not the deletion", n)
					require.Equal(t, newLines, digestLines(t, file))
				} else {
					require.NoError(t, conform.Files(file, base), "kill %d, after repair: not the original", n)
				}
				_, err = os.Stat(file + h5.JournalSuffix)
				require.ErrorIs(t, err, os.ErrNotExist)
			}
			t.Logf("%d kills over the deletion's sync (%d with a whole journal, %d of them inside the guarded apply, which h5py refused as not HDF5); every other read before the repair was old or new, every repair left the file old or new",
				kills, journals, hidden)
			require.Positive(t, hidden, "kills fall inside the guarded apply")
			require.Greater(t, kills, 8, "the kills cover the sync's steps")
		})
	}
}

// beforeRepair checks what h5py reads of file after kill n, before any repair: exactly
// the lines old or the lines new (then finished says which), or, while a guarded sync's
// mark is on the file (marked), nothing at all, the file refused as not HDF5.
func beforeRepair(t *testing.T, file string, n int, old, new []string) (finished, marked bool) {
	t.Helper()
	lines, failed := committedLines(t, file)
	if h5.GuardMarked(file) {
		require.Empty(t, lines, "kill %d: h5py reads a marked file", n)
		require.Len(t, failed, 1, "kill %d", n)
		require.True(t, strings.HasPrefix(failed[0], "unreadable file:"), "kill %d: %v", n, failed)
		return false, true
	}
	require.Empty(t, failed, "kill %d: h5py cannot read the file", n)
	finished = slices.Equal(new, lines)
	require.True(t, finished || slices.Equal(old, lines), "kill %d: the file reads neither old nor new: %v", n, lines)
	return finished, false
}

// TestCmdDeleteStageBase: a deletion while a stage is saved beside the file is refused,
// naming the stage (and its base, when that is deleted): stages record the raw_data slots
// a deletion moves. The file is left as it was.
func TestCmdDeleteStageBase(t *testing.T) {
	file := copyPath(t, fixturePath("golden_delete_middle-before.h5"))
	m := mount(t, file, "rw")
	require.NoError(t, os.Mkdir(m.Dir+"/stage/work", 0o755))
	m.unmount(t)
	orig, err := os.ReadFile(file)
	require.NoError(t, err)
	_, stderr, code := vh5fsRun(t, "delete", file, "v2", "v4")
	require.Equal(t, 1, code, stderr)
	require.True(t, strings.HasPrefix(stderr, "vh5fs: "+file+": stage work ("), stderr)
	require.Contains(t, stderr, ") is based on version v4: commit or remove the stage first; nothing deleted")
	_, stderr, code = vh5fsRun(t, "delete", file, "v2")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, ") records raw_data slots a deletion moves: commit or remove the stage first; nothing deleted")
	now, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, orig, now)
}
