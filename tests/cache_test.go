package tests

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The decoded cache (-o cache): tests through real mounts that a hot version is served by
// the kernel (passthrough) with the right bytes, that every fallback reads the right bytes
// too, and that entries follow content, the size limit and crashes.

// cacheFile makes a versioned file of versions v0, v1, v2 of a float64 dataset "data" of
// rows x 512 elements in chunks of 256 rows (gzip+shuffle unless plain).
func cacheFile(t *testing.T, rows int, gzip bool) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "c.h5")
	args := []string{"py/make_versioned.py", file, "--shape", fmt.Sprintf("%d,512", rows), "--chunks", "256,512", "--versions", "3"}
	if gzip {
		args = append(args, "--gzip")
	}
	run(t, python(t), args...)
	return file
}

// versionBytes is what h5py reads of a version's dataset "data": the reference bytes.
func versionBytes(t *testing.T, file, version string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), version+".bin")
	run(t, python(t), "-c", `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    open(sys.argv[3], "wb").write(np.ascontiguousarray(f["_version_data/versions/" + sys.argv[2] + "/data"][()]).tobytes())`,
		file, version, out)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return b
}

// entries lists the complete entries and the temporary files of a cache directory.
func entries(t *testing.T, dir string) (complete, temp []string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	require.NoError(t, err)
	for _, de := range des {
		switch {
		case strings.HasSuffix(de.Name(), ".dec"):
			complete = append(complete, de.Name())
		case strings.Contains(de.Name(), ".tmp-"):
			temp = append(temp, de.Name())
		}
	}
	sort.Strings(complete)
	return complete, temp
}

// waitEntries waits until dir holds n complete entries and no temporary file.
func waitEntries(t *testing.T, dir string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		complete, temp := entries(t, dir)
		if len(complete) == n && len(temp) == 0 {
			return complete
		}
		require.True(t, time.Now().Before(deadline), "cache %s: %v and %v, want %d entries", dir, complete, temp, n)
		time.Sleep(20 * time.Millisecond)
	}
}

func dirSize(t *testing.T, dir string) int64 {
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var n int64
	for _, de := range des {
		info, err := de.Info()
		require.NoError(t, err)
		n += info.Size()
	}
	return n
}

// readsOK reads path whole, with random 4 KiB preads and through numpy.memmap, each
// checked against want.
func readsOK(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "%s: whole read differs", path)
	f, err := os.Open(path)
	require.NoError(t, err)
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 4096)
	for range 200 {
		off := rng.Int63n(int64(len(want)))
		n, _ := f.ReadAt(buf, off)
		require.Equal(t, want[off:off+int64(n)], buf[:n], "pread at %d", off)
	}
	require.NoError(t, f.Close())
	sum := run(t, python(t), "-c", `import sys, hashlib, numpy as np
m = np.memmap(sys.argv[1], dtype="u1", mode="r")
print(hashlib.sha256(m.tobytes()).hexdigest())`, path)
	require.Equal(t, sha(want), strings.TrimSpace(sum), "%s: memmap differs", path)
}

// released waits until the daemon of a debug mount has had a RELEASE for every OPEN:
// close(2) returns before the kernel sends RELEASE, and a cold handle still counted keeps
// the next open of its file cold.
func (m *mounted) released(t *testing.T) {
	t.Helper()
	opens, releases := regexp.MustCompile(`rx \d+: OPEN n`), regexp.MustCompile(`rx \d+: RELEASE n`)
	require.Eventually(t, func() bool {
		log := m.stderr.String()
		return len(opens.FindAllStringIndex(log, -1)) == len(releases.FindAllStringIndex(log, -1))
	}, 10*time.Second, 5*time.Millisecond, "every open file is released")
}

func sha(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// directRead reads path whole with O_DIRECT: the kernel's page cache of the mount is
// bypassed, so every byte comes from vh5fs or (passthrough) the backing file.
func directRead(t *testing.T, path string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "direct.bin")
	run(t, "dd", "if="+path, "of="+out, "bs=1M", "iflag=direct", "status=none")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return b
}

// hotCloses are the daemon's lines for closed hot handles: passthrough and daemon reads.
var hotClose = regexp.MustCompile(`msg="decoded cache: hot handle closed" dataset=(\S+) passthrough=(\w+) daemon_reads=(\d+)`)

func hotCloses(log, dataset string) (passthrough []bool, reads []int) {
	for _, m := range hotClose.FindAllStringSubmatch(log, -1) {
		if strings.HasSuffix(m[1], dataset) {
			n, _ := strconv.Atoi(m[3])
			passthrough, reads = append(passthrough, m[2] == "true"), append(reads, n)
		}
	}
	return passthrough, reads
}

