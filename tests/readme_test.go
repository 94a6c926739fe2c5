package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
)

// recipe is one ```sh block of the README or the guide (docs/GUIDE.md) with the
// annotation before it:
// <!-- recipe: KIND -->, KIND being mounts (the block mounts data.h5 itself), ro (the test
// mounts data.h5 first), live (the test starts a SWMR writer on run.h5 first) or skip (with
// the reason).
type recipe struct {
	kind, script string
	file         string // README.md or docs/GUIDE.md
	line         int
}

var recipeRE = regexp.MustCompile("(?s)<!-- recipe: (\\w+)[^>]*-->\n```sh\n(.*?)```")

func readmeRecipes(t *testing.T) []recipe {
	var out []recipe
	for _, file := range []string{"README.md", "docs/GUIDE.md"} {
		b, err := os.ReadFile("../" + file)
		require.NoError(t, err)
		text := string(b)
		n := 0
		for _, m := range recipeRE.FindAllStringSubmatchIndex(text, -1) {
			out = append(out, recipe{kind: text[m[2]:m[3]], script: text[m[4]:m[5]], file: file, line: strings.Count(text[:m[0]], "\n") + 1})
			n++
		}
		// Every sh block is annotated: a new recipe cannot go untested by accident.
		require.Equal(t, strings.Count(text, "```sh\n"), n, "a ```sh block of %s has no <!-- recipe: KIND --> line before it", file)
	}
	return out
}

// TestReadmeRecipes runs every recipe of the README and the guide as a newcomer would paste it into sh
// (set -e), with vh5fs and python3 on PATH, data.h5 a copy of the demo file and /mnt/run a
// fresh directory, and checks what each should have done.
func TestReadmeRecipes(t *testing.T) {
	recipes := readmeRecipes(t)
	bin := t.TempDir()
	require.NoError(t, os.Symlink(vh5fsBin, filepath.Join(bin, "vh5fs")))
	require.NoError(t, os.Symlink(python(t), filepath.Join(bin, "python3")))
	ran := 0
	for _, r := range recipes {
		if r.kind == "skip" {
			continue
		}
		ran++
		t.Run(r.kind+"@"+r.file+":"+strconv.Itoa(r.line), func(t *testing.T) {
			work := t.TempDir()
			data := filepath.Join(work, "data.h5")
			require.NoError(t, os.Rename(fixture.Copy(t, "testdata/fixtures/grid_2d_gzip.h5"), data))
			mnt := filepath.Join(t.TempDir(), "run")
			script := strings.ReplaceAll(r.script, "/mnt/run", mnt)
			t.Cleanup(func() { exec.Command("fusermount3", "-u", mnt).Run() })
			var writer *swmrWriter
			switch r.kind {
			case "ro":
				require.NoError(t, os.Mkdir(mnt, 0o755))
				run(t, vh5fsBin, data, mnt, "-o", "ro")
			case "live":
				require.NoError(t, os.Mkdir(mnt, 0o755))
				writer = startWriter(t, filepath.Join(work, "run.h5"), "create", 60, "0.05")
				script = strings.ReplaceAll(script, mnt+"/temp", mnt+"/a")
				script = strings.ReplaceAll(script, "tail -c +1 -f", "timeout 2 tail -c +1 -f")
				done := make(chan struct{})
				go func() { defer close(done); writer.run(t) }()
				t.Cleanup(func() { <-done })
			case "mounts":
				if !strings.Contains(r.script, "mkdir -p /mnt/run\n") {
					require.NoError(t, os.Mkdir(mnt, 0o755))
				}
			default:
				t.Fatalf("%s line %d: unknown recipe kind %q", r.file, r.line, r.kind)
			}
			cmd := exec.Command("sh", "-ec", script)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			if strings.Contains(script, "new.bin") {
				newData := make([]byte, 50*37*8)
				for i := range newData {
					newData[i] = byte(i)
				}
				require.NoError(t, os.WriteFile(filepath.Join(work, "new.bin"), newData, 0o644))
			}
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s line %d:\n%s\n---\n%s", r.file, r.line, script, out)
			checkRecipe(t, r, string(out), data, mnt)
		})
	}
	require.Equal(t, 8, ran, "recipes run")
}

