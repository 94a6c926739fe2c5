package h5meta

import "math/bits"

// checksum is libhdf5's metadata checksum (H5_checksum_metadata): Bob Jenkins' lookup3
// hashlittle of data with initial value 0.
func checksum(data []byte) uint32 { return checksumWindows(data, 0, nil) }

// checksumWindows is checksum computed window bytes at a time (0: at once), calling done
// with the count of bytes behind it after each window: a caller reading a long mapped list
// lets the pages behind go.
func checksumWindows(data []byte, window int, done func(off int)) uint32 {
	a := 0xdeadbeef + uint32(len(data))
	b, c := a, a
	k := data
	// lookup3 mixes every 12-byte block but the last (which may be whole): n is the bytes
	// of those blocks in this window.
	for len(k) > 12 {
		n := len(k) - 1
		n -= n % 12
		if window > 0 && n > window {
			n = window - window%12
		}
		a, b, c = mixBlocks(a, b, c, k[:n])
		k = k[n:]
		if done != nil {
			done(len(data) - len(k))
		}
	}
	return final(a, b, c, k)
}

// mixBlocks mixes the 12-byte blocks of k (len(k) a multiple of 12) into the state.
func mixBlocks(a, b, c uint32, k []byte) (uint32, uint32, uint32) {
	for len(k) >= 12 {
		a += uint32(k[0]) | uint32(k[1])<<8 | uint32(k[2])<<16 | uint32(k[3])<<24
		b += uint32(k[4]) | uint32(k[5])<<8 | uint32(k[6])<<16 | uint32(k[7])<<24
		c += uint32(k[8]) | uint32(k[9])<<8 | uint32(k[10])<<16 | uint32(k[11])<<24
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		k = k[12:]
	}
	return a, b, c
}

// final mixes the last 1..12 bytes k into the state and returns the checksum.
func final(a, b, c uint32, k []byte) uint32 {
	if len(k) == 0 {
		return c
	}
	// The last 1..12 bytes, zero-padded.
	var t [12]byte
	copy(t[:], k)
	a += uint32(t[0]) | uint32(t[1])<<8 | uint32(t[2])<<16 | uint32(t[3])<<24
	b += uint32(t[4]) | uint32(t[5])<<8 | uint32(t[6])<<16 | uint32(t[7])<<24
	c += uint32(t[8]) | uint32(t[9])<<8 | uint32(t[10])<<16 | uint32(t[11])<<24
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