// TestCachePassthrough: the first whole read of a version fills its entry; every later
// open is served by the kernel from it (the daemon serves no read of those handles, the
// OPEN replies carry a backing file), with the bytes h5py reads, for whole reads, preads
// and numpy.memmap; a version only partly read gets no entry.
func TestCachePassthrough(t *testing.T) {
	for _, gzip := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gzip), func(t *testing.T) {
			file := cacheFile(t, 2048, gzip)
			want := versionBytes(t, file, "v1")
			dir := filepath.Join(t.TempDir(), "cache")
			m := mount(t, file, "cache="+dir+",debug")
			path := filepath.Join(m.Dir, "versions/v1/data")
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, want, got, "cold read")
			f, err := os.Open(filepath.Join(m.Dir, "versions/v0/data"))
			require.NoError(t, err)
			_, err = f.ReadAt(make([]byte, 4096), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			waitEntries(t, dir, 1) // v1's only
			m.logged(t, `msg="decoded cache: filled" dataset=\S+/v1/data bytes=`+strconv.Itoa(len(want)))
			m.released(t)

			readsOK(t, path, want)
			require.Equal(t, want, directRead(t, path))
			m.logged(t, `(?s)(hot handle closed.*){4}`)
			pass, reads := hotCloses(m.stderr.String(), "/v1/data")
			require.GreaterOrEqual(t, len(pass), 4, "whole read, preads, memmap, O_DIRECT: hot opens")
			for i := range pass {
				require.True(t, pass[i], "offered to the kernel")
				require.Zero(t, reads[i], "the kernel served every read of a hot handle")
			}
			require.Regexp(t, `backing=\d+ PASSTHROUGH`, m.stderr.String(), "OPEN replies name the backing file")
			require.NotContains(t, m.stderr.String(), "refused passthrough")
		})
	}
}

// TestCacheNoPassthrough: with -o nopassthrough hot handles are read by vh5fs from the
// entry, and the bytes are right.
func TestCacheNoPassthrough(t *testing.T) {
	file := cacheFile(t, 1024, true)
	want := versionBytes(t, file, "v2")
	dir := filepath.Join(t.TempDir(), "cache")
	m := mount(t, file, "cache="+dir+",nopassthrough,debug")
	path := filepath.Join(m.Dir, "versions/v2/data")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
	waitEntries(t, dir, 1)
	m.released(t)
	require.Equal(t, want, directRead(t, path))
	m.logged(t, `hot handle closed`)
	pass, reads := hotCloses(m.stderr.String(), "/v2/data")
	require.Len(t, pass, 1)
	require.False(t, pass[0])
	require.Positive(t, reads[0], "vh5fs read the entry")
	readsOK(t, path, want)
}

// TestCacheNoCapability: a daemon without CAP_SYS_ADMIN (root of a user namespace: the
// kernel checks the capability in the initial one) has passthrough refused; it says so
// once and reads hot handles from the entry, right.
func TestCacheNoCapability(t *testing.T) {
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
dd if="$MNT/versions/v1/data" of="$WORK/hot" bs=1M iflag=direct status=none
cat "$MNT/versions/v1/data" > "$WORK/hot2"
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
	log := string(logb)
	for _, name := range []string{"cold", "hot", "hot2"} {
		b, err := os.ReadFile(filepath.Join(work, name))
		require.NoError(t, err)
		require.Equal(t, want, b, name)
	}
	require.Contains(t, log, "BACKING_OPEN", "passthrough was tried")
	require.Equal(t, 1, strings.Count(log, "kernel refused passthrough"), "said once:\n%s", log)
	pass, reads := hotCloses(log, "/v1/data")
	require.NotEmpty(t, pass)
	require.Positive(t, reads[0], "vh5fs read the entry")
}

// TestCacheMissingDir: a cache directory removed under a running mount, or one that cannot
// be made, leaves reads as they are without a cache, with a log line.
func TestCacheMissingDir(t *testing.T) {
	file := cacheFile(t, 512, true)
	want := versionBytes(t, file, "v1")
	t.Run("removed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cache")
		m := mount(t, file, "cache="+dir)
		require.NoError(t, os.RemoveAll(dir))
		path := filepath.Join(m.Dir, "versions/v1/data")
		for range 2 {
			readsOK(t, path, want)
		}
		m.logged(t, `level=WARN msg="decoded cache: not filled; reads go on without it" dataset=\S+/v1/data`)
		require.NoDirExists(t, dir)
	})
	t.Run("cannot be made", func(t *testing.T) {
		blocker := filepath.Join(t.TempDir(), "file")
		require.NoError(t, os.WriteFile(blocker, nil, 0o644))
		m := mount(t, file, "cache="+blocker+"/cache")
		m.logged(t, `level=WARN msg="decoded cache off: reads go on without it"`)
		readsOK(t, filepath.Join(m.Dir, "versions/v1/data"), want)
	})
}