// checkRecipe checks the effects a recipe promises, by what it does.
func checkRecipe(t *testing.T, r recipe, out, data, mnt string) {
	s := r.script
	switch {
	case strings.Contains(s, "np.memmap(path"): // the read recipe
		require.Contains(t, out, "r1\nr2\nr3\nr4\nr5\n")
		require.Regexp(t, `user\.vh5fs\.dtype="<f8"`, out)
		require.Regexp(t, `user\.vh5fs\.shape="\[45,37\]"`, out)
		require.False(t, isMountpoint(t, mnt), "umount")
	case strings.Contains(s, "cp new.bin"): // the write recipe
		require.Regexp(t, `(?m)^ok: 9 versions checked$`, out, "four commits, fsck clean")
		require.Len(t, regexp.MustCompile(`(?m)^\d{8}T\d{6}\.\d{6}Z  `).FindAllString(out, -1), 4, "log shows the 4 new versions:\n%s", out)
		got := run(t, python(t), "-c", `import sys, h5py, hashlib
f = h5py.File(sys.argv[1], "r")
v = f["_version_data/versions"]
print(v.attrs["current_version"], hashlib.sha256(v[v.attrs["current_version"]]["temp"][()].tobytes()).hexdigest())`, data)
		newData, err := os.ReadFile(filepath.Join(filepath.Dir(data), "new.bin"))
		require.NoError(t, err)
		sum := sha256.Sum256(newData)
		require.Contains(t, got, hex.EncodeToString(sum[:]), "h5py reads new.bin as the current version")
	case strings.Contains(s, "commit_name=calibrated"):
		require.Regexp(t, `^recalibrated  \S+ \S+  1 changed \(current\)\ncalibrated  `, out,
			"the first commit takes commit_name, the second the setfattr name")
		require.False(t, isMountpoint(t, mnt), "umount")
	case strings.Contains(s, "stage/calib"):
		require.Regexp(t, `(?m)^offsets +<f4 +\[3, ?37\]$`, out, "the new dataset is in the version")
		got := run(t, python(t), "-c", `import sys, h5py
f = h5py.File(sys.argv[1], "r")
v = f["_version_data/versions"]
c = v["calib"]
print(v.attrs["current_version"], c.attrs["prev_version"], c["temp"].attrs["unit"], c["temp"][0, 0], c["offsets"][()].sum())`, data)
		require.Equal(t, "calib r5 K 0.0 55.5\n", got)
		require.False(t, isMountpoint(t, mnt), "umount")
	case strings.Contains(s, "ln -sfn versions/r3"):
		require.Regexp(t, `data\.h5: [0-9.]+ KiB -> [0-9.]+ KiB`, out, "compact's sizes")
		require.NotContains(t, out, "r4", "r4, renamed r4-bad, is deleted")
		got := run(t, python(t), "-c", `import sys, h5py
f = h5py.File(sys.argv[1], "r")
v = f["_version_data/versions"]
print(v.attrs["current_version"], v["r5"].attrs["prev_version"], sorted(k for k in v if k != "__first_version__"))`, data)
		require.Equal(t, "r3 r3 ['r1', 'r2', 'r3', 'r5']\n", got)
		require.False(t, isMountpoint(t, mnt), "umount")
	case strings.Contains(s, "vh5fs delete"):
		require.Contains(t, out, "data.h5: would delete 3 of 5 versions:\n  r1  ")
		require.Contains(t, out, "data.h5: deleted 2 of 5 versions:\n  r2  2024-01-01 02:00:00.000000+0000\n  r3  ")
		require.Contains(t, out, "relinked r4: prev_version r3 -> r1\n")
		require.Regexp(t, `(?m)^r5  .*\nr4  .*\nr1  `, out, "the log after")
		require.Contains(t, out, "ok: 3 versions checked\n")
	case r.kind == "live":
		require.Contains(t, out, "user.vh5fs.live.writer=\"swmr-writing\"")
		require.Regexp(t, `(?m)^0000000 +1 +2\b`, out, "od of the growing dataset")
	case r.kind == "ro": // the chunk map pages
		require.Contains(t, out, `"0_0"`)
	default:
		t.Fatalf("%s line %d: no check for this recipe", r.file, r.line)
	}
}
