package tests

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/lifecycle"
)

// libraryPython is a python3 that imports versioned_hdf5, or "" (it is not a Debian
// package: where it is missing, the goldens it made stand for it).
func libraryPython(t *testing.T) string {
	p := python(t)
	if exec.Command(p, "-c", "import versioned_hdf5").Run() != nil {
		return ""
	}
	return p
}

// TestCompact: `vh5fs compact` of a file that commits through a mount left freed space in
// makes a smaller file that h5py reads as before, version by version, that fsck passes,
// that h5py (and versioned-hdf5, where importable) extends, and that mounts again; a file
// a read-write mount holds is refused and left alone.
func TestCompact(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5")
	m := mount(t, file, "rw")
	// Each commit rewrites the hash table and version metadata: the old copies are freed
	// space, which HDF5 keeps.
	for i := range 20 {
		f, err := os.OpenFile(filepath.Join(m.Dir, "current", "temp"), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{byte(i), 1, 2, 3, 4, 5, 6, 7}, int64(i)*8*37)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	_, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "vh5fs: "+file+": ")
	require.Contains(t, stderr, "vh5fs mount", "names the mount that holds it: %s", stderr)
	m.unmount(t)

	before := versionDigests(t, file)
	st, err := os.Stat(file)
	require.NoError(t, err)
	out, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(file)+`: [0-9.]+ KiB -> [0-9.]+ KiB \([0-9.]+ KiB of raw_data chunks, [0-9.]+ KiB of metadata and other data\), written to `+regexp.QuoteMeta(file)+"\n$"), out)
	st2, err := os.Stat(file)
	require.NoError(t, err)
	require.Less(t, st2.Size(), st.Size())
	t.Logf("%d -> %d bytes", st.Size(), st2.Size())
	require.Equal(t, before, versionDigests(t, file))
	_, stderr, code = vh5fsRun(t, "fsck", file)
	require.Equal(t, 0, code, stderr)

	// -o: the file stays, the copy reads the same.
	other := filepath.Join(t.TempDir(), "copy.h5")
	_, stderr, code = vh5fsRun(t, "compact", file, "-o", other)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, before, versionDigests(t, other))

	// Extended by h5py as versioned-hdf5 lays a version out, and by versioned-hdf5.
	run(t, python(t), "py/add_version.py", file, "after_compact")
	after := versionDigests(t, file)
	require.Len(t, after, len(before)+1)
	if py := libraryPython(t); py != "" {
		script := `import sys, numpy as np
from versioned_hdf5 import VersionedHDF5File
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    vf = VersionedHDF5File(f)
    with vf.stage_version("by_library") as g:
        g["temp"][0, 0] = 42.0
`
		run(t, py, "-c", script, file)
		require.Contains(t, versionDigests(t, file), "by_library")
	} else {
		t.Log("versioned_hdf5 is not importable here: the library's commit on a compacted file not checked")
	}
	ro := mount(t, file)
	b, err := os.ReadFile(filepath.Join(ro.Dir, "versions", "after_compact", "temp"))
	require.NoError(t, err)
	require.NotEmpty(t, b)
	cur, err := os.Readlink(filepath.Join(ro.Dir, "current"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cur, "versions/"), cur)
}

// TestCompactNothingToReclaim: `vh5fs compact` of a small file whose copy would be no
// smaller says so and leaves the file byte for byte as it was.
func TestCompactNothingToReclaim(t *testing.T) {
	file := copyPath(t, filepath.Join(fixture.ModifyDir(), "golden_modify_dtype-before.h5"))
	orig, err := os.ReadFile(file)
	require.NoError(t, err)
	out, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, regexp.MustCompile(`^`+regexp.QuoteMeta(file)+`: [0-9.]+ KiB, nothing to reclaim \(a compacted copy takes [0-9.]+ KiB\): left as it was`+"\n$"), out)
	now, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, orig, now)
}

// compactSrc has four versions and space to reclaim (a compacted copy is smaller).
const compactSrc = "testdata/fixtures/golden_delete_middle-before.h5"