// TestCacheDiskFull: a cache on a full file system fills nothing, leaves no temporary
// file, logs why, and reads stay right.
func TestCacheDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("needs root to mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	file := cacheFile(t, 1024, true) // 4 MiB a version
	want := versionBytes(t, file, "v1")
	m := mount(t, file, "cache="+dir+",cache_size=64M")
	path := filepath.Join(m.Dir, "versions/v1/data")
	readsOK(t, path, want)
	m.logged(t, `level=WARN msg="decoded cache: not filled; reads go on without it" dataset=\S+/v1/data err=.*no space left on device`)
	complete, temp := entries(t, dir)
	require.Empty(t, complete)
	require.Empty(t, temp)
	readsOK(t, path, want)
}

// TestCacheEviction: the directory never holds more than cache_size; the least recently
// used entry goes first, and a hot open counts as a use.
func TestCacheEviction(t *testing.T) {
	file := cacheFile(t, 1024, false) // 4 MiB a version
	dir := filepath.Join(t.TempDir(), "cache")
	const limit = 10 << 20 // two entries
	m := mount(t, file, "cache="+dir+",cache_size=10M")
	read := func(v string) {
		_, err := os.ReadFile(filepath.Join(m.Dir, "versions", v, "data"))
		require.NoError(t, err)
	}
	read("v0")
	k0 := waitEntries(t, dir, 1)[0]
	read("v1")
	both := waitEntries(t, dir, 2)
	time.Sleep(20 * time.Millisecond)
	read("v0") // hot: v1 is now the least recently used
	time.Sleep(20 * time.Millisecond)
	read("v2")
	deadline := time.Now().Add(30 * time.Second)
	for {
		complete, temp := entries(t, dir)
		require.LessOrEqual(t, dirSize(t, dir), int64(limit), "%v %v", complete, temp)
		if len(temp) == 0 && len(complete) == 2 && !equalSets(complete, both) {
			require.Contains(t, complete, k0, "the entry used last stays")
			break
		}
		require.True(t, time.Now().Before(deadline), "v2 never filled: %v %v", complete, temp)
		time.Sleep(5 * time.Millisecond)
	}
	readsOK(t, filepath.Join(m.Dir, "versions/v1/data"), versionBytes(t, file, "v1"))
}

