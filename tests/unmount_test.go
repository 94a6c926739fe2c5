package tests

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSignalBusyMount: SIGTERM while a file is open. The unmount is busy, so vh5fs retries
// it; a file closed within the grace period lets it unmount normally, one kept open gets
// the mount detached lazily: gone from the tree at once, the open file still served, and
// the process exits once it is closed.
func TestSignalBusyMount(t *testing.T) {
	waitFor := func(t *testing.T, what string, d time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The log file, not the process's stderr buffer, is read while the process runs.
	var logf string
	mountLogged := func(t *testing.T) *mounted {
		logf = filepath.Join(t.TempDir(), "vh5fs.log")
		return mount(t, "testdata/fixtures/basic_1d.h5", "logfile="+logf)
	}
	logHas := func(_ *mounted, text string) func() bool {
		return func() bool {
			b, _ := os.ReadFile(logf)
			return strings.Contains(string(b), text)
		}
	}
	exited := func(m *mounted) func() bool {
		return func() bool {
			select {
			case err := <-m.done:
				m.done <- err
				return true
			default:
				return false
			}
		}
	}

	t.Run("closed while retrying", func(t *testing.T) {
		m := mountLogged(t)
		f, err := os.Open(filepath.Join(m.Dir, "current", "x"))
		require.NoError(t, err)
		m.signal(t, syscall.SIGTERM)
		waitFor(t, "the retry message", 10*time.Second, logHas(m, "retrying the unmount"))
		require.True(t, isMountpoint(t, m.Dir), "still mounted while the file is open")
		require.NoError(t, f.Close())
		require.NoError(t, m.wait(t), "stderr: %s", m.stderr)
		require.False(t, isMountpoint(t, m.Dir))
		// The process may exit before the retrying goroutine logs its success: the
		// evidence is the retry, then a plain unmount, no detach.
		require.Contains(t, m.stderr.String(), "msg=unmounted ")
		require.NotContains(t, m.stderr.String(), "detached")
	})

	t.Run("kept open", func(t *testing.T) {
		m := mountLogged(t)
		f, err := os.Open(filepath.Join(m.Dir, "current", "x"))
		require.NoError(t, err)
		defer f.Close()
		start := time.Now()
		m.signal(t, syscall.SIGTERM)
		waitFor(t, "the lazy unmount", 15*time.Second, func() bool { return !isMountpoint(t, m.Dir) })
		took := time.Since(start)
		require.Greater(t, took, 4*time.Second, "retried for the grace period first")
		require.True(t, logHas(m, "retrying the unmount")())
		waitFor(t, "the detach's log line", 5*time.Second, logHas(m, "detached the mount lazily"))
		require.False(t, exited(m)(), "still serving the open file")

		buf := make([]byte, 48)
		n, err := f.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, 48, n)
		require.Equal(t, byte(40), buf[32], "element 4 of x in v4 is 40")

		require.NoError(t, f.Close())
		waitFor(t, "the exit after the last close", 10*time.Second, exited(m))
		require.NoError(t, m.wait(t), "stderr: %s", m.stderr)
	})

	t.Run("second signal detaches at once", func(t *testing.T) {
		m := mountLogged(t)
		f, err := os.Open(filepath.Join(m.Dir, "current", "x"))
		require.NoError(t, err)
		defer f.Close()
		m.signal(t, syscall.SIGTERM)
		waitFor(t, "the retry message", 10*time.Second, logHas(m, "retrying the unmount"))
		start := time.Now()
		m.signal(t, syscall.SIGINT)
		waitFor(t, "the lazy unmount", 3*time.Second, func() bool { return !isMountpoint(t, m.Dir) })
		require.Less(t, time.Since(start), 3*time.Second)
		require.True(t, logHas(m, "second signal: detaching now")(), "logged before the detach")
		require.NoError(t, f.Close())
		waitFor(t, "the exit after the last close", 10*time.Second, exited(m))
		require.NoError(t, m.wait(t), "stderr: %s", m.stderr)
	})
}
