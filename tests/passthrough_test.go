package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
)

// Passthrough writes: an O_TRUNC open of a version's dataset in a read-write mount writes
// a staging file the kernel serves; its commit must be the commit of the same bytes
// written through vh5fs.

// stagingFiles lists the staging files of passthrough writes in a cache directory.
func stagingFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		if strings.HasPrefix(de.Name(), "write.tmp-") {
			out = append(out, de.Name())
		}
	}
	return out
}

// TestGoldenThroughPassthrough applies each golden edit through vh5fs and reads the
// content it gives, then writes that content whole (O_TRUNC) over the base version of two
// more copies, one through a mount that serves the writes itself (nocache), one through
// passthrough: the two versions must be the same, chunk for chunk and slot for slot.
func TestGoldenThroughPassthrough(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("passthrough needs CAP_SYS_ADMIN")
	}
	edits, err := fixture.Edits()
	require.NoError(t, err)
	for _, e := range edits {
		t.Run(e.Name, func(t *testing.T) {
			served := fixture.Copy(t, e.Before)
			m := mount(t, served, "rw,nocache,commit_name=golden")
			f, err := os.OpenFile(filepath.Join(m.Dir, "versions", e.BaseVersion, e.Dataset), os.O_RDWR, 0)
			require.NoError(t, err)
			applyByteOps(t, f, e.ByteOps)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
			content, err := os.ReadFile(filepath.Join(m.Dir, "versions", "golden", e.Dataset))
			require.NoError(t, err)
			m.unmount(t)

			replace := func(opts string, passthrough bool) *conform.Commit {
				file := fixture.Copy(t, e.Before)
				from, err := conform.Largest(file, e.BaseVersion, e.Dataset)
				require.NoError(t, err)
				dir := filepath.Join(t.TempDir(), "cache")
				m := mount(t, file, "rw,commit_name=golden,"+opts+dir)
				f, err := os.OpenFile(filepath.Join(m.Dir, "versions", e.BaseVersion, e.Dataset), os.O_WRONLY|os.O_TRUNC, 0)
				require.NoError(t, err)
				require.Equal(t, passthrough, len(stagingFiles(t, dir)) == 1, "the open is passthrough")
				_, err = f.Write(content)
				require.NoError(t, err)
				require.NoError(t, f.Sync())
				require.NoError(t, f.Close())
				got, err := os.ReadFile(filepath.Join(m.Dir, "versions", "golden", e.Dataset))
				require.NoError(t, err)
				require.Equal(t, content, got)
				m.unmount(t)
				checkFile(t, file)
				d, err := conform.Read(file, "golden", e.Dataset, from)
				require.NoError(t, err)
				return d
			}
			want := replace("nopassthrough,cache=", false)
			got := replace("cache=", true)
			require.Empty(t, conform.Diff(got, want))
		})
	}
}

