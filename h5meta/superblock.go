package h5meta

import (
	"errors"
	"fmt"
	"io"
)

// ErrNoSuperblock is returned for a file without an HDF5 signature where one may be (at 0,
// 512, 1024, ...).
var ErrNoSuperblock = errors.New("h5meta: HDF5 signature not found")

// Superblock is what vh5fs reads of a file's superblock (HDF5 file format specification,
// "Superblock"). It is the one decoder of it: Open and the live mounts' writer state
// (package swmr) both read it here.
type Superblock struct {
	Offset        int64  // where it starts (0, or 512, 1024, ... after a user block)
	Version       int    // 0..3
	SizeOfOffsets int    // bytes of a file address
	SizeOfLengths int    // bytes of a length
	Flags         uint32 // file consistency flags (used by libhdf5 for versions 2 and 3 only)
	EOF           uint64 // End of File Address, relative to the base; 0 when the bytes end before it
}

// ReadSuperblock finds and decodes the superblock of r, whose length is size.
func ReadSuperblock(r io.ReaderAt, size int64) (Superblock, error) {
	if size < 0 {
		return Superblock{}, fmt.Errorf("h5meta: negative file size %d", size)
	}
	pos := int64(-1)
	for p := int64(0); p+8 <= size; p = nextSuperPos(p) {
		sig := make([]byte, 8)
		if _, err := r.ReadAt(sig, p); err != nil {
			return Superblock{}, fmt.Errorf("h5meta: reading superblock signature at %d: %w", p, err)
		}
		if string(sig) == hdfSignature {
			pos = p
			break
		}
	}
	if pos < 0 {
		return Superblock{}, ErrNoSuperblock
	}
	raw := make([]byte, min(int64(128), size-pos))
	if _, err := r.ReadAt(raw, pos); err != nil && !errors.Is(err, io.EOF) {
		return Superblock{}, fmt.Errorf("h5meta: reading superblock: %w", err)
	}
	return decodeSuperblock(raw, pos)
}

// decodeSuperblock decodes the superblock's fixed fields from raw, read at pos. The fields
// up to the base address must be there; the end-of-file address is left 0 if it is not.
func decodeSuperblock(raw []byte, pos int64) (Superblock, error) {
	b := &buf{b: raw, what: "superblock"}
	b.skip(8)
	sb := Superblock{Offset: pos, Version: int(b.u8())}
	switch sb.Version {
	case 0, 1:
		b.skip(4) // free-space, root symbol table, reserved, shared header versions
		sb.SizeOfOffsets, sb.SizeOfLengths = int(b.u8()), int(b.u8())
		b.skip(1 + 2 + 2) // reserved, leaf K, internal K
		sb.Flags = uint32(b.u32())
		if sb.Version == 1 {
			b.skip(4) // indexed storage K, reserved
		}
	case 2, 3:
		sb.SizeOfOffsets, sb.SizeOfLengths = int(b.u8()), int(b.u8())
		sb.Flags = uint32(b.u8())
	default:
		return Superblock{}, fmt.Errorf("h5meta: superblock version %d: %w", sb.Version, ErrUnsupported)
	}
	if b.err != nil {
		return Superblock{}, b.err
	}
	so := sb.SizeOfOffsets
	if !validSize(so) || !validSize(sb.SizeOfLengths) {
		return Superblock{}, fmt.Errorf("h5meta: superblock: size of offsets %d / lengths %d: %w", so, sb.SizeOfLengths, ErrUnsupported)
	}
	b.offset(so) // stored base address; libhdf5 uses the superblock's position instead
	if b.err != nil {
		return Superblock{}, b.err
	}
	at, err := eofField(sb.Version, so)
	if err != nil {
		return Superblock{}, err
	}
	e := &buf{b: raw, what: "superblock"}
	e.skip(at)
	if eof := e.offset(so); e.err == nil {
		sb.EOF = eof
	}
	return sb, nil
}

// eofField is where the end-of-file address is in a superblock of version v whose
// addresses are so bytes: after the fixed fields, the base address and the free-space
// (versions 0, 1) or extension (2, 3) address.
func eofField(v, so int) (int, error) {
	switch v {
	case 0:
		return 24 + 2*so, nil
	case 1:
		return 28 + 2*so, nil // indexed storage K, reserved
	case 2, 3:
		return 12 + 2*so, nil
	}
	return 0, fmt.Errorf("h5meta: superblock version %d: %w", v, ErrUnsupported)
}
