//go:build unix

package h5meta

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMapFile: MapFile's reader reads what the file holds, and a read of a page the file
// lost (cut short after it was mapped) is an error, not SIGBUS.
func TestMapFile(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<10) // 16 KiB: four pages
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	file, err := os.Open(path)
	require.NoError(t, err)
	defer file.Close()
	r := MapFile(file, int64(len(data)))
	_, mapped := r.(*mappedFile)
	require.True(t, mapped)

	p := make([]byte, 100)
	n, err := r.ReadAt(p, 8190)
	require.NoError(t, err)
	require.Equal(t, 100, n)
	require.Equal(t, data[8190:8290], p)
	n, err = r.ReadAt(p, int64(len(data))-10)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, data[len(data)-10:], p[:n])
	_, err = r.ReadAt(p, int64(len(data)))
	require.ErrorIs(t, err, io.EOF)

	require.NoError(t, os.Truncate(path, 4096))
	_, err = r.ReadAt(p, 12288)
	require.ErrorContains(t, err, "the file changed while it was read")
	n, err = r.ReadAt(p, 0) // the page the file kept
	require.NoError(t, err)
	require.Equal(t, data[:100], p[:n])
}