// compactRefusal is the line `vh5fs compact FILE` prints while holders have FILE open.
func compactRefusal(file string, holders []string, fix string) string {
	who := "another process"
	if len(holders) > 1 {
		who = fmt.Sprintf("%d other processes", len(holders))
	}
	return fmt.Sprintf("vh5fs: %s: open in %s: %s; compact replaces the file with a new one, which a process holding "+
		"the old one never sees: %s; nothing changed", file, who, strings.Join(holders, ", "), fix)
}

// h5pyHolder is a python3 process that has a file open with h5py until release.
type h5pyHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// holdWithH5py opens file with h5py in mode ("r", "r+") in a python3 process, with env
// added to its environment, and returns once the file is open.
func holdWithH5py(t *testing.T, file, mode string, env ...string) *h5pyHolder {
	t.Helper()
	cmd := exec.Command(python(t), "-c", `import h5py, sys
f = h5py.File(sys.argv[1], sys.argv[2])
print("open", flush=True)
sys.stdin.read()`, file, mode)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	h := &h5pyHolder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "open\n", line)
	return h
}

// release has the holder close the file and exit; it may be called again.
func (h *h5pyHolder) release() {
	if h.cmd.ProcessState == nil {
		h.stdin.Close()
		h.cmd.Wait()
	}
}

// TestCompactRefusesHolders: compact in place is refused while any other process has the
// file open, readers too (a read-only mount would go on serving the old inode, and a later
// delete would no longer see it), naming each holder by pid and a vh5fs mount by its mount
// point; the file is byte for byte as it was. Once they let go it compacts, and -o OUT
// is never held up by a reader.
func TestCompactRefusesHolders(t *testing.T) {
	type holder struct {
		name    string // as the refusal names it
		release func()
	}
	viaMount := func(opts string) func(t *testing.T, file string) holder {
		return func(t *testing.T, file string) holder {
			m := mount(t, file, opts)
			mode := map[string]string{"ro": "read-only", "rw": "read-write"}[opts]
			return holder{fmt.Sprintf("the %s vh5fs mount at %s (pid %d)", mode, m.Dir, m.cmd.Process.Pid), func() { m.unmount(t) }}
		}
	}
	viaH5py := func(mode, reading string, env ...string) func(t *testing.T, file string) holder {
		return func(t *testing.T, file string) holder {
			h := holdWithH5py(t, file, mode, env...)
			return holder{fmt.Sprintf("python3 (pid %d, open for %s)", h.cmd.Process.Pid, reading), h.release}
		}
	}
	for _, tc := range []struct {
		name    string
		holders []func(t *testing.T, file string) holder
		fix     string // %s: the mount points
		outOK   bool   // compact -o OUT goes ahead meanwhile
	}{
		{"read-only mount", []func(*testing.T, string) holder{viaMount("ro")}, "unmount first (umount %s)", true},
		{"read-write mount", []func(*testing.T, string) holder{viaMount("rw")}, "unmount first (umount %s)", false},
		{"h5py reader", []func(*testing.T, string) holder{viaH5py("r", "reading")}, "close it there first", true},
		{"h5py writer", []func(*testing.T, string) holder{viaH5py("r+", "writing")}, "close it there first", false},
		// No lock to find: the reader's descriptor names it.
		{"h5py reader without locking", []func(*testing.T, string) holder{viaH5py("r", "reading", "HDF5_USE_FILE_LOCKING=FALSE")},
			"close it there first", true},
		{"read-only mount and h5py reader", []func(*testing.T, string) holder{viaMount("ro"), viaH5py("r", "reading")},
			"unmount (umount %s) and close it in the others first", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := fixture.Copy(t, compactSrc)
			versions := versionDigests(t, file)
			var names, mnts []string
			var hs []holder
			for _, start := range tc.holders {
				h := start(t, file)
				hs = append(hs, h)
				names = append(names, h.name)
				if m := regexp.MustCompile(`mount at (\S+) `).FindStringSubmatch(h.name); m != nil {
					mnts = append(mnts, m[1])
				}
			}
			slices.SortFunc(names, func(a, b string) int { return pidOf(t, a) - pidOf(t, b) }) // in pid order
			fix := tc.fix
			if len(mnts) > 0 {
				fix = fmt.Sprintf(tc.fix, mnts[0])
			}
			sum := fileSHA(t, file)

			out, stderr, code := vh5fsRun(t, "compact", file)
			require.Equal(t, 1, code, "stdout %q", out)
			require.Equal(t, compactRefusal(file, names, fix), oneLine(t, stderr))
			require.Equal(t, sum, fileSHA(t, file), "the file is as it was")

			other := filepath.Join(t.TempDir(), "copy.h5")
			_, stderr, code = vh5fsRun(t, "compact", file, "-o", other)
			if tc.outOK {
				require.Equal(t, 0, code, stderr)
				require.Equal(t, versions, versionDigests(t, other))
			} else {
				require.Equal(t, 1, code, "a writer keeps readers out")
				require.Contains(t, oneLine(t, stderr), fmt.Sprintf("(pid %d", pidOf(t, names[0])), "names the writer")
			}
			require.Equal(t, sum, fileSHA(t, file))

			for _, h := range hs {
				h.release()
			}
			_, stderr, code = vh5fsRun(t, "compact", file)
			require.Equal(t, 0, code, "no holder left: %s", stderr)
			require.Equal(t, versions, versionDigests(t, file))
		})
	}
}

