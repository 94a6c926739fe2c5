//go:build linux

package chunkstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/procstatus"
)

// TestFileMapRelease: pages replies were written from stay mapped until the replies span
// releaseBytes of the file, and are then unmapped from the process (its resident file
// pages drop).
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
	for i := 4 << 20; i < 40<<20; i += 4096 { // what the kernel does writing replies from it
		sum += m.b[i]
	}
	require.Zero(t, sum)
	touched := rssFile(t)
	require.Greater(t, touched-before, int64(30<<10), "36 MiB mapped in (KiB: %d, then %d)", before, touched)

	m.release([]span{{at: 4 << 20, n: 8 << 20}, {at: 20 << 20, dst: 8 << 20, n: 8 << 20}})
	require.Equal(t, [2]int64{4 << 20, 28 << 20}, [2]int64{m.lo, m.hi})
	require.Greater(t, rssFile(t)-before, int64(30<<10), "below releaseBytes nothing is unmapped")

	m.release([]span{{at: 40<<20 - 4, n: 4}}) // the range now spans 36 MiB
	require.Zero(t, m.hi)
	require.Less(t, rssFile(t)-before, int64(3<<10), "4 to 40 MiB unmapped")
}

// rssFile is the process's resident file-backed memory in KiB.
func rssFile(t *testing.T) int64 {
	kb, err := procstatus.KiB("self", "RssFile")
	require.NoError(t, err)
	return kb
}

// TestFileMapSlices: spans inside the mapping become slices of it; one that reaches past
// it (bytes the file gained after it was mapped), or no mapping, leaves the read to pread.
func TestFileMapSlices(t *testing.T) {
	m := &fileMap{b: []byte("0123456789")}
	for _, tc := range []struct {
		name  string
		m     *fileMap
		spans []span
		want  []string
	}{
		{"inside", m, []span{{at: 2, n: 3}, {at: 7, dst: 3, n: 3}}, []string{"234", "789"}},
		{"to the end", m, []span{{at: 0, n: 10}}, []string{"0123456789"}},
		{"past the end", m, []span{{at: 2, n: 3}, {at: 8, dst: 3, n: 3}}, nil},
		{"no mapping", nil, []span{{at: 0, n: 1}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vec := tc.m.slices(tc.spans)
			if tc.want == nil {
				require.Nil(t, vec)
				return
			}
			require.Len(t, vec, len(tc.want))
			for i, w := range tc.want {
				require.Equal(t, w, string(vec[i]))
				require.Equal(t, len(w), cap(vec[i]), "a slice cannot reach past its span")
			}
		})
	}
}
