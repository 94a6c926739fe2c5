package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pkg/xattr"
	"github.com/stretchr/testify/require"
)

// vh5fsRunEnv is vh5fsRun with env added to the environment.
func vh5fsRunEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(vh5fsBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
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

// TestAnswers2Times: --at, --before and at/TIME take a time as date(1) prints it, in its
// default C-locale form, with -R, '+%F %T %z', --iso-8601 and --rfc-3339, in UTC and in a
// zone with a name (Europe/Paris: CET in January, one hour ahead; the daemon and the
// commands run with the same TZ, as on one machine). basic_1d's v1..v4 are stamped 2024-01-01 00:00..03:00 UTC; the time
// is 02:30 UTC, so v3 is current then and v1..v3 are older.
func TestAnswers2Times(t *testing.T) {
	if _, err := exec.LookPath("date"); err != nil {
		t.Skip("no date")
	}
	const at = "@1704076200" // 2024-01-01 02:30:00 UTC
	formats := [][]string{{}, {"-R"}, {"+%F %T %z"}, {"--iso-8601=seconds"}, {"--iso-8601=ns"}, {"--rfc-3339=seconds"}}
	file := copyPath(t, fixturePath("basic_1d.h5"))
	for _, tz := range []string{"UTC", "Europe/Paris"} {
		if _, err := os.Stat("/usr/share/zoneinfo/" + tz); err != nil {
			t.Logf("%s: no zoneinfo, skipped", tz)
			continue
		}
		env := []string{"TZ=" + tz, "LC_ALL=C"}
		var times []string
		for _, f := range formats {
			cmd := exec.Command("date", append([]string{"-d", at}, f...)...)
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.Output()
			require.NoError(t, err, "date %v", f)
			times = append(times, strings.TrimSpace(string(out)))
		}
		t.Run(tz, func(t *testing.T) {
			for _, tm := range times {
				out, stderr, code := vh5fsRunEnv(t, env, "log", "--oneline", "-n", "1", "--at", tm, file)
				require.Equal(t, 0, code, "%q: %s", tm, stderr)
				require.True(t, strings.HasPrefix(out, "v3 "), "%q: %s", tm, out)
				out, stderr, code = vh5fsRunEnv(t, env, "delete", "-n", file, "--before", tm)
				require.Equal(t, 0, code, "%q: %s", tm, stderr)
				require.Contains(t, out, "would delete 3 of 4 versions", tm)
			}
			mnt := t.TempDir()
			m := startMount(t, mnt, vh5fsArgs(file, mnt, "ro"), env...)
			defer m.unmount(t)
			want, err := os.ReadFile(filepath.Join(mnt, "versions", "v3", "x"))
			require.NoError(t, err)
			for _, tm := range times {
				link, err := os.Readlink(filepath.Join(mnt, "at", tm))
				require.NoError(t, err, tm)
				require.Equal(t, "../versions/v3", link, tm)
				got, err := os.ReadFile(filepath.Join(mnt, "at", tm, "x"))
				require.NoError(t, err, tm)
				require.Equal(t, want, got, tm)
			}
			// A zone name that is neither UTC, GMT nor the local zone's says no offset.
			_, err = os.Lstat(filepath.Join(mnt, "at", "2024-01-01 02:30:00 PST"))
			require.ErrorIs(t, err, os.ErrNotExist)
			_, stderr, code := vh5fsRunEnv(t, env, "log", "--at", "2024-01-01 02:30:00 PST", file)
			require.Equal(t, 2, code)
			require.Contains(t, stderr, "zone PST is not UTC, GMT or the local zone's")
		})
	}
	help, _, code := vh5fsRun(t, "help", "time")
	require.Equal(t, 0, code)
	for _, form := range []string{"Mon Jan  1 02:30:00 UTC 2024", "date -R", "date '+%F %T %z'", "--iso-8601=seconds", "2024-01-01 03:30:00 +0100"} {
		require.Contains(t, help, form)
	}
}

// TestAnswers2InfoGroup: `vh5fs info FILE:VERSION/GROUP` describes the group, as h5py
// reads it: its attributes, its datasets with dtype and shape, its groups; so does
// FILE:GROUP with --at. A name that is neither stays an error.
func TestAnswers2InfoGroup(t *testing.T) {
	file := fixturePath("nested.h5")
	script := `import h5py, json, sys
f = h5py.File(sys.argv[1], "r")
out = {}
for v, g in f["_version_data/versions"].items():
    if v == "__first_version__":
        continue
    def walk(grp, rel):
        for name, o in grp.items():
            if isinstance(o, h5py.Group):
                p = rel + name
                out.setdefault(v, {})[p] = {
                    "attrs": {k: (x.tolist() if hasattr(x, "tolist") else x) for k, x in o.attrs.items()},
                    "datasets": {n: [d.dtype.str, list(d.shape)] for n, d in o.items() if isinstance(d, h5py.Dataset)},
                    "groups": sorted(n + "/" for n, d in o.items() if isinstance(d, h5py.Group))}
                walk(o, p + "/")
    walk(g, "")
print(json.dumps(out))
`
	type group struct {
		Attrs    map[string]any    `json:"attrs"`
		Datasets map[string][2]any `json:"datasets"`
		Groups   []string          `json:"groups"`
	}
	var want map[string]map[string]group
	require.NoError(t, json.Unmarshal([]byte(run(t, python(t), "-c", script, file)), &want))
	require.NotEmpty(t, want["dropped"]["sensors/north"].Attrs, "the fixture has group attributes")
	n := 0
	for v, groups := range want {
		for p, w := range groups {
			out, stderr, code := vh5fsRun(t, "info", file+":"+v+"/"+p+"/")
			require.Equal(t, 0, code, "%s/%s: %s", v, p, stderr)
			got := parseGroupInfo(t, out)
			require.Equal(t, v, got.version)
			require.Equal(t, p, got.group)
			require.Len(t, got.attrs, len(w.Attrs), out)
			for name, val := range w.Attrs {
				var g any
				require.NoError(t, json.Unmarshal([]byte(got.attrs[name]), &g), out)
				require.Equal(t, val, g, "%s/%s attribute %s", v, p, name)
			}
			require.Len(t, got.datasets, len(w.Datasets), out)
			for name, ds := range w.Datasets {
				shape, _ := json.Marshal(ds[1])
				require.Equal(t, fmt.Sprintf("%s %s", ds[0], shape), got.datasets[name], "%s/%s/%s", v, p, name)
			}
			require.ElementsMatch(t, w.Groups, got.groups, out)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 7)
	// --at: the part after ':' names the group in the version current then (added).
	out, stderr, code := vh5fsRun(t, "info", "--at", "2024-01-01 01:30:00 +0000", file+":sensors")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "added", parseGroupInfo(t, out).version)
	require.ElementsMatch(t, []string{"north/", "south/"}, parseGroupInfo(t, out).groups)
	// A dataset is still described as one; a missing name is an error.
	out, _, code = vh5fsRun(t, "info", file+":dropped/sensors/south/level")
	require.Equal(t, 0, code)
	require.Equal(t, "<f4", infoFields(out)["dtype"])
	_, stderr, code = vh5fsRun(t, "info", file+":base/sensors/south")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `version base has no dataset "sensors/south"`)
}