// pidOf is the pid a holder's name gives.
func pidOf(t *testing.T, name string) int {
	m := regexp.MustCompile(`\(pid (\d+)`).FindStringSubmatch(name)
	require.NotNil(t, m, name)
	pid, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return pid
}

// TestCompactLinks: a symbolic link is followed, its target compacted beside itself and
// the link left a link; a file with several hard links is refused in place (only one name
// would get the new file), byte for byte as it was, and compacts to another path.
func TestCompactLinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		link func(target string) string // what the link holds
	}{
		{"relative link", func(target string) string { return filepath.Base(target) }},
		{"absolute link from another directory", func(target string) string { return target }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := fixture.Copy(t, compactSrc)
			dir := filepath.Dir(target)
			if filepath.IsAbs(tc.link(target)) {
				dir = t.TempDir()
			}
			link := filepath.Join(dir, "link.h5")
			require.NoError(t, os.Symlink(tc.link(target), link))
			versions := versionDigests(t, target)
			st, err := os.Stat(target)
			require.NoError(t, err)

			out, stderr, code := vh5fsRun(t, "compact", link)
			require.Equal(t, 0, code, stderr)
			require.True(t, strings.HasSuffix(out, fmt.Sprintf(", written to %s (the target of %s)\n", target, link)), out)
			lst, err := os.Lstat(link)
			require.NoError(t, err)
			require.Equal(t, os.ModeSymlink, lst.Mode()&os.ModeSymlink, "the link is still a link")
			to, err := os.Readlink(link)
			require.NoError(t, err)
			require.Equal(t, tc.link(target), to)
			st2, err := os.Stat(target)
			require.NoError(t, err)
			require.Less(t, st2.Size(), st.Size(), "the target was compacted")
			require.Equal(t, versions, versionDigests(t, target))
			requireNoCompactTemp(t, filepath.Dir(target))
			requireNoCompactTemp(t, dir)
		})
	}

	t.Run("hard links", func(t *testing.T) {
		file := fixture.Copy(t, compactSrc)
		other := filepath.Join(filepath.Dir(file), "other.h5")
		require.NoError(t, os.Link(file, other))
		sum := fileSHA(t, file)
		_, stderr, code := vh5fsRun(t, "compact", file)
		require.Equal(t, 1, code)
		require.Equal(t, "vh5fs: "+file+": has 2 hard links, and compacting replaces the file with a new one, which the "+
			"other names would not get: remove the other links first, or compact to another file (-o OUT)", oneLine(t, stderr))
		require.Equal(t, sum, fileSHA(t, file))
		a, err := os.Stat(file)
		require.NoError(t, err)
		b, err := os.Stat(other)
		require.NoError(t, err)
		require.True(t, os.SameFile(a, b), "still one file")
		requireNoCompactTemp(t, filepath.Dir(file))

		copy := filepath.Join(t.TempDir(), "copy.h5")
		_, stderr, code = vh5fsRun(t, "compact", file, "-o", copy)
		require.Equal(t, 0, code, stderr)
		require.Equal(t, versionDigests(t, file), versionDigests(t, copy))
		require.Equal(t, sum, fileSHA(t, file))
	})
}

