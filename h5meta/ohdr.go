package h5meta

import (
	"encoding/binary"
	"fmt"
)

// Header message types used here.
const (
	msgNil          = 0x0000
	msgDataspace    = 0x0001
	msgLayout       = 0x0008
	msgContinuation = 0x0010

	msgFlagShared = 0x02

	// maxHeaderBlocks bounds the continuation blocks followed for one object header.
	maxHeaderBlocks = 1 << 16
)

type message struct {
	typ   uint16
	flags uint8
	data  []byte
	at    uint64 // address of data
	sums  bool   // data lies in a block with a checksum (version 2 headers)
}

type block struct{ addr, length uint64 }

// messages returns the messages of the object header at ohdr, following continuations.
// Only the messages whose type is in want are kept (continuations are always followed).
func (f *File) messages(ohdr uint64, want ...uint16) ([]message, error) {
	keep := func(t uint16) bool {
		for _, w := range want {
			if w == t {
				return true
			}
		}
		return false
	}
	// One read usually holds the whole first block: small headers cost one pread.
	pre, err := f.readUpTo(ohdr, 512, "object header")
	if err != nil {
		return nil, err
	}
	var (
		msgs    []message
		queue   []block
		version int
	)
	seen := map[uint64]bool{}
	var first block
	if len(pre) >= 4 && string(pre[:4]) == "OHDR" {
		version = 2
		b := &buf{b: pre, what: "object header"}
		b.skip(4)
		if v := b.u8(); v != 2 && b.err == nil {
			return nil, fmt.Errorf("h5meta: object header at %d: OHDR version %d: %w", ohdr, v, ErrUnsupported)
		}
		flags := b.u8()
		if flags&0x20 != 0 {
			b.skip(16)
		}
		if flags&0x10 != 0 {
			b.skip(4)
		}
		size := b.uint(1 << (flags & 3))
		if b.err != nil {
			return nil, b.err
		}
		if flags&0x04 != 0 {
			version = 3 // version 2 header with creation order tracked: 6-byte message headers
		}
		first = block{ohdr + uint64(b.off), size}
	} else {
		b := &buf{b: pre, what: "object header"}
		v := b.u8()
		b.skip(3)       // reserved, number of messages
		b.skip(4)       // reference count
		size := b.u32() // header size
		if b.err != nil {
			return nil, fmt.Errorf("h5meta: object header at %d: %w", ohdr, b.err)
		}
		if v != 1 {
			return nil, fmt.Errorf("h5meta: object header at %d: unknown version %d", ohdr, v)
		}
		version = 1
		first = block{ohdr + 16, size}
	}
	queue = append(queue, first)
	for n := 0; len(queue) > 0; n++ {
		if n >= maxHeaderBlocks {
			return nil, fmt.Errorf("h5meta: object header at %d: more than %d continuation blocks", ohdr, maxHeaderBlocks)
		}
		blk := queue[0]
		queue = queue[1:]
		if seen[blk.addr] {
			return nil, fmt.Errorf("h5meta: object header at %d: continuation cycle at %d", ohdr, blk.addr)
		}
		seen[blk.addr] = true
		if blk.length > maxRead {
			return nil, fmt.Errorf("h5meta: object header at %d: block of %d bytes at %d is too large", ohdr, blk.length, blk.addr)
		}
		var raw []byte
		if rel := blk.addr - ohdr; n == 0 && blk.addr >= ohdr && rel+blk.length <= uint64(len(pre)) {
			raw = pre[rel : rel+blk.length]
		} else if raw, err = f.read(blk.addr, int(blk.length), "object header block"); err != nil {
			return nil, err
		}
		b := &buf{b: raw, what: "object header block", at: blk.addr}
		hdr := 8 // version 1 message header
		if version >= 2 {
			hdr = 4
			if version == 3 {
				hdr = 6
			}
			if n > 0 {
				b.signature("OCHK")
			}
			// The block ends with a 4-byte checksum (not covered by chunk 0's size field).
			if n > 0 {
				if len(raw) < 8 {
					return nil, fmt.Errorf("h5meta: %s: too short", b.name())
				}
				b.b = raw[:len(raw)-4]
			}
		}
		for b.err == nil && b.rest() >= hdr {
			var m message
			var size int
			if version == 1 {
				m.typ = uint16(b.u16())
				size = int(b.u16())
				m.flags = uint8(b.u8())
				b.skip(3)
			} else {
				m.typ = uint16(b.u8())
				size = int(b.u16())
				m.flags = uint8(b.u8())
				if version == 3 {
					b.skip(2)
				}
			}
			m.at, m.sums = blk.addr+uint64(b.off), version >= 2
			m.data = b.bytes(size)
			if b.err != nil {
				break
			}
			switch {
			case m.typ == msgContinuation:
				cb := &buf{b: m.data, what: "continuation message"}
				a, l := cb.offset(f.so), cb.uint(f.sl)
				if cb.err != nil {
					return nil, cb.err
				}
				queue = append(queue, block{a, l})
			case m.typ != msgNil && keep(m.typ):
				msgs = append(msgs, m)
			}
		}
		if b.err != nil {
			return nil, b.err
		}
	}
	return msgs, nil
}