// TestPassthroughWrites: replacing writes through passthrough, each checked by h5py and
// the invariant checker: cp, a shell's > that writes nothing, ftruncate, a write after
// fsync, a partial last row refused, and other opens while a passthrough handle is open.
func TestPassthroughWrites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("passthrough needs CAP_SYS_ADMIN")
	}
	file := cacheFile(t, 1024, false)
	v1 := versionBytes(t, file, "v1")
	row := 512 * 8
	dir := filepath.Join(t.TempDir(), "cache")
	m := mount(t, file, "rw,cache="+dir)
	path := filepath.Join(m.Dir, "versions", "v1", "data")
	newContent := func(rows int, seed byte) []byte {
		b := make([]byte, rows*row)
		for i := range b {
			b[i] = byte(i*7) ^ seed
		}
		return b
	}
	commits := func() int {
		des, err := os.ReadDir(filepath.Join(m.Dir, "versions"))
		require.NoError(t, err)
		return len(des)
	}

	t.Run("cp", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "src")
		want := newContent(700, 1)
		require.NoError(t, os.WriteFile(src, want, 0o644))
		before := commits()
		run(t, "cp", src, path)
		require.Equal(t, before+1, commits(), "one version")
		got, err := os.ReadFile(filepath.Join(m.Dir, "current", "data"))
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, v1, readAll(t, path), "the version written over is unchanged")
	})
	t.Run("redirect of nothing", func(t *testing.T) {
		before := commits()
		run(t, "sh", "-c", ": > "+path)
		// The last close's commit runs after close(2) returned (RELEASE is asynchronous).
		deadline := time.Now().Add(10 * time.Second)
		for commits() == before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		require.Equal(t, before+1, commits(), "the empty content commits at the last close")
		got, err := os.ReadFile(filepath.Join(m.Dir, "current", "data"))
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("write after fsync, ftruncate", func(t *testing.T) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
		require.NoError(t, err)
		require.Len(t, stagingFiles(t, dir), 1)
		a := newContent(300, 2)
		_, err = f.WriteAt(a, 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		first := currentVersion(t, m.Dir)
		got, err := os.ReadFile(filepath.Join(m.Dir, "versions", first, "data"))
		require.NoError(t, err)
		require.Equal(t, a, got)
		_, err = f.WriteAt([]byte{1, 2, 3}, 5)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(int64(200*row)))
		st, err := f.Stat()
		require.NoError(t, err)
		require.EqualValues(t, 200*row, st.Size())
		require.NoError(t, f.Close())
		want := append([]byte(nil), a[:200*row]...)
		copy(want[5:], []byte{1, 2, 3})
		second := currentVersion(t, m.Dir)
		require.NotEqual(t, first, second)
		got, err = os.ReadFile(filepath.Join(m.Dir, "versions", second, "data"))
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
	t.Run("rewrite behind the follower", func(t *testing.T) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		want := newContent(1024, 4)
		_, err = f.WriteAt(want, 0)
		require.NoError(t, err)
		time.Sleep(300 * time.Millisecond) // the follower has loaded the whole pieces
		for _, off := range []int64{5, 1 << 20, int64(len(want)) - 3} {
			_, err = f.WriteAt([]byte{9, 9, 9}, off)
			require.NoError(t, err)
			copy(want[off:], []byte{9, 9, 9})
		}
		require.NoError(t, f.Close())
		got, err := os.ReadFile(filepath.Join(m.Dir, "current", "data"))
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
	t.Run("numpy.memmap w+", func(t *testing.T) {
		before := commits()
		run(t, python(t), "-c", `import sys, numpy as np
m = np.memmap(sys.argv[1], dtype="<f8", mode="w+", shape=(512, 512))
m[:] = 7.5
m.flush()
del m`, path)
		want := make([]byte, 0, 512*row)
		for range 512 * 512 {
			want = append(want, 0, 0, 0, 0, 0, 0, 0x1e, 0x40) // 7.5 as <f8
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := os.ReadFile(filepath.Join(m.Dir, "current", "data"))
			require.NoError(t, err)
			if bytes.Equal(got, want) || !time.Now().Before(deadline) {
				require.Equal(t, want, got, "the mapping's writes are committed (at the last close)")
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		require.Greater(t, commits(), before)
	})
	t.Run("partial row refused", func(t *testing.T) {
		before := commits()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.Write(make([]byte, row+8))
		require.NoError(t, err)
		require.ErrorIs(t, f.Sync(), syscall.EINVAL)
		f.Close()
		require.Equal(t, before, commits())
	})
	t.Run("other opens wait for it", func(t *testing.T) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		done := make(chan []byte)
		go func() {
			b, _ := os.ReadFile(path) // waits until f is released
			done <- b
		}()
		_, err = f.Write(newContent(10, 3))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.Equal(t, v1, <-done, "a reader of the version never sees the writer's bytes")
	})
	m.unmount(t)
	checkFile(t, file)
}

// TestPassthroughWriteNoCapability: a mount without CAP_SYS_ADMIN in the initial user
// namespace (a user namespace's root) cannot give the kernel backing files: a replacing
// write is served by vh5fs as before, commits the same bytes, and the mount says so once.
func TestPassthroughWriteNoCapability(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	file := cacheFile(t, 1024, false)
	work := t.TempDir()
	dir, mnt, logf := filepath.Join(work, "cache"), filepath.Join(work, "mnt"), filepath.Join(work, "log")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	want := make([]byte, 600*512*8)
	for i := range want {
		want[i] = byte(i * 13)
	}
	require.NoError(t, os.WriteFile(filepath.Join(work, "src"), want, 0o644))
	script := `set -e
"$VH5FS" mount -o "rw,cache=$CACHE" "$FILE" "$MNT" 2>"$LOG" &
for i in $(seq 200); do grep -q 'msg=mounted' "$LOG" 2>/dev/null && break; sleep 0.05; done
cp "$WORK/src" "$MNT/versions/v1/data"
cp "$WORK/src" "$MNT/versions/v0/data"
cat "$MNT/current/data" > "$WORK/got"
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
	got, err := os.ReadFile(filepath.Join(work, "got"))
	require.NoError(t, err)
	require.Equal(t, want, got)
	log := string(logb)
	require.Equal(t, 1, strings.Count(log, "passthrough writes off"), "said once:\n%s", log)
	require.Equal(t, 2, strings.Count(log, "msg=committed"), "both writes committed:\n%s", log)
	checkFile(t, file)
}