// requireNoCompactTemp checks that no compaction's temporary file is left in dir.
func requireNoCompactTemp(t *testing.T, dir string) {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(dir, ".*.vh5fs-compact"))
	require.NoError(t, err)
	require.Empty(t, left)
}

// TestCompactOut: -o OUT names OUT's own problem in one line (not the input file's), the
// input byte for byte as it was: a missing directory, a directory, a path under a file, a
// directory the user cannot write; an existing OUT is replaced only with --force; OUT
// naming FILE itself (or a link to it) compacts in place.
func TestCompactOut(t *testing.T) {
	nobody := nobodyCompact(t)
	for _, tc := range []struct {
		name string
		// setup makes what the case needs in dir, beside the input file, and returns
		// compact's arguments after FILE.
		setup  func(t *testing.T, dir, file string) []string
		asUser bool   // run as nobody
		want   string // the error line after "vh5fs: FILE: "; "" if compact succeeds
		inside string // the file written when it succeeds ("" : FILE in place)
	}{
		{name: "missing directory", setup: func(t *testing.T, dir, file string) []string {
			return []string{"-o", dir + "/missing/x.h5"}
		}, want: "-o DIR/missing/x.h5: no such directory DIR/missing"},
		{name: "a directory", setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.Mkdir(dir+"/sub", 0o755))
			return []string{"-o", dir + "/sub"}
		}, want: "-o DIR/sub: is a directory: name the file to write (-o DIR/sub/data.h5)"},
		{name: "under a file", setup: func(t *testing.T, dir, file string) []string {
			return []string{"-o", file + "/x.h5"}
		}, want: "-o DIR/data.h5/x.h5: DIR/data.h5 is not a directory"},
		{name: "existing", setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.WriteFile(dir+"/old.h5", []byte("keep me"), 0o644))
			return []string{"-o", dir + "/old.h5"}
		}, want: "-o DIR/old.h5: exists: add --force to replace it"},
		{name: "existing with --force", setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.WriteFile(dir+"/old.h5", []byte("replace me"), 0o644))
			return []string{"-o", dir + "/old.h5", "--force"}
		}, inside: "old.h5"},
		{name: "a journal beside OUT", setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.WriteFile(dir+"/new.h5.vh5fs-journal", []byte("another file's"), 0o644))
			return []string{"-o", dir + "/new.h5"}
		}, want: "-o DIR/new.h5: the journal of an interrupted vh5fs change (DIR/new.h5.vh5fs-journal) is beside it: " +
			"run 'vh5fs fsck --repair DIR/new.h5' or remove the journal first"},
		{name: "stages beside OUT", setup: func(t *testing.T, dir, file string) []string {
			copyFile(t, compactSrc, dir+"/old.h5")
			m := mount(t, dir+"/old.h5", "rw")
			require.NoError(t, os.Mkdir(filepath.Join(m.Dir, "stage", "s1"), 0o755))
			m.unmount(t)
			return []string{"-o", dir + "/old.h5", "--force"}
		}, want: "-o DIR/old.h5: stage s1 is saved beside it (DIR/.old.h5.vh5fs-stages), whose raw_data slots are " +
			"another file's: commit or remove the stages first, or write elsewhere"},
		{name: "new", setup: func(t *testing.T, dir, file string) []string {
			return []string{"-o", dir + "/new.h5"}
		}, inside: "new.h5"},
		{name: "the file itself", setup: func(t *testing.T, dir, file string) []string {
			return []string{"-o", file}
		}},
		{name: "a link to the file", setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.Symlink("data.h5", dir+"/link.h5"))
			return []string{"-o", dir + "/link.h5"}
		}},
		{name: "directory not writable", asUser: true, setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.Mkdir(dir+"/ro", 0o755)) // root's
			return []string{"-o", dir + "/ro/x.h5"}
		}, want: "-o DIR/ro/x.h5: directory DIR/ro is not writable by uid 65534"},
		{name: "in place, directory not writable", asUser: true, setup: func(t *testing.T, dir, file string) []string {
			require.NoError(t, os.Chmod(dir, 0o755))
			return nil
		}, want: "directory DIR is not writable by uid 65534: compact writes the new file beside the old one " +
			"(.data.h5.vh5fs-compact) and renames it over; -o OUT writes it elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "vh5fs-compact-out")
			require.NoError(t, err)
			t.Cleanup(func() { os.RemoveAll(dir) })
			require.NoError(t, os.Chmod(dir, 0o777)) // nobody may read and write, unless the case says
			file := filepath.Join(dir, "data.h5")
			copyFile(t, compactSrc, file)
			versions := versionDigests(t, file)
			args := append([]string{"compact", file}, tc.setup(t, dir, file)...)
			sum := fileSHA(t, file)
			var stdout, stderr string
			var code int
			if tc.asUser {
				stdout, stderr, code = nobody(args...)
			} else {
				stdout, stderr, code = vh5fsRun(t, args...)
			}
			requireNoCompactTemp(t, dir)
			if tc.want != "" {
				require.Equal(t, 1, code, "stdout %q", stdout)
				require.Equal(t, "vh5fs: "+file+": "+strings.ReplaceAll(tc.want, "DIR", dir), oneLine(t, stderr))
				require.Equal(t, sum, fileSHA(t, file), "the file is as it was")
				if tc.name == "existing" {
					b, err := os.ReadFile(dir + "/old.h5")
					require.NoError(t, err)
					require.Equal(t, "keep me", string(b))
				}
				return
			}
			require.Equal(t, 0, code, stderr)
			written := file
			if tc.inside != "" {
				written = filepath.Join(dir, tc.inside)
				require.Equal(t, sum, fileSHA(t, file), "the file is as it was")
			} else {
				require.NotEqual(t, sum, fileSHA(t, file), "compacted in place")
			}
			require.True(t, strings.HasSuffix(stdout, ", written to "+args[3]+"\n") ||
				strings.HasSuffix(stdout, fmt.Sprintf(", written to %s (the target of %s)\n", file, args[3])), stdout)
			require.Equal(t, versions, versionDigests(t, written))
			if tc.name == "a link to the file" {
				lst, err := os.Lstat(args[3])
				require.NoError(t, err)
				require.Equal(t, os.ModeSymlink, lst.Mode()&os.ModeSymlink, "the link is still a link")
			}
		})
	}

	t.Run("OUT held by a read-only mount", func(t *testing.T) {
		file, out := fixture.Copy(t, compactSrc), fixture.Copy(t, compactSrc)
		m := mount(t, out, "ro")
		sum := fileSHA(t, out)
		_, stderr, code := vh5fsRun(t, "compact", file, "-o", out, "--force")
		require.Equal(t, 1, code)
		held := fmt.Sprintf("the read-only vh5fs mount at %s (pid %d)", m.Dir, m.cmd.Process.Pid)
		require.Equal(t, "vh5fs: "+file+": "+strings.TrimPrefix(compactRefusal(out, []string{held}, "unmount first (umount "+m.Dir+")"), "vh5fs: "),
			oneLine(t, stderr))
		require.Equal(t, sum, fileSHA(t, out), "OUT is as it was")
		requireNoCompactTemp(t, filepath.Dir(out))
	})

	_, stderr, code := vh5fsRun(t, "compact", fixture.Copy(t, compactSrc), "--force")
	require.Equal(t, 2, code)
	require.Equal(t, "vh5fs: compact: --force replaces an existing OUT: it needs -o OUT; see 'vh5fs help compact'", oneLine(t, stderr))
}

