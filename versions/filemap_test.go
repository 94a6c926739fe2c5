//go:build linux

package versions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/procstatus"
)

// TestFileMapRelease: pages replies were written from stay mapped until releaseBytes have
// been written, and are then unmapped from the process (its resident file pages drop).
func TestFileMapRelease(t *testing.T) {
	const size = 48 << 20
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, make([]byte, size), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m := mapFile(f)
	require.NotNil(t, m)
	require.Len(t, m.b, size)

	before := rssFile(t)
	var sum byte
	for i := 0; i < 40<<20; i += 4096 { // what the kernel does writing replies from it
		sum += m.b[i]
	}
	require.Zero(t, sum)
	touched := rssFile(t)
	require.Greater(t, touched-before, int64(35<<10), "40 MiB mapped in (KiB: %d, then %d)", before, touched)

	m.release([]span{{at: 0, n: 8 << 20}, {at: 8 << 20, dst: 8 << 20, n: 8 << 20}})
	require.Equal(t, int64(16<<20), m.written)
	require.Greater(t, rssFile(t)-before, int64(35<<10), "below releaseBytes nothing is unmapped")

	m.release([]span{{at: 16 << 20, n: 24 << 20}})
	require.Zero(t, m.written)
	require.Less(t, rssFile(t)-before, int64(5<<10), "40 MiB unmapped")
}

// rssFile is the process's resident file-backed memory in KiB.
func rssFile(t *testing.T) int64 {
	kb, err := procstatus.KiB("self", "RssFile")
	require.NoError(t, err)
	return kb
}
