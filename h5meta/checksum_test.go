package h5meta

import (
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChecksum(t *testing.T) {
	// The mapping list of basic_1d.h5's version v2 (global heap object 13 at 4760), as
	// libhdf5 wrote it: its last four bytes are the checksum of the rest.
	obj, err := hex.DecodeString("0003000000000000002e002f5f76657273696f6e5f646174612f782f7261775f6461746100020000000100000000000000100000000100000001000000000000000300000002000000010000000000000010000000010000000100000000000000030000002e002f5f76657273696f6e5f646174612f782f7261775f64617461000200000001000000000000001000000001000000010000000c0000000f00000002000000010000000000000010000000010000000100000004000000070000002e002f5f76657273696f6e5f646174612f782f7261775f646174610002000000010000000000000010000000010000000100000008000000090000000200000001000000000000001000000001000000010000000800000009000000e7cfa698")
	require.NoError(t, err)
	n := len(obj) - 4
	require.Equal(t, binary.LittleEndian.Uint32(obj[n:]), checksum(obj[:n]))
	// lookup3's published test values (hashlittle("", 0) and of "Four score and seven years ago").
	require.Equal(t, uint32(0xdeadbeef), checksum(nil))
	require.Equal(t, uint32(0x17770551), checksum([]byte("Four score and seven years ago")))
}
