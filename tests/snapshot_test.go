package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// fileSHA is the sha256 of a whole file, hex.
func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestSnapshotContract: a version directory behaves as ZFS's .zfs/snapshot/<s>. Through a
// real mount, with GNU coreutils and Python, rm, rm -r, rm -rf *, mv out of the mount,
// find -delete and shutil.rmtree(ignore_errors=True) lose no version and no byte of the
// file (its sha256 before = after), with and without -o allow_delete (find and rmtree
// only without: with it they end in rmdir of the version, which deletes it as asked);
// each refusal is EROFS or EPERM and logged; cp -a and rsync -a copy a version out.
func TestSnapshotContract(t *testing.T) {
	const src = "testdata/fixtures/golden_delete_middle-before.h5" // v1 -> v2 -> v3 -> v4 = current; x, g/y
	all := []string{"v1", "v2", "v3", "v4"}
	for _, opts := range []string{"rw", "rw,allow_delete", "ro"} {
		t.Run(opts, func(t *testing.T) {
			file := fixture.Copy(t, src)
			before := fileSHA(t, file)
			m := mount(t, file, opts)
			out := t.TempDir() // another file system: mv copies, then removes
			p := func(parts ...string) string { return filepath.Join(append([]string{m.Dir}, parts...)...) }
			x1, err := os.ReadFile(p("versions", "v1", "x"))
			require.NoError(t, err)

			type run struct {
				name   string
				argv   []string
				stderr string // what the failing command says; "" if it must succeed
			}
			const rofs = "Read-only file system"
			runs := []run{
				{"rm a dataset", []string{"rm", p("versions", "v2", "x")}, rofs},
				{"rm through current", []string{"rm", p("current", "x")}, rofs},
				{"rm -f a group's dataset", []string{"rm", "-f", p("versions", "v2", "g", "y")}, rofs},
				{"rm -r a version", []string{"rm", "-r", p("versions", "v2")}, rofs},
				{"rm -rf *", []string{"sh", "-c", `cd "$1" && rm -rf *`, "sh", p("versions")}, rofs},
				{"rm -rf versions", []string{"rm", "-rf", p("versions")}, rofs},
				{"mv a version to another file system", []string{"mv", p("versions", "v3"), out}, rofs},
				{"cp -a a version out", []string{"cp", "-a", p("versions", "v1"), filepath.Join(out, "cp")}, ""},
				{"rsync -a a version out", []string{"rsync", "-a", p("versions", "v1") + "/", filepath.Join(out, "rsync")}, ""},
			}
			if opts != "rw,allow_delete" {
				rmdir := "Operation not permitted"
				if opts == "ro" {
					rmdir = rofs
				}
				runs = append(runs,
					run{"find -delete", []string{"find", p("versions"), "-delete"}, rofs},
					run{"rmdir a version", []string{"rmdir", p("versions", "v2")}, rmdir},
					run{"shutil.rmtree(ignore_errors=True)", []string{"python3", "-c",
						"import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)", p("versions", "v2")}, ""})
			}
			for _, r := range runs {
				cmd := exec.Command(r.argv[0], r.argv[1:]...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				if r.stderr == "" {
					require.NoError(t, err, "%s: %s", r.name, stderr.String())
				} else {
					require.Error(t, err, r.name)
					require.Contains(t, stderr.String(), r.stderr, r.name)
				}
				require.Equal(t, all, readDirNames(t, p("versions")), "after %s", r.name)
				require.Equal(t, []string{"g", "x"}, readDirNames(t, p("versions", "v2")), "after %s", r.name)
			}
			for _, dir := range []string{"cp", "rsync"} {
				got, err := os.ReadFile(filepath.Join(out, dir, "x"))
				require.NoError(t, err)
				require.Equal(t, x1, got, dir)
				require.FileExists(t, filepath.Join(out, dir, "g", "y"))
			}
			cur, err := os.Readlink(p("current"))
			require.NoError(t, err)
			require.Equal(t, "versions/v4", cur)
			if opts != "ro" {
				m.logged(t, `level=WARN msg="refused: versions are snapshots: nothing in them changes; delete a whole version with vh5fs delete FILE VERSION; [^"]*" op=unlink path=versions/v2/x`)
				m.logged(t, `op=unlink path=versions/v4/x`) // through current
			}
			if opts == "rw" {
				m.logged(t, `level=WARN msg="refused: deleting a version is deliberate: vh5fs delete FILE VERSION \(-n shows what it would do\), or rmdir MNT/versions/VERSION on a mount with -o rw,allow_delete" op=rmdir path=versions/v2`)
			}
			m.unmount(t)
			require.Equal(t, before, fileSHA(t, file), "the file is byte for byte as it was")
			if opts == "ro" {
				require.NotRegexp(t, regexp.MustCompile("refused"), m.stderr.String(), "a read-only mount's EROFS says it all")
			}
		})
	}

	// With the option, rmdir deletes a version although its directory has entries.
	file := fixture.Copy(t, src)
	m := mount(t, file, "rw,allow_delete")
	out, err := exec.Command("rmdir", filepath.Join(m.Dir, "versions", "v2")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, []string{"v1", "v3", "v4"}, readDirNames(t, filepath.Join(m.Dir, "versions")))
	m.unmount(t)
	require.NotContains(t, versionDigests(t, file), "v2")
	require.False(t, strings.Contains(m.stderr.String(), "level=ERROR"), m.stderr.String())
}

// TestAllowDeleteNeedsRW: -o allow_delete on a read-only mount is refused with one line.
func TestAllowDeleteNeedsRW(t *testing.T) {
	file := fixture.Copy(t, "testdata/fixtures/basic_1d.h5")
	_, stderr, code := vh5fsRun(t, "mount", "-o", "allow_delete", file, t.TempDir())
	require.Equal(t, 2, code)
	require.Equal(t, "vh5fs: option allow_delete needs rw (a read-only mount deletes nothing)\n", stderr)
}
