// Package h5meta reads a few HDF5 metadata structures directly from the file's bytes, in
// linear time: the mappings of a virtual dataset, the chunk index of a chunked dataset, the
// links of a group and the attributes of an object. It also encodes a virtual dataset's
// mapping list and its global heap collection as libhdf5 1.10 stores them (mapwrite.go),
// for package h5 to write.
//
// libhdf5 1.10 answers the first two in quadratic time (H5Pget_virtual_* re-walks the
// mapping list, H5Dget_chunk_info re-walks the chunk index on every call) and the last two
// at tens of microseconds per object; this package walks each structure once.
//
// It supports what libhdf5 1.10 writes by default:
//
//   - superblock versions 0, 1, 2 and 3 (at 0, 512, 1024, ... when there is a user block),
//     any size of offsets and lengths (2, 4 or 8 bytes), base address;
//   - object headers version 1 and version 2 ("OHDR"), with continuation blocks (messages
//     of version 1 headers, "OCHK" blocks of version 2 headers); checksums are not verified;
//   - dataspace messages version 1 and 2 (to resolve "all" virtual selections);
//   - groups: symbol tables (version 1 B-tree of type 0, "SNOD" nodes, local heap) and
//     compact link messages; attribute messages version 1, 2 and 3 stored in the header,
//     with scalar values of integer, float, fixed and variable-length string and h5py's
//     boolean enum types decoded (see Attribute);
//   - data layout message version 3 and 4;
//   - virtual layout (class 3): the global heap ("GCOL") object holding the mapping list,
//     encoding version 0, or version 1 (what libhdf5 2.x writes when the lower version
//     bound is 2.0: a repeated source file or dataset name is stored once and referred to
//     by the index of its mapping, "." is a flag), with source and virtual selections that
//     are each one regular block: "all" (virtual side only: the source extent is not
//     stored in the file), hyperslab versions 1 and 3 with exactly one block, hyperslab
//     versions 2 and 3 when regular with count 1 per dimension, stride == block, or
//     block == 1 and stride == 1;
//   - chunk indexes: the version 1 B-tree ("TREE", node type 1; layout message version 3,
//     what h5py writes with libver "earliest"), and, from layout message version 4
//     (libver "latest"), the single-chunk index, the fixed array ("FAHD"/"FADB", paged or
//     not) when maxdims == dims, and the extensible array ("EAHD"/"EAIB"/"EASB"/"EADB",
//     paged data blocks included) when the unlimited dimension is the first and the
//     others have maxdims == dims.
//
// Everything else returns an error wrapping ErrUnsupported so that the caller can fall back
// to libhdf5: dense link or attribute storage (fractal heaps), other layout classes or
// versions, shared messages, point / none / irregular
// selections, an "all" source selection, unlimited hyperslabs, the implicit and version 2
// B-tree chunk indexes, fixed / extensible arrays of other shapes (libhdf5 versions differ
// in how they number those chunks), mapping-list encodings other than versions 0 and 1 or
// mapping flags version 1 does not define.
//
// All file addresses taken and returned (object header addresses, Chunk.Addr) are relative
// to the base address, as libhdf5 reports them (H5Oget_info, H5Dget_chunk_info); add
// File.Base to get a byte offset in the file. Without a user block the two are equal.
//
// Corrupt input never panics and never loops: every read is bounds-checked, recursion is
// bounded by the structures' levels, and counts are bounded by the file size.
//
// Structures are read with ReadAt, except a mapping list in a global heap collection of
// 64 KiB or more, which is mapped from the file when the io.ReaderAt is an open file or
// says the list's bytes are one's (FileRanger; see MappingList): a file cut short under
// such a mapping makes its reader fail, not crash.
package h5meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// ErrUnsupported is wrapped by every error that reports a structure this package does not
// decode (as opposed to a corrupt file); the caller should fall back to libhdf5.
var ErrUnsupported = errors.New("h5meta: unsupported structure")

const (
	hdfSignature = "\x89HDF\r\n\x1a\n"
	// maxRead bounds one metadata read, so a corrupt size cannot allocate unbounded memory.
	maxRead = 1 << 30
	// maxRank is libhdf5's H5S_MAX_RANK.
	maxRank = 32
)

// File is an HDF5 file opened for reading metadata. It is safe for concurrent use if the
// underlying io.ReaderAt is.
type File struct {
	r      io.ReaderAt
	size   int64
	base   uint64 // absolute position of address 0
	sb     int    // superblock version
	so, sl int    // size of offsets, size of lengths

	heapMu   sync.Mutex
	heaps    [8]*heapCollection // the global heap collections read last; GUARDED_BY(heapMu)
	heapNext int                // the entry of heaps to replace next; GUARDED_BY(heapMu)
}

// FileRanger is an io.ReaderAt that can tell whether a range of its bytes is an open
// file's, read as the file reads: FileOf returns that file (the caller closes it) or nil.
// A long mapping list in such a range is mapped from the file rather than read (see
// MappingList): a reader that overlays writes held in memory on a file implements it.
type FileRanger interface {
	FileOf(off, n int64) *os.File
}

// heapCollection is a global heap collection as read from the file, with where each of its
// objects is (by index; a zero span for an index it does not hold).
type heapCollection struct {
	addr uint64
	raw  []byte
	objs []heapSpan
}

// heapSpan is where one global heap object's data is in its collection.
type heapSpan struct{ data, n uint64 }

