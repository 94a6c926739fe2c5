package h5meta

import "fmt"

// RootAddr returns the address of the root group's object header, as the superblock
// records it (relative to the base address, as Links takes it): in the root group's
// symbol table entry for superblock versions 0 and 1, in its own field for versions 2
// and 3.
func (f *File) RootAddr() (uint64, error) {
	at, err := eofField(f.sb, f.so)
	if err != nil {
		return 0, err
	}
	if f.sb <= 1 {
		// The end-of-file and driver addresses, then the root group's symbol table
		// entry: link name offset, object header address.
		at += 3 * f.so
	} else {
		at += f.so // the end-of-file address; then the root's object header address
	}
	p, err := f.read(uint64(at), f.so, "superblock")
	if err != nil {
		return 0, err
	}
	b := &buf{b: p, what: "superblock"}
	addr := b.offset(f.so)
	if b.err != nil {
		return 0, b.err
	}
	if addr == f.undef() {
		return 0, fmt.Errorf("h5meta: superblock: no root group")
	}
	return addr, nil
}
