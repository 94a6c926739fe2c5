package h5meta

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSuperblockVersions decodes files libhdf5 wrote with each superblock version (the
// fixtures of package swmr, made by its testdata/make_superblocks.py): the version, the
// end-of-file address (the closed file's size), the end-of-file field's place, which a
// version 1 superblock has 4 bytes later than version 0, and the root group found from the
// superblock holds the one dataset the script wrote.
func TestSuperblockVersions(t *testing.T) {
	for _, tc := range []struct {
		file    string
		version int
		eoaAt   int64 // -1: refused (a checksummed superblock)
	}{
		{"v0.h5", 0, 24 + 2*8},
		{"v1.h5", 1, 28 + 2*8},
		{"v2.h5", 2, -1},
		{"v3.h5", 3, -1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "swmr", "testdata", tc.file))
			require.NoError(t, err)
			r := bytes.NewReader(raw)
			sb, err := ReadSuperblock(r, int64(len(raw)))
			require.NoError(t, err)
			assert.Equal(t, tc.version, sb.Version)
			assert.Equal(t, 8, sb.SizeOfOffsets)
			assert.Equal(t, uint64(len(raw)), sb.EOF, "end-of-file address")

			f, err := Open(r, int64(len(raw)))
			require.NoError(t, err)
			at, err := f.EOAField()
			if tc.eoaAt < 0 {
				require.ErrorIs(t, err, ErrUnsupported)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.eoaAt, at)
				assert.Equal(t, uint64(len(raw)), binary.LittleEndian.Uint64(raw[at:]), "the field holds the end-of-file address")
			}
			root, err := f.RootAddr()
			require.NoError(t, err)
			links, err := f.Links(root)
			require.NoError(t, err)
			require.Len(t, links, 1)
			assert.Equal(t, "x", links[0].Name)
		})
	}
}
