package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/fsck"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/versions"
)

// TestCrashDuringCommits kills the mount (SIGKILL) at a random moment while a client
// commits continuously. Before anything repairs the file, h5py reads it as any other
// program would (it must, unless the kill fell in a commit's apply: a journal is beside
// the file); then the next read-write mount (which completes an interrupted commit
// from its journal) must show every version h5py saw committed, unchanged, and every
// version the client saw committed, as committed; fsck must find nothing wrong.
// VH5FS_CRASH_TRIALS sets the number of trials (3; 50 with VH5FS_SOAK=1).
func TestCrashDuringCommits(t *testing.T) {
	trials := 3
	if os.Getenv("VH5FS_SOAK") != "" {
		trials = 50
	}
	if n, err := strconv.Atoi(os.Getenv("VH5FS_CRASH_TRIALS")); err == nil && n > 0 {
		trials = n
	}
	base := makeVersioned(t, "--shape", "262144", "--chunks", "1024", "--gzip")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	checked, seen, journals := 0, 0, 0
	for trial := 0; trial < trials; trial++ {
		file := copyPath(t, base)
		m := mount(t, file, "rw")
		var log bytes.Buffer
		client := exec.Command(python(t), "py/commit_loop.py", m.Dir, strings.Repeat("1", trial%5+1))
		client.Stdout = &log
		require.NoError(t, client.Start())
		time.Sleep(time.Duration(300+rng.Intn(1200)) * time.Millisecond)
		require.NoError(t, m.cmd.Process.Signal(syscall.SIGKILL))
		m.wait(t)
		client.Process.Kill()
		client.Wait()
		exec.Command("fusermount3", "-uz", m.Dir).Run()

		// What another program sees before any repair (the lock died with the mount): the
		// file whole, unless the kill fell in a commit's apply, which leaves its journal.
		_, err := os.Stat(file + h5.JournalSuffix)
		journal := err == nil
		if journal {
			journals++
		}
		var sawCommitted []string
		out, err := exec.Command(python(t), "py/version_digests.py", file).Output()
		if err == nil {
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if !strings.HasPrefix(l, "current ") {
					sawCommitted = append(sawCommitted, l)
				}
			}
		} else {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			require.True(t, journal, "trial %d: no journal, yet h5py cannot read the file: %v\n%s", trial, err, stderr)
		}

		// The next read-write mount.
		m = mount(t, file, "rw")
		m.unmount(t)
		_, err = os.Stat(file + h5.JournalSuffix)
		require.ErrorIs(t, err, os.ErrNotExist, "trial %d: the mount completed the interrupted commit", trial)
		findings, err := fsck.Check(file)
		require.NoError(t, err, "trial %d: the file must open", trial)
		require.Empty(t, findings, "trial %d: %s", trial, fsck.Summary(findings))
		out, err = exec.Command(python(t), "py/version_digests.py", file).CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, l := range sawCommitted {
			require.Contains(t, string(out), l+"\n", "trial %d: a version h5py read as committed after the kill is gone or changed", trial)
			seen++
		}
		f, err := versions.Open(file)
		require.NoError(t, err)
		sc := bufio.NewScanner(&log)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) != 2 {
				continue // a line cut by the kill
			}
			d, err := f.Dataset(versions.VersionsGroup + "/" + fields[0] + "/data")
			require.NoError(t, err, "trial %d: version %s reported committed", trial, fields[0])
			b := make([]byte, d.Size())
			_, err = d.ReadAt(b, 0)
			require.NoError(t, err)
			sum := sha256.Sum256(b)
			require.Equal(t, fields[1], hex.EncodeToString(sum[:]), "trial %d: version %s changed", trial, fields[0])
			checked++
		}
		require.NoError(t, f.Close())
	}
	t.Logf("%d trials survived a SIGKILL during commits (%d left a journal); %d versions the client saw committed and %d dataset versions h5py read after the kill re-read intact",
		trials, journals, checked, seen)
}

func copyPath(t *testing.T, src string) string {
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := t.TempDir() + "/data.h5"
	require.NoError(t, os.WriteFile(dst, b, 0o644))
	return dst
}
