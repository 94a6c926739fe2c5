package h5meta

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Writing a virtual dataset's mapping list without libhdf5. Creating a virtual dataset,
// libhdf5 copies every mapping's selections several times (20-25 us a mapping), while the
// list it stores is a short fixed encoding per mapping. These functions give the bytes
// libhdf5 1.10 stores; package h5 puts them in the file.

// heapMinSize is libhdf5's smallest global heap collection (H5HG_MINSIZE): an object too
// large for it gets a collection of its own, exactly as large as it needs.
const heapMinSize = 4096

func align8(n int) int { return (n + 7) &^ 7 }

// heapHeader and heapObjectHeader are the sizes of a collection's header and of an
// object's header (H5HG_SIZEOF_HDR, H5HG_SIZEOF_OBJHDR).
func (f *File) heapHeader() int       { return align8(4 + 1 + 3 + f.sl) }
func (f *File) heapObjectHeader() int { return align8(2 + 2 + 4 + f.sl) }

// OwnHeapCollection reports whether libhdf5 stores an object of n bytes in a global heap
// collection of its own (one that holds nothing else and has no free space).
func (f *File) OwnHeapCollection(n int) bool {
	return f.heapHeader()+f.heapObjectHeader()+align8(n) >= heapMinSize
}

// EncodeMappingList encodes n = len(count)/rank mappings of a virtual dataset as libhdf5
// 1.10 stores them in the global heap (H5D__virtual_store_layout): mapping i reads source
// dataset srcDataset of file srcFile at [sstart, +count) into [vstart, +count), the three
// slices holding rank coordinates per mapping. Each selection is one hyperslab block in
// the version 1 encoding (32-bit corners); a list that needs another encoding (a
// coordinate of 2^32 or more, an empty block) is ErrUnsupported. The list is always whole
// and of encoding version 0, whatever the list the mappings were read from: nothing here
// extends a stored list, so none of version 1 (libhdf5 2.x), whose entries refer to one
// another by index, is ever mixed with version 0 entries (StoredMappings copies one whole).
func (f *File) EncodeMappingList(srcFile, srcDataset string, rank int, vstart, count, sstart []int64) ([]byte, error) {
	if rank < 1 || rank > maxRank || len(count)%rank != 0 || len(vstart) != len(count) || len(sstart) != len(count) {
		return nil, fmt.Errorf("h5meta: mapping list: %d, %d and %d coordinates for rank %d", len(vstart), len(count), len(sstart), rank)
	}
	n := len(count) / rank
	sel := 24 + 8*rank
	out := make([]byte, 0, 1+f.sl+n*(len(srcFile)+len(srcDataset)+2+2*sel)+4)
	out = append(out, 0) // encoding version
	out = appendUint(out, f.sl, uint64(n))
	for i := range n {
		c := count[i*rank : (i+1)*rank]
		out = append(append(out, srcFile...), 0)
		out = append(append(out, srcDataset...), 0)
		var err error
		if out, err = appendBlock(out, sstart[i*rank:(i+1)*rank], c); err != nil {
			return nil, fmt.Errorf("h5meta: mapping %d, source: %w", i, err)
		}
		if out, err = appendBlock(out, vstart[i*rank:(i+1)*rank], c); err != nil {
			return nil, fmt.Errorf("h5meta: mapping %d, virtual: %w", i, err)
		}
	}
	return binary.LittleEndian.AppendUint32(out, checksum(out)), nil
}

