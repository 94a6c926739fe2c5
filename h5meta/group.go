package h5meta

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Header message types read by Links and Inspect.
const (
	msgLinkInfo    = 0x0002
	msgDatatype    = 0x0003
	msgLink        = 0x0006
	msgAttribute   = 0x000C
	msgSymbolTable = 0x0011
	msgAttrInfo    = 0x0015
)

// Link is one hard link of a group: the child's name and object header address.
type Link struct {
	Name string
	Addr uint64
}

// Links returns the hard links of the group whose object header is at ohdr, in name order
// (libhdf5's H5_INDEX_NAME order). It reads old-style groups (symbol table message: version
// 1 B-tree of type 0, "SNOD" nodes, local heap "HEAP") and new-style compact groups (link
// messages); dense link storage (a fractal heap) is ErrUnsupported. Soft and external links
// are left out.
func (f *File) Links(ohdr uint64) ([]Link, error) {
	msgs, err := f.messages(ohdr, msgSymbolTable, msgLinkInfo, msgLink)
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, m := range msgs {
		if m.flags&msgFlagShared != 0 {
			return nil, fmt.Errorf("h5meta: group at %d: shared message %d: %w", ohdr, m.typ, ErrUnsupported)
		}
		b := &buf{b: m.data, what: "group", at: ohdr}
		switch m.typ {
		case msgSymbolTable:
			tree, heap := b.offset(f.so), b.offset(f.so)
			if b.err != nil {
				return nil, b.err
			}
			return f.symbolTable(ohdr, tree, heap)
		case msgLinkInfo:
			b.skip(1) // version
			if flags := b.u8(); flags&1 != 0 {
				b.skip(8) // maximum creation index
			}
			if heap := b.offset(f.so); b.err == nil && heap != f.undef() {
				return nil, fmt.Errorf("h5meta: group at %d: dense link storage: %w", ohdr, ErrUnsupported)
			}
			if b.err != nil {
				return nil, b.err
			}
		case msgLink:
			l, hard, err := f.linkMessage(b)
			if err != nil {
				return nil, err
			}
			if hard {
				out = append(out, l)
			}
		}
	}
	slices.SortFunc(out, func(a, b Link) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// linkMessage decodes a link message; hard is false for soft and external links.
func (f *File) linkMessage(b *buf) (l Link, hard bool, err error) {
	if v := b.u8(); v != 1 && b.err == nil {
		return Link{}, false, fmt.Errorf("h5meta: %s: link message version %d: %w", b.name(), v, ErrUnsupported)
	}
	flags := b.u8()
	typ := uint64(0)
	if flags&0x08 != 0 {
		typ = b.u8()
	}
	if flags&0x04 != 0 {
		b.skip(8) // creation order
	}
	if flags&0x10 != 0 {
		b.skip(1) // name character set
	}
	n := b.uint(1 << (flags & 3))
	if n > uint64(b.rest()) {
		return Link{}, false, fmt.Errorf("h5meta: %s: link name of %d bytes overruns the message", b.name(), n)
	}
	l.Name = string(b.bytes(int(n)))
	if typ != 0 {
		return l, false, b.err
	}
	l.Addr = b.offset(f.so)
	return l, true, b.err
}

// symbolTable lists an old-style group: a version 1 B-tree (node type 0) whose leaves point
// at symbol table nodes, with names in the local heap.
func (f *File) symbolTable(ohdr, tree, heapAddr uint64) ([]Link, error) {
	hb, err := f.read(heapAddr, 8+2*f.sl+f.so, "local heap")
	if err != nil {
		return nil, err
	}
	b := &buf{b: hb, what: "local heap", at: heapAddr}
	b.signature("HEAP")
	if v := b.u8(); v != 0 && b.err == nil {
		return nil, fmt.Errorf("h5meta: local heap at %d: version %d: %w", heapAddr, v, ErrUnsupported)
	}
	b.skip(3)
	size := b.uint(f.sl)
	b.uint(f.sl) // free list
	dataAddr := b.offset(f.so)
	if b.err != nil {
		return nil, b.err
	}
	if size > maxRead {
		return nil, fmt.Errorf("h5meta: local heap at %d: size %d", heapAddr, size)
	}
	heap, err := f.read(dataAddr, int(size), "local heap data")
	if err != nil {
		return nil, err
	}
	w := &symbolWalk{f: f, heap: heap, seen: map[uint64]bool{}}
	if err := w.node(tree, -1); err != nil {
		return nil, fmt.Errorf("h5meta: group at %d: %w", ohdr, err)
	}
	// Keys order the B-tree by name; sort anyway, the cost is small and the order then does
	// not depend on a well-formed tree.
	slices.SortFunc(w.out, func(a, b Link) int { return strings.Compare(a.Name, b.Name) })
	return w.out, nil
}

type symbolWalk struct {
	f    *File
	heap []byte
	seen map[uint64]bool
	out  []Link
}

// node visits a group B-tree node; want is the level the parent expects (-1 at the root).
func (w *symbolWalk) node(addr uint64, want int) error {
	f := w.f
	if w.seen[addr] {
		return fmt.Errorf("B-tree node %d visited twice", addr)
	}
	w.seen[addr] = true
	hdr, err := f.read(addr, 8+2*f.so, "group B-tree node")
	if err != nil {
		return err
	}
	b := &buf{b: hdr, what: "group B-tree node", at: addr}
	b.signature("TREE")
	typ, level, used := b.u8(), int(b.u8()), int(b.u16())
	if b.err != nil {
		return b.err
	}
	if typ != 0 {
		return fmt.Errorf("B-tree node at %d has type %d, not a group node", addr, typ)
	}
	if want >= 0 && level != want {
		return fmt.Errorf("B-tree node at %d has level %d, want %d", addr, level, want)
	}
	entry := f.sl + f.so // key, child
	raw, err := f.read(addr+uint64(8+2*f.so), used*entry+f.sl, "group B-tree node")
	if err != nil {
		return err
	}
	b = &buf{b: raw, what: "group B-tree node", at: addr}
	for i := 0; i < used; i++ {
		b.uint(f.sl) // key: heap offset of the largest name to its left
		child := b.offset(f.so)
		if b.err != nil {
			return b.err
		}
		if level > 0 {
			if err := w.node(child, level-1); err != nil {
				return err
			}
		} else if err := w.symbols(child); err != nil {
			return err
		}
	}
	return nil
}

// symbols reads a symbol table node ("SNOD").
func (w *symbolWalk) symbols(addr uint64) error {
	f := w.f
	hdr, err := f.read(addr, 8, "symbol table node")
	if err != nil {
		return err
	}
	b := &buf{b: hdr, what: "symbol table node", at: addr}
	b.signature("SNOD")
	b.skip(2) // version, reserved
	n := int(b.u16())
	if b.err != nil {
		return b.err
	}
	entry := f.sl + f.so + 24 // name offset, object header, cache type, reserved, scratch pad
	raw, err := f.read(addr+8, n*entry, "symbol table node")
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		e := &buf{b: raw[i*entry : (i+1)*entry], what: b.what, at: b.at}
		nameOff, obj, cache := e.uint(f.sl), e.offset(f.so), e.u32()
		if cache == 2 { // a soft link: its value is in the scratch pad, there is no object
			continue
		}
		if nameOff >= uint64(len(w.heap)) {
			return fmt.Errorf("symbol table node at %d: name offset %d is outside the local heap (%d bytes)", addr, nameOff, len(w.heap))
		}
		nb := &buf{b: w.heap[nameOff:], what: "local heap name"}
		name := nb.cstring()
		if nb.err != nil {
			return nb.err
		}
		w.out = append(w.out, Link{Name: name, Addr: obj})
	}
	return nil
}

// Object is what Inspect tells about one object header.
type Object struct {
	IsGroup   bool // has a symbol table, link info or link message
	IsDataset bool // has a data layout message
	Attrs     []Attribute
}

// Attribute is one attribute stored in an object header. Value is decoded for scalar
// attributes of the types versioned-hdf5 writes, with the types package h5 gives them:
// string (fixed or variable length), int64 (signed integers), uint64 (unsigned), float64,
// bool (h5py's FALSE/TRUE enum). It is nil for anything else; the caller asks libhdf5.
type Attribute struct {
	Name  string
	Value any
}

// Inspect reads the object header at ohdr: its kind and its attributes, in name order.
// Attributes in dense storage (a fractal heap) are ErrUnsupported.
func (f *File) Inspect(ohdr uint64) (*Object, error) {
	msgs, err := f.messages(ohdr, msgSymbolTable, msgLinkInfo, msgLink, msgLayout, msgAttribute, msgAttrInfo)
	if err != nil {
		return nil, err
	}
	o := &Object{}
	for _, m := range msgs {
		switch m.typ {
		case msgSymbolTable, msgLinkInfo, msgLink:
			o.IsGroup = true
		case msgLayout:
			o.IsDataset = true
		case msgAttrInfo:
			b := &buf{b: m.data, what: "attribute info of the object", at: ohdr}
			b.skip(1) // version
			if flags := b.u8(); flags&1 != 0 {
				b.skip(2) // maximum creation index
			}
			if heap := b.offset(f.so); b.err == nil && heap != f.undef() {
				return nil, fmt.Errorf("h5meta: object at %d: dense attribute storage: %w", ohdr, ErrUnsupported)
			}
			if b.err != nil {
				return nil, b.err
			}
		case msgAttribute:
			if m.flags&msgFlagShared != 0 {
				return nil, fmt.Errorf("h5meta: object at %d: shared attribute: %w", ohdr, ErrUnsupported)
			}
			a, err := f.attribute(&buf{b: m.data, what: "attribute of the object", at: ohdr})
			if err != nil {
				return nil, err
			}
			o.Attrs = append(o.Attrs, a)
		}
	}
	slices.SortFunc(o.Attrs, func(a, b Attribute) int { return strings.Compare(a.Name, b.Name) })
	return o, nil
}

// attribute decodes an attribute message (versions 1, 2 and 3).
func (f *File) attribute(b *buf) (Attribute, error) {
	v := b.u8()
	flags := b.u8()
	nameLen, typeLen, spaceLen := int(b.u16()), int(b.u16()), int(b.u16())
	pad := func(n int) int { return n }
	switch v {
	case 1:
		pad = func(n int) int { return (n + 7) &^ 7 }
	case 2:
	case 3:
		b.skip(1) // name character set
	default:
		if b.err == nil {
			return Attribute{}, fmt.Errorf("h5meta: %s: attribute message version %d: %w", b.name(), v, ErrUnsupported)
		}
	}
	if v > 1 && flags&3 != 0 {
		return Attribute{}, fmt.Errorf("h5meta: %s: shared datatype or dataspace: %w", b.name(), ErrUnsupported)
	}
	name := b.bytes(pad(nameLen))
	dt := b.bytes(pad(typeLen))
	ds := b.bytes(pad(spaceLen))
	if b.err != nil {
		return Attribute{}, b.err
	}
	if nameLen == 0 || int(nameLen) > len(name) {
		return Attribute{}, fmt.Errorf("h5meta: %s: name length %d", b.name(), nameLen)
	}
	a := Attribute{Name: strings.TrimRight(string(name[:nameLen]), "\x00")}
	if !scalarSpace(ds) {
		return a, nil
	}
	val, err := f.scalarValue(dt, b.bytes(b.rest()))
	if err != nil {
		return Attribute{}, fmt.Errorf("h5meta: %s: attribute %s: %w", b.name(), a.Name, err)
	}
	a.Value = val
	return a, nil
}

// scalarSpace reports whether a dataspace message describes one element.
func scalarSpace(p []byte) bool {
	if len(p) < 3 {
		return false
	}
	switch v, rank := p[0], p[1]; {
	case v == 1:
		return rank == 0
	case v == 2:
		return len(p) >= 4 && p[3] == 0 // type 0: scalar
	}
	return false
}

// Datatype classes decoded by scalarValue.
const (
	dtInteger = 0
	dtFloat   = 1
	dtString  = 3
	dtEnum    = 8
	dtVlen    = 9
)

// scalarValue decodes one element of datatype message dt from data; nil if it is of a type
// Attribute does not decode, or malformed; an error if its string's global heap is corrupt.
func (f *File) scalarValue(dt, data []byte) (any, error) {
	if len(dt) < 8 {
		return nil, nil
	}
	class := dt[0] & 0x0f
	bits := uint32(dt[1]) | uint32(dt[2])<<8 | uint32(dt[3])<<16
	size := int(uint32(dt[4]) | uint32(dt[5])<<8 | uint32(dt[6])<<16 | uint32(dt[7])<<24)
	if size <= 0 || size > len(data) {
		return nil, nil
	}
	data = data[:size]
	le := func() uint64 {
		var v uint64
		for i := len(data) - 1; i >= 0; i-- {
			v = v<<8 | uint64(data[i])
		}
		return v
	}
	switch class {
	case dtInteger:
		if bits&1 != 0 || size > 8 { // big-endian
			return nil, nil
		}
		u := le()
		if bits&0x08 == 0 {
			return u, nil
		}
		shift := 64 - 8*uint(size)
		return int64(u<<shift) >> shift, nil
	case dtFloat:
		if bits&0x41 != 0 { // big-endian or VAX order
			return nil, nil
		}
		switch size {
		case 4:
			return float64(math.Float32frombits(uint32(le()))), nil
		case 8:
			return math.Float64frombits(le()), nil
		}
	case dtString:
		s := string(data)
		switch bits & 0x0f {
		case 0, 1: // null terminate, null pad
			if i := strings.IndexByte(s, 0); i >= 0 {
				s = s[:i]
			}
		case 2:
			s = strings.TrimRight(s, " ")
		}
		return s, nil
	case dtEnum:
		return f.boolEnum(dt, bits, data), nil
	case dtVlen:
		if bits&0x0f != 1 || size != 4+f.so+4 { // not a string, or an unexpected ID size
			return nil, nil
		}
		b := &buf{b: data}
		n, coll, idx := b.u32(), b.offset(f.so), uint32(b.u32())
		if n == 0 {
			return "", nil
		}
		obj, err := f.globalHeapObject(coll, idx)
		if err != nil {
			return nil, err
		}
		if uint64(len(obj)) < n {
			return nil, fmt.Errorf("string of %d bytes in a heap object of %d", n, len(obj))
		}
		s := string(obj[:n])
		if i := strings.IndexByte(s, 0); i >= 0 && bits>>4&0x0f != 2 {
			s = s[:i]
		}
		return s, nil
	}
	return nil, nil
}

// boolEnum decodes h5py's boolean: an enum of a one-byte integer with exactly the members
// FALSE = 0 and TRUE = 1 (what libhdf5's reading of it gives package h5 as a bool).
func (f *File) boolEnum(dt []byte, bits uint32, data []byte) any {
	if bits&0xffff != 2 || len(data) != 1 || len(dt) < 20 {
		return nil
	}
	version := dt[0] >> 4
	base := dt[8:]
	if base[0]&0x0f != dtInteger || base[4] != 1 || base[5]|base[6]|base[7] != 0 {
		return nil
	}
	b := &buf{b: base[12:], what: "enum"} // base type: 8-byte header + 4 bytes of properties
	var names [2]string
	for i := range names {
		start := b.off
		names[i] = b.cstring()
		if version < 3 { // names are padded to a multiple of 8 bytes
			b.off = start + (b.off-start+7)&^7
			if b.off > len(b.b) {
				return nil
			}
		}
	}
	vals := b.bytes(2)
	if b.err != nil || names != [2]string{"FALSE", "TRUE"} || vals[0] != 0 || vals[1] != 1 {
		return nil
	}
	return data[0] != 0
}