// nobodyCompact returns a function that runs vh5fs as user nobody (uid 65534), from a
// copy of the binary nobody may run.
func nobodyCompact(t *testing.T) func(args ...string) (string, string, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	dir, err := os.MkdirTemp("", "vh5fs-nobody-bin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "vh5fs")
	copyFile(t, vh5fsBin, bin)
	require.NoError(t, os.Chmod(bin, 0o755))
	return func(args ...string) (string, string, int) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
		var stdout, stderr strings.Builder
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
}

// TestCompactBadFiles: a file compact cannot or must not rewrite gets one line naming it
// and the problem, and is left byte for byte as it was (a pending journal too), with no
// temporary file beside it.
func TestCompactBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(t *testing.T) string // the file
		want string                    // the line after "vh5fs: FILE: "
	}{
		{"interrupted commit", interruptedCommit, "a commit was interrupted while writing (its journal FILE.vh5fs-journal " +
			"is beside the file): run 'vh5fs fsck --repair FILE' (or mount it read-write) to complete it"},
		{"guard mark without journal", func(t *testing.T) string {
			file := fixture.Copy(t, compactSrc)
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("\x89VH5JNL\n"), 0) // what a guarded sync writes over the signature
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return file
		}, "a vh5fs change was interrupted while it was being written in place, and its journal FILE.vh5fs-journal, " +
			"which alone can complete it, is gone; the file was left marked as not HDF5 so that no program reads it half changed"},
		{"not HDF5", func(t *testing.T) string {
			file := filepath.Join(t.TempDir(), "notes.h5")
			require.NoError(t, os.WriteFile(file, []byte("not HDF5 at all\n"), 0o644))
			return file
		}, "not an HDF5 file"},
		{"truncated", func(t *testing.T) string {
			file := fixture.Copy(t, compactSrc)
			require.NoError(t, os.Truncate(file, 20000))
			return file
		}, "truncated: 20000 bytes, the superblock records 48341"},
		{"plain HDF5", func(t *testing.T) string {
			file := filepath.Join(t.TempDir(), "plain.h5")
			run(t, python(t), "-c", `import h5py, sys
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = list(range(1000))
    del f["x"]  # space to reclaim
    f["y"] = [1, 2, 3]`, file)
			return file
		}, "not a versioned-hdf5 file (no /_version_data): compact rewrites versioned-hdf5 files only (h5repack rewrites any HDF5 file)"},
		{"directory", func(t *testing.T) string { return t.TempDir() }, "not a regular file"},
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing.h5") }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.make(t)
			dir := filepath.Dir(file)
			before, err := os.ReadDir(dir)
			require.NoError(t, err)
			var sum string
			if st, err := os.Stat(file); err == nil && st.Mode().IsRegular() {
				sum = fileSHA(t, file)
			}
			out, stderr, code := vh5fsRun(t, "compact", file)
			require.Equal(t, 1, code, "stdout %q", out)
			require.Equal(t, "vh5fs: "+file+": "+strings.ReplaceAll(tc.want, "FILE", file), oneLine(t, stderr))
			if sum != "" {
				require.Equal(t, sum, fileSHA(t, file), "the file is as it was")
			}
			after, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Equal(t, names(before), names(after), "nothing added or removed beside the file (a journal stays)")
		})
	}
}