// appendBlock appends the one-block hyperslab selection [start, +count): type, version 1,
// reserved, length, rank, one block, then its first and last corners.
func appendBlock(out []byte, start, count []int64) ([]byte, error) {
	for k := range start {
		if start[k] < 0 || count[k] < 1 || start[k] > math.MaxUint32-(count[k]-1) {
			return nil, fmt.Errorf("block at %d of %d on axis %d needs another encoding: %w", start[k], count[k], k, ErrUnsupported)
		}
	}
	rank := len(start)
	for _, v := range []uint32{selHyper, 1, 0, uint32(8 + 8*rank), uint32(rank), 1} {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	for k := range start {
		out = binary.LittleEndian.AppendUint32(out, uint32(start[k]))
	}
	for k := range start {
		out = binary.LittleEndian.AppendUint32(out, uint32(start[k]+count[k]-1))
	}
	return out, nil
}

// HeapCollection returns a global heap collection holding obj as object 1, as libhdf5
// builds one for an object that needs a new collection (H5HG__create, H5HG__alloc): at
// least heapMinSize bytes, the rest described by a free-space object when it can hold
// that object's header.
func (f *File) HeapCollection(obj []byte) []byte {
	head, tail := f.HeapFrame(len(obj))
	return slices.Concat(head, obj, tail)
}

// HeapFrame returns the bytes of HeapCollection(obj) before and after obj's, for an obj
// of n bytes: a long list is written between them as it is read, never whole in memory.
func (f *File) HeapFrame(n int) (head, tail []byte) {
	hdr, ohdr := f.heapHeader(), f.heapObjectHeader()
	need := ohdr + align8(n)
	size := max(heapMinSize, hdr+need)
	head = make([]byte, hdr+ohdr)
	copy(head, "GCOL")
	head[4] = 1 // version
	putUint(head[8:], f.sl, uint64(size))
	binary.LittleEndian.PutUint16(head[hdr:], 1) // index; reference count and reserved stay 0
	putUint(head[hdr+8:], f.sl, uint64(n))
	tail = make([]byte, size-hdr-ohdr-n)
	if free := size - hdr - need; free >= ohdr {
		putUint(tail[align8(n)-n+8:], f.sl, uint64(free)) // object 0: the free space
	}
	return head, tail
}

// HeapRef is where a virtual dataset's layout message refers to its mapping list: At is
// the file position of the global heap ID (an address of sizeof-offsets bytes, then a
// 4-byte index), which holds Addr and Index.
type HeapRef struct {
	At    int64
	Addr  uint64
	Index uint32
}

// Undefined reports whether the reference is libhdf5's "no mapping list".
func (r HeapRef) Undefined(f *File) bool { return r.Addr == f.undef() }

// MappingListRef locates the global heap ID in the layout message of the virtual dataset
// at ohdr. A header whose blocks carry checksums (version 2) is ErrUnsupported: changing
// the ID in place would need them recomputed.
func (f *File) MappingListRef(ohdr uint64) (HeapRef, error) {
	msgs, err := f.messages(ohdr, msgLayout)
	if err != nil {
		return HeapRef{}, err
	}
	if len(msgs) != 1 {
		return HeapRef{}, fmt.Errorf("h5meta: object at %d has %d layout messages", ohdr, len(msgs))
	}
	m := msgs[0]
	switch {
	case m.sums:
		return HeapRef{}, fmt.Errorf("h5meta: object at %d: layout message in a checksummed header: %w", ohdr, ErrUnsupported)
	case len(m.data) < 2+f.so+4 || m.data[0] != 4 || m.data[1] != classVirtual:
		return HeapRef{}, fmt.Errorf("h5meta: object at %d: not a version 4 virtual layout: %w", ohdr, ErrUnsupported)
	}
	b := &buf{b: m.data[2:], what: "layout message of the object", at: ohdr}
	ref := HeapRef{At: int64(f.base + m.at + 2), Addr: b.offset(f.so), Index: uint32(b.u32())}
	return ref, b.err
}

// MappingListLen is the stored length of the mapping list of the virtual dataset at ohdr
// (0 if it has none); a list in a collection of its own is not read.
func (f *File) MappingListLen(ohdr uint64) (int, error) {
	l, err := f.layoutOf(ohdr, classVirtual)
	if err != nil || l.heapAddr == f.undef() {
		return 0, err
	}
	_, n, large, err := f.largeHeapObject(l.heapAddr, l.heapIndex)
	if err == nil && !large {
		var obj []byte
		obj, err = f.globalHeapObject(l.heapAddr, l.heapIndex)
		n = uint64(len(obj))
	}
	if err != nil {
		return 0, fmt.Errorf("h5meta: mappings of dataset at %d: %w", ohdr, err)
	}
	return int(n), nil
}

// EOAField is the file position of the superblock's end-of-file address (the end of the
// space allocated in the file). Superblocks of version 2 and 3 carry a checksum and are
// ErrUnsupported.
func (f *File) EOAField() (int64, error) {
	if f.sb > 1 {
		return 0, fmt.Errorf("h5meta: superblock version %d: %w", f.sb, ErrUnsupported)
	}
	at, err := eofField(f.sb, f.so)
	if err != nil {
		return 0, err
	}
	return int64(f.base) + int64(at), nil
}

// SizeOfOffsets and SizeOfLengths are the superblock's sizes of addresses and lengths.
func (f *File) SizeOfOffsets() int { return f.so }
func (f *File) SizeOfLengths() int { return f.sl }

func appendUint(out []byte, n int, v uint64) []byte {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return append(out, b[:n]...)
}

func putUint(out []byte, n int, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	copy(out[:n], b[:n])
}
