package h5meta

import "fmt"

// Encodings are the versions of the format's encodings that one object header uses, as
// stored: what decides whether a given libhdf5 can read the object (each release refuses
// versions newer than it knows, and writes the newest its lower library bound allows).
// A zero field was not found in the header.
type Encodings struct {
	Datatype    int // the newest datatype message, the object's own or an attribute's (4: HDF5 1.12)
	Layout      int // the data layout message
	MappingList int // a virtual dataset's mapping list: 0, or 1 (HDF5 2.0); -1 if none
	Selection   int // the newest selection encoding in the mapping list's first mapping (3: HDF5 1.12)
}

// Encodings reads the encoding versions of the object header at ohdr. For a virtual
// dataset it decodes its mapping list's header and first mapping only.
func (f *File) Encodings(ohdr uint64) (Encodings, error) {
	e := Encodings{MappingList: -1}
	msgs, err := f.messages(ohdr, msgDatatype, msgAttribute, msgLayout)
	if err != nil {
		return e, err
	}
	for _, m := range msgs {
		var dt []byte
		switch m.typ {
		case msgDatatype:
			if m.flags&msgFlagShared == 0 {
				dt = m.data
			}
		case msgAttribute:
			dt = attributeType(m.data, m.flags)
		case msgLayout:
			if len(m.data) > 0 {
				e.Layout = int(m.data[0])
			}
		}
		if len(dt) > 0 {
			e.Datatype = max(e.Datatype, int(dt[0]>>4))
		}
	}
	if e.Layout == 0 {
		return e, nil
	}
	l, err := f.layout(ohdr)
	if err != nil || l.class != classVirtual || l.heapAddr == f.undef() {
		return e, err
	}
	ml, err := f.Mappings(ohdr)
	if err != nil {
		return e, fmt.Errorf("h5meta: encodings of dataset at %d: %w", ohdr, err)
	}
	e.MappingList = int(ml.vers)
	e.Selection, err = ml.firstSelectionVersion()
	return e, err
}

// attributeType returns the datatype an attribute message holds, nil if it is shared or
// the message is too short to say.
func attributeType(p []byte, flags uint8) []byte {
	if len(p) < 8 || flags&msgFlagShared != 0 {
		return nil
	}
	v := p[0]
	if v > 1 && p[1]&1 != 0 { // a shared datatype
		return nil
	}
	nameLen, typeLen := int(p[2])|int(p[3])<<8, int(p[4])|int(p[5])<<8
	at := 8
	switch v {
	case 1:
		nameLen = (nameLen + 7) &^ 7
	case 3:
		at++ // the name's character set
	}
	at += nameLen
	if typeLen == 0 || at+typeLen > len(p) {
		return nil
	}
	return p[at : at+typeLen]
}

// firstSelectionVersion is the newer of the encoding versions of the first mapping's two
// selections (0 for an empty list), read without disturbing Scan's position.
func (l *MappingList) firstSelectionVersion() (v int, err error) {
	if l.n == 0 {
		return 0, nil
	}
	defer l.guard(&err)()
	c := *l
	var d decoder
	if _, _, err := d.names(&c, 0); err != nil {
		return 0, fmt.Errorf("h5meta: mapping 0 of dataset at %d: %w", l.ohdr, err)
	}
	for range 2 {
		p := c.b.b[c.b.off:]
		if len(p) < 8 {
			break
		}
		v = max(v, int(uint32(p[4])|uint32(p[5])<<8|uint32(p[6])<<16|uint32(p[7])<<24))
		if _, _, _, err := c.f.selection(&c.b, &d.a); err != nil {
			break // a form the decoder refuses: its version is known all the same
		}
	}
	return v, nil
}