// groupInfoOut is what `vh5fs info FILE:VERSION/GROUP` printed.
type groupInfoOut struct {
	version, group string
	attrs          map[string]string // name -> JSON text
	datasets       map[string]string // name -> "dtype shape"
	groups         []string
}

// parseGroupInfo reads the sections of info's group output: "key: value" lines, each
// list's entries indented below its count.
func parseGroupInfo(t *testing.T, out string) groupInfoOut {
	g := groupInfoOut{attrs: map[string]string{}, datasets: map[string]string{}}
	section := ""
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "  ") {
			k, v, ok := strings.Cut(line, ":")
			require.True(t, ok, line)
			section, v = k, strings.TrimSpace(v)
			switch k {
			case "version":
				g.version = v
			case "group":
				g.group = v
			}
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch section {
		case "attributes":
			g.attrs[name] = rest
		case "datasets":
			g.datasets[name] = rest
		case "groups":
			g.groups = append(g.groups, name)
		default:
			t.Fatalf("entry %q under %q", line, section)
		}
	}
	return g
}

// TestAnswers2WarmEvicts: vh5fs warm says what it evicted, at the open (a --cache-size
// smaller than the directory holds) and at a fill, as a count and a total in its line,
// and never says "already cached" (or "filled") of an entry the run then evicted: a run
// keeps the entries it found or filled, and a dataset with no room beside them is not
// cached, saying so.
func TestAnswers2WarmEvicts(t *testing.T) {
	file := cacheFile(t, 1024, false) // v0, v1, v2: 4 MiB each
	const size = 4 << 20
	dir := filepath.Join(t.TempDir(), "cache")
	warm := func(version, cacheSize string) []string {
		t.Helper()
		out, stderr, code := vh5fsRun(t, "warm", file, version, "--cache", dir, "--cache-size", cacheSize)
		require.Equal(t, 0, code, stderr)
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	filled := fmt.Sprintf("filled, %d bytes", size)
	for _, c := range []struct {
		version, cacheSize string
		want               []string
		entries            int // complete entries after the run
	}{
		{"v0", "10M", []string{"v0/data: " + filled}, 1},
		{"v1", "10M", []string{"v1/data: " + filled}, 2},
		{"v2", "10M", []string{"v2/data: " + filled + "; 1 entry of 4.0 MiB evicted to make room"}, 2},
		{"v2", "10M", []string{"v2/data: already cached"}, 2},
		// v1 (older than v2) goes at the open, v2 for v1's fill.
		{"v1", "5M", []string{"cache: 1 entry of 4.0 MiB evicted to fit in 5.0 MiB",
			"v1/data: " + filled + "; 1 entry of 4.0 MiB evicted to make room"}, 1},
		// The case: the entry goes at the open, and nothing says it is cached.
		{"v1", "3M", []string{"cache: 1 entry of 4.0 MiB evicted to fit in 3.0 MiB",
			fmt.Sprintf("v1/data: not cached: %d bytes, more than the cache's %d", size, 3<<20)}, 0},
	} {
		require.Equal(t, c.want, warm(c.version, c.cacheSize), "warm %s --cache-size %s", c.version, c.cacheSize)
		complete, temp := entries(t, dir)
		require.Len(t, complete, c.entries, "warm %s --cache-size %s", c.version, c.cacheSize)
		require.Empty(t, temp)
	}

	// A version of two datasets, in a cache that holds one: the second is not cached, the
	// first stays, and a second run says the first is cached, truly.
	mnt := t.TempDir()
	m := startMount(t, mnt, vh5fsArgs(file, mnt, "rw"))
	stage := filepath.Join(mnt, "stage", "two")
	require.NoError(t, os.Mkdir(stage, 0o755))
	other := filepath.Join(stage, "other")
	require.NoError(t, os.WriteFile(other, nil, 0o644))
	require.NoError(t, xattr.Set(other, "user.vh5fs.create", []byte(`{"dtype": "<f8", "shape": [0, 512], "chunks": [256, 512]}`)))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	require.NoError(t, os.WriteFile(other, b, 0o644))
	require.NoError(t, os.Rename(stage, filepath.Join(mnt, "versions", "two")))
	m.unmount(t)
	noRoom := fmt.Sprintf("two/other: not cached: %d bytes; the cache's %d hold this run's other datasets (and fills under way)", size, 6<<20)
	require.NoError(t, os.RemoveAll(dir))
	require.Equal(t, []string{"two/data: " + filled, noRoom}, warm("two", "6M"))
	require.Equal(t, []string{"two/data: already cached", noRoom}, warm("two", "6M"))
	complete, _ := entries(t, dir)
	require.Len(t, complete, 1)
}

// TestAnswers2CacheNoPassthroughAtOpen: a daemon whose passthrough the kernel refuses (no
// CAP_SYS_ADMIN in the initial user namespace: root of a user namespace, as
// TestCacheNoCapability runs it) says so once, at the first hot open, before any read; its
// debug lines never claim passthrough for a hot handle, and the reads it serves are right.
func TestAnswers2CacheNoPassthroughAtOpen(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	file := cacheFile(t, 1024, true)
	want := versionBytes(t, file, "v1")
	work := t.TempDir()
	dir, mnt, logf := filepath.Join(work, "cache"), filepath.Join(work, "mnt"), filepath.Join(work, "log")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	script := `set -e
"$VH5FS" mount -o "cache=$CACHE,debug" "$FILE" "$MNT" 2>"$LOG" &
for i in $(seq 200); do grep -q 'msg=mounted' "$LOG" 2>/dev/null && break; sleep 0.05; done
cat "$MNT/versions/v1/data" > "$WORK/cold"
for i in $(seq 600); do ls "$CACHE" | grep -q '\.dec$' && break; sleep 0.05; done
: < "$MNT/versions/v1/data"
for i in $(seq 200); do grep -q 'hot handle closed' "$LOG" && break; sleep 0.05; done
cp "$LOG" "$WORK/log-open"
dd if="$MNT/versions/v1/data" of="$WORK/hot" bs=1M iflag=direct status=none
for i in $(seq 200); do [ "$(grep -c 'hot handle closed' "$LOG")" -ge 2 ] && break; sleep 0.05; done
umount "$MNT"
wait
`
	cmd := exec.Command("unshare", "-Urm", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "VH5FS="+vh5fsBin, "CACHE="+dir, "FILE="+file, "MNT="+mnt, "LOG="+logf, "WORK="+work)
	out, err := cmd.CombinedOutput()
	logb, _ := os.ReadFile(logf)
	if err != nil && bytes.Contains(out, []byte("unshare failed")) {
		t.Skipf("no user namespaces: %s", out)
	}
	require.NoError(t, err, "%s\n%s", out, logb)
	for _, name := range []string{"cold", "hot"} {
		b, err := os.ReadFile(filepath.Join(work, name))
		require.NoError(t, err)
		require.Equal(t, want, b, name)
	}
	atOpen, err := os.ReadFile(filepath.Join(work, "log-open"))
	require.NoError(t, err)
	refusal := `level=WARN msg="decoded cache: the kernel refused passthrough (it needs CAP_SYS_ADMIN in the initial user namespace and Linux 6.9 or later): ` +
		`vh5fs serves the reads of cached datasets from their entries itself" dataset=/_version_data/versions/v1/data err="operation not permitted"`
	require.Contains(t, string(atOpen), refusal, "said at the hot open that read nothing:\n%s", atOpen)
	pass, reads := hotCloses(string(atOpen), "/v1/data")
	require.Equal(t, []bool{false}, pass)
	require.Equal(t, []int{0}, reads)
	log := string(logb)
	require.Equal(t, 1, strings.Count(log, "kernel refused passthrough"), "said once:\n%s", log)
	pass, reads = hotCloses(log, "/v1/data")
	require.Equal(t, []bool{false, false}, pass, "no hot handle claims passthrough")
	require.Positive(t, reads[1], "vh5fs read the entry (O_DIRECT: not the page cache the cold read left)")
	require.NotRegexp(t, `backing=\d+ PASSTHROUGH`, log, "no OPEN reply named a backing file")
}

// TestAnswers2ModifyEstimate: the growth `vh5fs modify -n` prints is within 25% of what
// the rewrite then adds to the file (it said 416 KiB where many_versions grew by 1.0 MiB:
// 300 versions that each changed a chunk make 300 new slots, not the 38 the old slots'
// data fills), and says how it sampled compressed data.
func TestAnswers2ModifyEstimate(t *testing.T) {
	estimate := regexp.MustCompile(`estimate: the file \(now [^)]+\) would grow by about ([0-9.]+ \S+?)[ ;]`)
	for _, c := range []struct {
		file, dataset string
		args          []string
		sample        bool // the line names a sample of new chunks compressed
	}{
		{"many_versions.h5", "counts", []string{"--chunks", "512"}, false},
		{"many_versions.h5", "counts", []string{"--chunks", "2048", "--compression", "gzip"}, true},
		{"many_versions.h5", "counts", []string{"--chunks", "16"}, false},
		{"grid_2d_gzip.h5", "temp", []string{"--chunks", "20,20", "--compression", "lzf"}, true},
		{"grid_2d_gzip.h5", "temp", []string{"--chunks", "5,5"}, false}, // 200-byte chunks: gzip saves under 10%
		{"sparse.h5", "s", []string{"--chunks", "7"}, false},
		{"nested.h5", "sensors/north/cube", []string{"--chunks", "2,2,2"}, false},
	} {
		t.Run(c.file+" "+strings.Join(c.args, " "), func(t *testing.T) {
			file := copyPath(t, fixturePath(c.file))
			args := append([]string{"modify", file, c.dataset}, c.args...)
			out, stderr, code := vh5fsRun(t, append(args, "-n")...)
			require.Equal(t, 0, code, stderr)
			m := estimate.FindStringSubmatch(out)
			require.NotNil(t, m, out)
			require.Equal(t, c.sample, strings.Contains(out, "new chunks stored in"), out)
			before, err := os.Stat(file)
			require.NoError(t, err)
			_, stderr, code = vh5fsRun(t, args...)
			require.Equal(t, 0, code, stderr)
			after, err := os.Stat(file)
			require.NoError(t, err)
			grew := after.Size() - before.Size()
			est := parseSize(t, m[1])
			t.Logf("estimated %s, grew by %d bytes (%+.0f%%)", m[1], grew, 100*float64(est-grew)/float64(grew))
			require.InDelta(t, float64(grew), float64(est), 0.25*float64(grew), "estimated %s, grew by %d bytes", m[1], grew)
		})
	}
}