// Open parses the superblock of the HDF5 file r of the given size.
func Open(r io.ReaderAt, size int64) (*File, error) {
	sb, err := ReadSuperblock(r, size)
	if err != nil {
		return nil, err
	}
	return &File{r: r, size: size, base: uint64(sb.Offset), sb: sb.Version, so: sb.SizeOfOffsets, sl: sb.SizeOfLengths}, nil
}

func nextSuperPos(p int64) int64 {
	if p == 0 {
		return 512
	}
	return p * 2
}

func validSize(n int) bool { return n == 2 || n == 4 || n == 8 }

// Base returns the absolute byte position in the file of address 0 (the superblock's
// position; non-zero when the file has a user block).
func (f *File) Base() int64 { return int64(f.base) }

// undef is the "undefined address" for f's size of offsets.
func (f *File) undef() uint64 {
	if f.so == 8 {
		return ^uint64(0)
	}
	return 1<<(8*uint(f.so)) - 1
}

// read returns n bytes at relative address addr, bounds-checked against the file size.
func (f *File) read(addr uint64, n int, what string) ([]byte, error) {
	if n < 0 || n > maxRead {
		return nil, fmt.Errorf("h5meta: %s: read of %d bytes at %d is out of range", what, n, addr)
	}
	abs := addr + f.base
	if abs < addr || abs > uint64(f.size) || uint64(n) > uint64(f.size)-abs {
		return nil, fmt.Errorf("h5meta: %s: address %d+%d is beyond the end of the file (%d bytes)", what, addr, n, f.size)
	}
	p := make([]byte, n)
	if _, err := f.r.ReadAt(p, int64(abs)); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Errorf("h5meta: %s: reading %d bytes at %d: %w", what, n, addr, err)
	}
	return p, nil
}

// readUpTo reads at most n bytes at addr (fewer at the end of the file).
func (f *File) readUpTo(addr uint64, n int, what string) ([]byte, error) {
	abs := addr + f.base
	if abs < addr || abs >= uint64(f.size) {
		return nil, fmt.Errorf("h5meta: %s: address %d is beyond the end of the file (%d bytes)", what, addr, f.size)
	}
	if rem := uint64(f.size) - abs; uint64(n) > rem {
		n = int(rem)
	}
	return f.read(addr, n, what)
}

// buf decodes little-endian fields with a sticky error: once a read runs past the end,
// every later read returns 0 and err says what overran.
type buf struct {
	b    []byte
	off  int
	err  error
	what string // what is decoded, for errors
	at   uint64 // where it is in the file, for errors (0: not said)
}

// name is what and where, for error messages; formatted only when an error is reported.
func (b *buf) name() string {
	if b.at == 0 {
		return b.what
	}
	return fmt.Sprintf("%s at %d", b.what, b.at)
}

func (b *buf) need(n int) bool {
	if b.err != nil {
		return false
	}
	if n < 0 || n > len(b.b)-b.off {
		b.err = fmt.Errorf("h5meta: %s: truncated (need %d bytes at offset %d of %d)", b.name(), n, b.off, len(b.b))
		return false
	}
	return true
}

func (b *buf) skip(n int) {
	if b.need(n) {
		b.off += n
	}
}

func (b *buf) bytes(n int) []byte {
	if !b.need(n) {
		return nil
	}
	p := b.b[b.off : b.off+n]
	b.off += n
	return p
}

func (b *buf) uint(n int) uint64 {
	p := b.bytes(n)
	switch len(p) {
	case 8:
		return binary.LittleEndian.Uint64(p)
	case 4:
		return uint64(binary.LittleEndian.Uint32(p))
	case 2:
		return uint64(binary.LittleEndian.Uint16(p))
	}
	var v uint64
	for i := len(p) - 1; i >= 0; i-- {
		v = v<<8 | uint64(p[i])
	}
	return v
}

func (b *buf) u8() uint64  { return b.uint(1) }
func (b *buf) u16() uint64 { return b.uint(2) }
func (b *buf) u32() uint64 { return b.uint(4) }
func (b *buf) u64() uint64 {
	if p := b.bytes(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// offset decodes a file address of n bytes.
func (b *buf) offset(n int) uint64 { return b.uint(n) }

// cstring decodes a NUL-terminated string.
func (b *buf) cstring() string {
	if b.err != nil {
		return ""
	}
	i := bytes.IndexByte(b.b[b.off:], 0)
	if i < 0 {
		b.err = fmt.Errorf("h5meta: %s: unterminated string at offset %d", b.name(), b.off)
		return ""
	}
	s := string(b.b[b.off : b.off+i])
	b.off += i + 1
	return s
}

// cstringLike is cstring, returning like itself (no allocation) when the bytes are equal:
// every mapping of a list names the same source file and dataset.
func (b *buf) cstringLike(like string) string {
	if b.err == nil {
		if i := bytes.IndexByte(b.b[b.off:], 0); i == len(like) && string(b.b[b.off:b.off+i]) == like {
			b.off += i + 1
			return like
		}
	}
	return b.cstring()
}

func (b *buf) rest() int { return len(b.b) - b.off }

func (b *buf) signature(sig string) {
	if p := b.bytes(len(sig)); p != nil && string(p) != sig {
		b.err = fmt.Errorf("h5meta: %s: bad signature %q, want %q", b.name(), p, sig)
	}
}