// message returns the only message of type typ in the object header at ohdr, or an error.
func (f *File) message(ohdr uint64, typ uint16, name string) ([]byte, error) {
	msgs, err := f.messages(ohdr, typ)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("h5meta: object header at %d has no %s message", ohdr, name)
	}
	m := msgs[0]
	if m.flags&msgFlagShared != 0 {
		return nil, fmt.Errorf("h5meta: object header at %d: shared %s message: %w", ohdr, name, ErrUnsupported)
	}
	return m.data, nil
}

// dataspace decodes the dims and maxdims (dims when not stored; all ones for unlimited)
// of the dataset whose object header is at ohdr.
func (f *File) dataspace(ohdr uint64) (dims, maxdims []uint64, err error) {
	data, err := f.message(ohdr, msgDataspace, "dataspace")
	if err != nil {
		return nil, nil, err
	}
	b := &buf{b: data, what: "dataspace message"}
	v := b.u8()
	rank := int(b.u8())
	flags := b.u8()
	switch v {
	case 1:
		b.skip(5)
	case 2:
		if t := b.u8(); t != 1 && b.err == nil {
			return nil, nil, fmt.Errorf("h5meta: dataspace of %d is not simple (type %d): %w", ohdr, t, ErrUnsupported)
		}
	default:
		if b.err == nil {
			return nil, nil, fmt.Errorf("h5meta: dataspace message version %d: %w", v, ErrUnsupported)
		}
	}
	if rank > maxRank {
		return nil, nil, fmt.Errorf("h5meta: dataspace of %d: rank %d", ohdr, rank)
	}
	dims = make([]uint64, rank)
	for i := range dims {
		dims[i] = b.uint(f.sl)
	}
	maxdims = dims
	if flags&1 != 0 {
		maxdims = make([]uint64, rank)
		for i := range maxdims {
			maxdims[i] = b.uint(f.sl)
			if f.sl < 8 && maxdims[i] == 1<<(8*uint(f.sl))-1 {
				maxdims[i] = ^uint64(0)
			}
		}
	}
	return dims, maxdims, b.err
}

// RefCount returns the number of hard links to the object whose header is at ohdr. Only
// version 1 headers, which hold the count in their prefix, are read; a version 2 header
// (the count in a message) is ErrUnsupported.
func (f *File) RefCount(ohdr uint64) (uint32, error) {
	p, err := f.read(ohdr, 8, "object header")
	if err != nil {
		return 0, err
	}
	if p[0] != 1 {
		return 0, fmt.Errorf("h5meta: object header at %d: not version 1: %w", ohdr, ErrUnsupported)
	}
	return binary.LittleEndian.Uint32(p[4:]), nil
}

// Header is what a dataset's object header says of its dataspace and datatype.
type Header struct {
	Dims, MaxDims []int64 // MaxDims -1 for unlimited
	Type          []byte  // the datatype message as stored: equal bytes are equal types
}

// Header returns the dataspace and datatype of the dataset whose object header is at ohdr,
// without its layout: for a virtual dataset, without decoding one mapping.
func (f *File) Header(ohdr uint64) (Header, error) {
	dims, maxdims, err := f.dataspace(ohdr)
	if err != nil {
		return Header{}, err
	}
	t, err := f.message(ohdr, msgDatatype, "datatype")
	if err != nil {
		return Header{}, err
	}
	h := Header{Dims: make([]int64, len(dims)), MaxDims: make([]int64, len(maxdims)), Type: t}
	for i := range dims {
		h.Dims[i] = int64(dims[i])
		h.MaxDims[i] = int64(maxdims[i]) // ^0 (unlimited) is -1
	}
	return h, nil
}
