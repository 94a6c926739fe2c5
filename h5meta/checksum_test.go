package h5meta

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
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

// TestMappingListCorrupt: a mapping list whose bytes changed (here v2's second mapping
// moved from slot 3 to slot 2, still a valid selection) is refused, as libhdf5 refuses it,
// rather than mapped to the wrong slot.
func TestMappingListCorrupt(t *testing.T) {
	whole, err := os.ReadFile("../tests/testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	const v2x = 19392 // object header of /_version_data/versions/v2/x (h5py's h5o.get_info)
	f, err := Open(bytes.NewReader(whole), int64(len(whole)))
	require.NoError(t, err)
	maps, err := f.VirtualMappings(v2x)
	require.NoError(t, err)
	require.Equal(t, []int64{12}, maps[1].SrcStart)

	// The source block of that mapping, [12, 15] in hyperslab version 1 (4-byte start, end),
	// in the list: global heap object 13, 289 bytes at 4760.
	const obj, size = 4760, 289
	old := []byte{12, 0, 0, 0, 15, 0, 0, 0}
	i := bytes.Index(whole[obj:obj+size], old)
	require.Positive(t, i)
	require.Equal(t, -1, bytes.Index(whole[obj+i+1:obj+size], old), "one occurrence")
	i += obj
	broken := bytes.Clone(whole)
	copy(broken[i:], []byte{8, 0, 0, 0, 11, 0, 0, 0})
	f, err = Open(bytes.NewReader(broken), int64(len(broken)))
	require.NoError(t, err)
	_, err = f.VirtualMappings(v2x)
	require.ErrorContains(t, err, "checksum")
	require.NotErrorIs(t, err, ErrUnsupported, "corrupt, not unsupported")
}

// TestCollectionFreeSpaceZero: a global heap collection whose free-space object has size 0
// (what a torn write left in a power-loss simulation) makes libhdf5 1.10 loop forever when
// it loads the collection; h5meta refuses it as corrupt, so callers never hand it over.
func TestCollectionFreeSpaceZero(t *testing.T) {
	whole, err := os.ReadFile("../tests/testdata/fixtures/basic_1d.h5")
	require.NoError(t, err)
	const v2x, gcol = 19392, 4000 // v2/x's object header; the collection of its mapping list
	require.Equal(t, "GCOL", string(whole[gcol:gcol+4]))
	size := int(binary.LittleEndian.Uint64(whole[gcol+8:]))
	p := gcol + 16
	for binary.LittleEndian.Uint16(whole[p:]) != 0 { // walk to the free-space object
		p += 16 + int((binary.LittleEndian.Uint64(whole[p+8:])+7)&^7)
		require.Less(t, p, gcol+size)
	}
	broken := bytes.Clone(whole)
	binary.LittleEndian.PutUint64(broken[p+8:], 0)
	f, err := Open(bytes.NewReader(broken), int64(len(broken)))
	require.NoError(t, err)
	_, err = f.VirtualMappings(v2x)
	require.ErrorContains(t, err, "object 0")
	require.NotErrorIs(t, err, ErrUnsupported, "corrupt, not unsupported")
}

// TestChecksumWindows: the checksum computed a window at a time is the checksum, and done
// hears of every byte but the last block's, in order.
func TestChecksumWindows(t *testing.T) {
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i*7 + 3)
	}
	for _, n := range []int{0, 1, 11, 12, 13, 24, 25, 999, 1000} {
		for _, w := range []int{12, 24, 100, 1 << 20} {
			last := 0
			got := checksumWindows(data[:n], w, func(off int) {
				require.Greater(t, off, last)
				last = off
			})
			require.Equal(t, checksum(data[:n]), got, "%d bytes, window %d", n, w)
			require.True(t, n == 0 || (n-last >= 1 && n-last <= 12), "%d bytes, window %d: done at %d", n, w, last)
		}
	}
}