func names(es []os.DirEntry) []string {
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

// TestCompactDiskFull: a copy that runs out of space says so (not that the file is
// corrupt) in one line, and leaves the file as it was and no temporary beside it.
func TestCompactDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=60k"); err != nil {
		t.Skipf("needs root to mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	file := filepath.Join(dir, "data.h5")
	copyFile(t, compactSrc, file) // 48 KiB: a 44 KiB copy does not fit beside it
	sum := fileSHA(t, file)
	_, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 1, code)
	line := oneLine(t, stderr)
	require.True(t, strings.HasPrefix(line, fmt.Sprintf("vh5fs: %s: writing the compacted copy %s/.data.h5.vh5fs-compact: "+
		"its filesystem is full (", file, dir)), line)
	require.Contains(t, line, "nothing changed: make room, or write the copy elsewhere (-o OUT)")
	require.Equal(t, sum, fileSHA(t, file))
	requireNoCompactTemp(t, dir)
}

// TestCompactPendingStage: a pending reclaim (rmdirs whose reclaim a stage holds) stays
// pending through compact and fsck --repair while the stage is saved, since the reclaim
// would move the slots the stage records; each says so and succeeds, the file reads as
// the deletion made it, and the stage still commits. Once it is gone, -o OUT reclaims in
// FILE itself before the copy, and the copy is versioned-hdf5's file.
func TestCompactPendingStage(t *testing.T) {
	const golden = "golden_delete_several"
	file := copyPath(t, fixturePath(golden+"-before.h5"))
	m := mount(t, file, "rw,allow_delete")
	require.NoError(t, unix.Rmdir(filepath.Join(m.Dir, "versions", "v2")))
	stageWhileHeld(t, m.Dir, "work")
	m.unmount(t)
	pending, err := lifecycle.Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending)
	ref := copyPath(t, fixturePath(golden+"-before.h5"))
	_, stderr, code := vh5fsRun(t, "delete", ref, "v2")
	require.Equal(t, 0, code, stderr)

	out, stderr, code := vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, fmt.Sprintf("%s: %d data groups stay pending to reclaim (chunks of deleted versions): stage work saved", file, len(pending)))
	out, stderr, code = vh5fsRun(t, "fsck", "--repair", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, fmt.Sprintf("%s: %d data groups left pending: stage work", file, len(pending)))
	require.Contains(t, out, fmt.Sprintf("%s: pending: %d data groups to reclaim", file, len(pending)))
	again, err := lifecycle.Pending(file)
	require.NoError(t, err)
	require.Equal(t, pending, again)
	require.Equal(t, digestLines(t, ref), digestLines(t, file))

	// The stage, kept valid, is discarded through a mount killed before its reclaim.
	m = mount(t, file, "rw")
	require.NoError(t, os.RemoveAll(filepath.Join(m.Dir, "stage", "work")))
	m.signal(t, unix.SIGKILL)
	m.wait(t)
	require.NoError(t, exec.Command("fusermount3", "-uz", m.Dir).Run())
	require.NotContains(t, m.stderr.String(), "chunks reclaimed")
	again, err = lifecycle.Pending(file)
	require.NoError(t, err)
	require.Equal(t, pending, again)
	_, stderr, code = vh5fsRun(t, "delete", file, "v4", "v5")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")))

	// -o OUT: the reclaim is written in FILE, then copied.
	file = copyPath(t, fixturePath(golden+"-before.h5"))
	m = mount(t, file, "rw,allow_delete")
	for _, v := range []string{"v2", "v4", "v5"} {
		require.NoError(t, unix.Rmdir(filepath.Join(m.Dir, "versions", v)))
	}
	hold, err := os.OpenFile(anyDataset(t, filepath.Join(m.Dir, "current")), os.O_RDWR, 0)
	require.NoError(t, err)
	m.signal(t, unix.SIGKILL)
	m.wait(t)
	hold.Close()
	require.NoError(t, exec.Command("fusermount3", "-uz", m.Dir).Run())
	pending, err = lifecycle.Pending(file)
	require.NoError(t, err)
	require.NotEmpty(t, pending)
	copied := filepath.Join(t.TempDir(), "out.h5")
	out, stderr, code = vh5fsRun(t, "compact", file, "-o", copied)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, file+": reclaimed the chunks of deleted versions pending in ")
	require.NoError(t, conform.Files(file, fixturePath(golden+"-after.h5")))
	require.NoError(t, conform.Files(copied, fixturePath(golden+"-after.h5")))
	_, err = os.Stat(lifecycle.PendingPath(file))
	require.ErrorIs(t, err, os.ErrNotExist)
}