func equalSets(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestCacheKey: an entry follows its content: a rename through a read-write mount, the
// deletion of another version and compact keep it (the renamed version opens hot with no
// new fill), while modify's rechunk makes a new one; the bytes stay h5py's.
func TestCacheKey(t *testing.T) {
	file := cacheFile(t, 1024, true)
	want := versionBytes(t, file, "v1")
	dir := filepath.Join(t.TempDir(), "cache")
	m := mount(t, file, "cache="+dir)
	_, err := os.ReadFile(filepath.Join(m.Dir, "versions/v1/data"))
	require.NoError(t, err)
	first := waitEntries(t, dir, 1)
	m.unmount(t)

	rw := mount(t, file, "rw")
	require.NoError(t, os.Rename(filepath.Join(rw.Dir, "versions/v1"), filepath.Join(rw.Dir, "versions/renamed")))
	rw.unmount(t)

	hot := func(step string, wantEntries []string) {
		t.Helper()
		m := mount(t, file, "cache="+dir+",debug")
		readsOK(t, filepath.Join(m.Dir, "versions/renamed/data"), want)
		m.logged(t, `hot handle closed`)
		pass, reads := hotCloses(m.stderr.String(), "/renamed/data")
		require.NotEmpty(t, pass, "%s: opens hot", step)
		for i := range pass {
			require.True(t, pass[i], step)
			require.Zero(t, reads[i], step)
		}
		complete, _ := entries(t, dir)
		require.Equal(t, wantEntries, complete, step)
		m.unmount(t)
	}
	hot("rename", first)

	_, stderr, code := vh5fsRun(t, "delete", file, "v0")
	require.Equal(t, 0, code, stderr)
	_, stderr, code = vh5fsRun(t, "compact", file)
	require.Equal(t, 0, code, stderr)
	hot("delete and compact", first)

	_, stderr, code = vh5fsRun(t, "modify", file, "data", "--chunks", "128,512")
	require.Equal(t, 0, code, stderr)
	m = mount(t, file, "cache="+dir+",debug")
	path := filepath.Join(m.Dir, "versions/renamed/data")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NotContains(t, m.stderr.String(), "hot handle closed", "a rechunked dataset does not match the old entry")
	after := waitEntries(t, dir, 2)
	require.Contains(t, after, first[0])
	readsOK(t, path, want)
}

// TestCacheKillWhileFilling: a daemon killed while it fills leaves a temporary file that is
// never served; the next mount removes it at start, reads right, and fills anew.
func TestCacheKillWhileFilling(t *testing.T) {
	file := cacheFile(t, 32768, true) // 128 MiB
	want := versionBytes(t, file, "v1")
	dir := filepath.Join(t.TempDir(), "cache")
	m := mount(t, file, "cache="+dir)
	path := filepath.Join(m.Dir, "versions/v1/data")
	f, err := os.Open(path)
	require.NoError(t, err)
	_, err = f.ReadAt(make([]byte, 1), int64(len(want))-1) // reaches the end: the fill starts
	require.NoError(t, err)
	require.NoError(t, f.Close())
	deadline := time.Now().Add(30 * time.Second)
	for {
		complete, temp := entries(t, dir)
		require.Empty(t, complete, "filled before the kill: make the dataset larger")
		if len(temp) > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline))
		time.Sleep(time.Millisecond)
	}
	m.signal(t, unix.SIGKILL)
	m.wait(t)
	run(t, "umount", "-l", m.Dir)
	complete, temp := entries(t, dir)
	require.Empty(t, complete, "an entry killed while filling is not complete")
	require.Len(t, temp, 1, "the killed fill's temporary file is left")

	m2 := mount(t, file, "cache="+dir+",debug")
	complete, temp = entries(t, dir)
	require.Empty(t, temp, "removed at start")
	require.Empty(t, complete)
	readsOK(t, filepath.Join(m2.Dir, "versions/v1/data"), want)
	waitEntries(t, dir, 1)
	readsOK(t, filepath.Join(m2.Dir, "versions/v1/data"), want)
}

// TestCacheMixedOpens: the kernel cannot serve one file from its page cache and from a
// backing file at once, so an open while a cold handle is open stays cold (and works),
// and opens while a hot handle is open are hot.
func TestCacheMixedOpens(t *testing.T) {
	file := cacheFile(t, 1024, true)
	want := versionBytes(t, file, "v1")
	dir := filepath.Join(t.TempDir(), "cache")
	m := mount(t, file, "cache="+dir+",debug")
	path := filepath.Join(m.Dir, "versions/v1/data")
	cold, err := os.Open(path)
	require.NoError(t, err)
	got := make([]byte, len(want))
	_, err = cold.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	waitEntries(t, dir, 1)
	readsOK(t, path, want) // while the cold handle is open: cold too
	require.NotContains(t, m.stderr.String(), "hot handle closed")
	require.NoError(t, cold.Close())
	m.released(t)

	hot, err := os.Open(path)
	require.NoError(t, err)
	readsOK(t, path, want) // while a hot handle is open: hot
	_, err = hot.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, hot.Close())
	m.logged(t, `(?s)(hot handle closed.*){4}`)
	pass, reads := hotCloses(m.stderr.String(), "/v1/data")
	for i := range pass {
		require.True(t, pass[i])
		require.Zero(t, reads[i])
	}
}

// TestCacheWarm: vh5fs warm fills a version's entries ahead of any read; a mount then
// opens them hot from the first open, and a second warm finds them cached.
func TestCacheWarm(t *testing.T) {
	file := cacheFile(t, 1024, true)
	want := versionBytes(t, file, "v1")
	dir := filepath.Join(t.TempDir(), "cache")
	out, stderr, code := vh5fsRun(t, "warm", file, "v1", "--cache", dir)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, fmt.Sprintf("v1/data: filled, %d bytes\n", len(want)), out)
	out, stderr, code = vh5fsRun(t, "warm", file, "v1", "data", "--cache", dir)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "v1/data: already cached\n", out)
	_, stderr, code = vh5fsRun(t, "warm", file, "v1", "nope", "--cache", dir)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no dataset nope")
	waitEntries(t, dir, 1)

	m := mount(t, file, "cache="+dir+",debug")
	readsOK(t, filepath.Join(m.Dir, "versions/v1/data"), want)
	m.logged(t, `(?s)(hot handle closed.*){3}`)
	pass, reads := hotCloses(m.stderr.String(), "/v1/data")
	for i := range pass {
		require.True(t, pass[i])
		require.Zero(t, reads[i])
	}
}
