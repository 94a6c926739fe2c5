package tests

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMountErrors: bad input gets one clear line naming the file and the problem, and a
// non-zero exit; nothing is mounted.
func TestMountErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("just text\n"), 0o644))
	truncated := filepath.Join(dir, "truncated.h5")
	whole, err := os.ReadFile("testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(truncated, whole[:2048], 0o644))
	busy := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(busy, "x"), nil, 0o644))
	good := "testdata/fixtures/basic_1d.h5"

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing file", []string{"mount", filepath.Join(dir, "nope.h5"), t.TempDir()}, 1, "nope.h5: no such file"},
		{"not hdf5", []string{"mount", text, t.TempDir()}, 1, "notes.txt: not an HDF5 file"},
		{"truncated", []string{"mount", truncated, t.TempDir()}, 1, "truncated.h5: truncated: 2048 bytes, the superblock records 26969"},
		{"mountpoint not empty", []string{"mount", good, busy}, 1, "not empty"},
		{"mountpoint missing", []string{"mount", good, filepath.Join(dir, "nodir")}, 1, "no such directory"},
		{"mountpoint is a file", []string{"mount", good, text}, 1, "not a directory"},
		{"data_version 2", []string{"mount", "testdata/extra/data_version_2.h5", t.TempDir()}, 1, "data_version_2.h5: unsupported data_version 2"},
		{"data_version 3", []string{"mount", "testdata/extra/data_version_3.h5", t.TempDir()}, 1, "data_version_3.h5: unsupported data_version 3"},
		{"data_version 5", []string{"mount", "testdata/extra/data_version_5.h5", t.TempDir()}, 1, "data_version_5.h5: unsupported data_version 5: written by a later versioned-hdf5"},
		{"unknown option", []string{"mount", "-o", "bogus", good, t.TempDir()}, 2, `unknown mount option "bogus"`},
		{"missing operand", []string{"mount", good}, 2, "needs FILE and MOUNTPOINT"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(vh5fsBin, tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			require.Equal(t, tc.code, exit.ExitCode())
			first, _, _ := strings.Cut(stderr.String(), "\n")
			require.True(t, strings.HasPrefix(first, "vh5fs: "), "stderr: %q", stderr.String())
			require.Contains(t, first, tc.want)
			require.NotContains(t, stderr.String(), "HDF5-DIAG", "HDF5 error-stack noise on stderr")
		})
	}
	// Nothing was touched.
	after, err := os.ReadFile(good)
	require.NoError(t, err)
	require.Equal(t, whole, after)
}

func TestVersionFlag(t *testing.T) {
	out := run(t, vh5fsBin, "--version")
	require.True(t, strings.HasPrefix(out, "vh5fs "), out)
}

// TestSignalsUnmount: SIGINT and SIGTERM unmount cleanly and exit 0; so does fusermount3 -u
// (every other test ends that way).
func TestSignalsUnmount(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			m := mount(t, "testdata/fixtures/basic_1d.h5")
			_, err := os.Stat(filepath.Join(m.Dir, "current"))
			require.NoError(t, err)
			m.signal(t, sig)
			require.NoError(t, m.wait(t), "stderr: %s", m.stderr)
			require.False(t, isMountpoint(t, m.Dir))
		})
	}
	// A signal as soon as the mount shows, while the daemon may still be setting it up,
	// also unmounts and exits cleanly (it once hung the daemon and the mount for good).
	t.Run("at once", func(t *testing.T) {
		for range 10 {
			m := mount(t, "testdata/fixtures/basic_1d.h5")
			m.signal(t, syscall.SIGINT)
			require.NoError(t, m.wait(t), "stderr: %s", m.stderr)
			require.False(t, isMountpoint(t, m.Dir))
		}
	})
}

// TestReadOnly: writes are refused with EROFS.
func TestReadOnly(t *testing.T) {
	m := mount(t, "testdata/fixtures/basic_1d.h5")
	path := filepath.Join(m.Dir, "current", "x")
	_, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.ErrorIs(t, err, syscall.EROFS)
	require.ErrorIs(t, os.Truncate(path, 0), syscall.EROFS)
	_, err = os.Create(filepath.Join(m.Dir, "current", "new"))
	require.ErrorIs(t, err, syscall.EROFS)
	require.ErrorIs(t, os.Mkdir(filepath.Join(m.Dir, "versions", "new"), 0o755), syscall.EROFS)
}

// TestPlainFile: a file without _version_data mounts as its own tree at the root.
func TestPlainFile(t *testing.T) {
	m := mount(t, "testdata/extra/plain.h5")
	require.Equal(t, []string{"contiguous", "grid", "names", "versions"}, readDirNames(t, m.Dir))
	require.Equal(t, []string{"big_endian", "gzip", "sparse"}, readDirNames(t, filepath.Join(m.Dir, "grid")))

	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(m.Dir, p))
		require.NoError(t, err)
		return b
	}
	var want bytes.Buffer
	for i := 0; i < 100; i++ {
		binary.Write(&want, binary.LittleEndian, int32(i))
	}
	require.Equal(t, want.Bytes(), read("contiguous"))

	want.Reset()
	for i := 0; i < 35; i++ {
		binary.Write(&want, binary.LittleEndian, float64(i))
	}
	require.Equal(t, want.Bytes(), read("grid/gzip"))

	want.Reset()
	for i := 0; i < 12; i++ {
		binary.Write(&want, binary.BigEndian, uint16(i))
	}
	require.Equal(t, want.Bytes(), read("grid/big_endian"), "elements keep the file's byte order")

	sparse := read("grid/sparse")
	require.Len(t, sparse, 80)
	for i := 0; i < 10; i++ {
		require.Equal(t, 2.5, math.Float64frombits(binary.LittleEndian.Uint64(sparse[8*i:])), "unwritten chunks read as fill")
	}
	require.Equal(t, "\"a\"\n\"bb\"\n\"é\"\n", string(read("names")))
	require.Equal(t, make([]byte, 3), read("versions"))
	_, err := os.Stat(filepath.Join(m.Dir, "current"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
