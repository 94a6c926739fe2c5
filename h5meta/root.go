package h5meta

import "fmt"

// RootAddr returns the address of the root group's object header, as the superblock
// records it (relative to the base address, as Links takes it): in the root group's
// symbol table entry for superblock versions 0 and 1, in its own field for versions 2
// and 3.
func (f *File) RootAddr() (uint64, error) {
	var at int
	switch f.sb {
	case 0, 1:
		// Signature, versions, sizes, K values, flags (and for version 1 the indexed
		// storage K); base, free-space, end-of-file and driver addresses; then the
		// symbol table entry: link name offset, object header address.
		at = 24 + 5*f.so
		if f.sb == 1 {
			at += 4
		}
	case 2, 3:
		// Signature, version, sizes, flags; base, extension and end-of-file addresses.
		at = 12 + 3*f.so
	default:
		return 0, fmt.Errorf("h5meta: superblock version %d: %w", f.sb, ErrUnsupported)
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
