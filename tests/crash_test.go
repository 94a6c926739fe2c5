package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand"
	"os"
	"os/exec"
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
// commits continuously, then checks that the file opens, passes the invariant checker, and
// that every version the client saw committed reads exactly as committed. VH5FS_SOAK=1 runs
// 50 trials instead of 3.
func TestCrashDuringCommits(t *testing.T) {
	trials := 3
	if os.Getenv("VH5FS_SOAK") != "" {
		trials = 50
	}
	base := makeVersioned(t, "--shape", "262144", "--chunks", "1024", "--gzip")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	survived, checked, rolledBack := 0, 0, 0
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

		// A kill inside a commit's sync leaves its undo journal: roll back first, as the next
		// read-write mount would.
		rolled, err := h5.Recover(file)
		require.NoError(t, err)
		if rolled {
			rolledBack++
		}
		findings, err := fsck.Check(file)
		require.NoError(t, err, "trial %d: the file must open", trial)
		require.Empty(t, findings, "trial %d: %s", trial, fsck.Summary(findings))
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
		survived++
	}
	t.Logf("%d/%d trials survived a SIGKILL during commits (%d killed inside a sync and rolled back); %d committed versions re-read intact", survived, trials, rolledBack, checked)
}

func copyPath(t *testing.T, src string) string {
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := t.TempDir() + "/data.h5"
	require.NoError(t, os.WriteFile(dst, b, 0o644))
	return dst
}
