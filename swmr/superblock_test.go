package swmr

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// expectedEOF reads testdata/expect.txt, the end-of-file address libhdf5 left in each file
// that make_superblocks.py wrote (the file's size once closed).
func expectedEOF(t *testing.T) map[string]uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "expect.txt"))
	require.NoError(t, err)
	defer f.Close()
	want := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, size, ok := strings.Cut(sc.Text(), " ")
		require.True(t, ok, "expect.txt line %q", sc.Text())
		n, err := strconv.ParseUint(size, 10, 64)
		require.NoError(t, err)
		want[name] = n
	}
	require.NoError(t, sc.Err())
	return want
}

// TestSuperblockEOF reads the end-of-file address of files libhdf5 wrote with each
// superblock version: a version 1 superblock has 4 bytes (indexed storage K, reserved)
// before its addresses that version 0 has not.
func TestSuperblockEOF(t *testing.T) {
	want := expectedEOF(t)
	for _, tc := range []struct {
		file    string
		version int
	}{
		{"v0.h5", 0},
		{"v1.h5", 1},
		{"v2.h5", 2},
		{"v3.h5", 3},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", tc.file))
			require.NoError(t, err)
			defer f.Close()
			st, err := f.Stat()
			require.NoError(t, err)
			require.Contains(t, want, tc.file)

			s, err := ReadState(f)
			require.NoError(t, err)
			assert.Equal(t, tc.version, s.Version)
			assert.Equal(t, want[tc.file], s.EOF, "end-of-file address")
			assert.Equal(t, uint64(st.Size()), s.EOF, "a closed file ends at its end-of-file address")
			assert.Equal(t, WriterClosed, s.Writer())
		})
	}
}
