package h5meta

import (
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"slices"
)

// Mapping mirrors one VDS mapping: the virtual selection and source selection as single
// regular blocks.
type Mapping struct {
	VStart, VCount      []int64 // block start and extent in the virtual dataset
	SrcFile, SrcDataset string
	SrcStart, SrcCount  []int64 // block start and extent in the source dataset
}

// Selection types (H5S_sel_type).
const (
	selNone   = 0
	selPoints = 1
	selHyper  = 2
	selAll    = 3
)

// maxCoord bounds decoded coordinates and extents so that sums and products cannot overflow.
const maxCoord = 1 << 62

// VirtualMappings decodes the layout message of the dataset whose object header is at
// address ohdr (as libhdf5's H5Oget_info reports it) and returns its mappings in stored
// order (the order of H5Pget_virtual_count's indexes). It returns an error wrapping
// ErrUnsupported when the layout is not virtual or a selection is not one regular block.
// A virtual "all" selection gives start 0 and count = the dataset's dims.
func (f *File) VirtualMappings(ohdr uint64) ([]Mapping, error) {
	l, err := f.Mappings(ohdr)
	if err != nil {
		return nil, err
	}
	if err := l.Verify(); err != nil {
		return nil, err
	}
	return l.all()
}

// all scans the whole list into Mappings of their own.
func (l *MappingList) all() ([]Mapping, error) {
	ms := make([]Mapping, 0, l.Len())
	var a arena
	err := l.Scan(func(b *Batch) bool {
		for i := range b.Len() {
			m := b.Mapping(i)
			ms = append(ms, Mapping{
				SrcFile: m.SrcFile, SrcDataset: m.SrcDataset,
				SrcStart: a.copy(m.SrcStart), SrcCount: a.copy(m.SrcCount),
				VStart: a.copy(m.VStart), VCount: a.copy(m.VCount),
			})
		}
		return true
	})
	return ms, err
}

// MappingList is a virtual dataset's mapping list, read and decoded one mapping at a time
// (Scan) while another goroutine checks its checksum (Verify): a caller serves nothing
// decoded from it before Verify has succeeded. A long list is mapped from the file rather
// than read, so that neither the decoder nor the checksum waits for 12 MB to be copied.
// Scan and Verify may run at the same time; otherwise a MappingList is not safe for
// concurrent use.
type MappingList struct {
	f      *File
	ohdr   uint64
	obj    []byte // the list as stored, checksum included
	mapped bool   // obj is mapped from the file (see mapObject)
	b      buf
	n      uint64 // mappings in the list
	vers   byte   // the list's encoding version (0, or 1 from HDF5 2.x: names stored once)
}

// Mappings locates the mapping list of the virtual dataset whose object header is at ohdr
// and decodes its header (see VirtualMappings for the errors).
func (f *File) Mappings(ohdr uint64) (*MappingList, error) {
	ml, err := f.StoredMappings(ohdr)
	if err != nil || ml.obj == nil {
		return ml, err
	}
	if err := ml.header(); err != nil {
		return nil, err
	}
	return ml, nil
}

// StoredMappings locates the mapping list of the virtual dataset whose object header is
// at ohdr, without decoding any of it: a list to copy as stored (Size, Copy), whatever its
// encoding.
func (f *File) StoredMappings(ohdr uint64) (*MappingList, error) {
	l, err := f.layoutOf(ohdr, classVirtual)
	if err != nil {
		return nil, err
	}
	ml := &MappingList{f: f, ohdr: ohdr}
	if l.heapAddr == f.undef() {
		return ml, nil
	}
	at, size, large, err := f.largeHeapObject(l.heapAddr, l.heapIndex)
	switch {
	case err == nil && large:
		ml.obj, ml.mapped, err = f.mapObject(ml, at, size, "mapping list")
	case err == nil:
		ml.obj, err = f.globalHeapObject(l.heapAddr, l.heapIndex)
	}
	if err != nil {
		return nil, fmt.Errorf("h5meta: mappings of dataset at %d: %w", ohdr, err)
	}
	if len(ml.obj) < 4 {
		return nil, fmt.Errorf("h5meta: mapping list of dataset at %d: %d bytes, too short for its checksum", ohdr, len(ml.obj))
	}
	return ml, nil
}

// Size is the list's stored length in bytes, its checksum included (0: no list).
func (l *MappingList) Size() int { return len(l.obj) }

// Copy hands the list's bytes as stored to write, in order and a window at a time, and
// checks the checksum that ends them: on an error, what write was given must be
// discarded. The pages of a mapped list are let go behind it.
func (l *MappingList) Copy(write func(p []byte) error) (err error) {
	if l.obj == nil {
		return nil
	}
	defer l.guard(&err)()
	n := len(l.obj) - 4
	written := 0
	var werr error
	sum := checksumWindows(l.obj[:n], releaseWindow, func(off int) {
		if werr == nil {
			werr = write(l.obj[written:off])
		}
		written = off
		l.release(off)
	})
	if werr == nil {
		werr = write(l.obj[written:])
	}
	if werr != nil {
		return werr
	}
	if stored := binary.LittleEndian.Uint32(l.obj[n:]); stored != sum {
		return fmt.Errorf("h5meta: mapping list of dataset at %d: checksum %#08x, computed %#08x: corrupt", l.ohdr, stored, sum)
	}
	return nil
}

// header decodes the list's version and length, for Scan to decode the rest.
func (l *MappingList) header() (err error) {
	defer l.guard(&err)()
	l.b = buf{b: l.obj[:len(l.obj)-4], what: "mapping list of the dataset", at: l.ohdr}
	b := &l.b
	l.vers = byte(b.u8())
	if l.vers > 1 && b.err == nil {
		return fmt.Errorf("h5meta: mapping list of dataset at %d: encoding version %d: %w", l.ohdr, l.vers, ErrUnsupported)
	}
	l.n = b.uint(l.f.sl)
	if b.err != nil {
		return b.err
	}
	// Each entry takes at least 2 name bytes (version 1: a flags byte and an empty
	// dataset name) and two 16-byte selections.
	if l.n > uint64(b.rest())/34 {
		return fmt.Errorf("h5meta: mapping list of dataset at %d: %d entries do not fit in %d bytes", l.ohdr, l.n, b.rest())
	}
	return nil
}

// guard makes a fault reading a mapped list (the file shrank under it) an error in *err
// instead of a crash; use as defer l.guard(&err)().
func (l *MappingList) guard(err *error) func() {
	if !l.mapped {
		return func() {}
	}
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			*err = fmt.Errorf("h5meta: mapping list of dataset at %d: the file changed while it was read (fault at %#x)", l.ohdr, faultAddr(r))
		}
	}
}

// faultAddr is the address of the memory fault r, recovered with debug.SetPanicOnFault on
// (reading a mapping of a file that shrank under it); any other panic goes on.
func faultAddr(r any) uintptr {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok {
		panic(r)
	}
	return f.Addr()
}

// releaseWindow is how many bytes of a mapped list Scan and Verify read before they let
// the pages behind them go: a list of ten million mappings is a gigabyte, which would
// otherwise all count in the process's resident memory.
const releaseWindow = 16 << 20

// Len is the number of mappings in the list.
func (l *MappingList) Len() int { return int(l.n) }

// Verify checks the checksum that ends the list, as libhdf5 does before it decodes one: a
// list whose bytes changed is corrupt.
func (l *MappingList) Verify() (err error) {
	if l.obj == nil {
		return nil
	}
	defer l.guard(&err)()
	n := len(l.obj) - 4
	sum := checksumWindows(l.obj[:n], releaseWindow, func(off int) { l.release(off) })
	if stored := binary.LittleEndian.Uint32(l.obj[n:]); stored != sum {
		return fmt.Errorf("h5meta: mapping list of dataset at %d: checksum %#08x, computed %#08x: corrupt", l.ohdr, stored, sum)
	}
	return nil
}

// Batch is consecutive mappings of one list, as Scan hands them over: they share their
// source file and dataset names and their ranks; only their coordinates differ. Coords
// holds each mapping's SrcStart, SrcCount, VStart and VCount, one mapping after another.
type Batch struct {
	SrcFile, SrcDataset string
	SrcRank, VRank      int
	Coords              []int64
}

// Stride is the number of coordinates of one mapping.
func (b *Batch) Stride() int { return 2 * (b.SrcRank + b.VRank) }

// Len is the number of mappings in the batch.
func (b *Batch) Len() int { return len(b.Coords) / b.Stride() }

// Mapping returns mapping i of the batch; its slices share the batch's memory.
func (b *Batch) Mapping(i int) Mapping {
	s, v := b.SrcRank, b.VRank
	c := b.Coords[i*b.Stride() : (i+1)*b.Stride()]
	return Mapping{
		SrcFile: b.SrcFile, SrcDataset: b.SrcDataset,
		SrcStart: c[:s:s], SrcCount: c[s : 2*s : 2*s],
		VStart: c[2*s : 2*s+v : 2*s+v], VCount: c[2*s+v:],
	}
}

// batchLen bounds a batch: long enough that handing one over costs nothing per mapping,
// short enough that its coordinates stay in the core's cache.
const batchLen = 512

// Scan decodes the mappings in order and calls fn with each batch of them until fn
// returns false; a list is scanned once. The Batch and its coordinates are reused: fn
// copies what it keeps.
func (l *MappingList) Scan(fn func(b *Batch) bool) (err error) {
	defer l.guard(&err)()
	var d decoder
	released := 0
	for i := uint64(0); i < l.n; {
		if l.b.off-released >= releaseWindow {
			released = l.b.off
			l.release(released)
		}
		n := uint64(0)
		if d.head != "" { // a run of entries laid out like the last one
			n = d.run(&l.b, min(l.n-i, batchLen))
		}
		if n == 0 {
			if err := d.next(l, i); err != nil {
				return err
			}
			n = 1
		}
		i += n
		if !fn(&d.batch) {
			return nil
		}
	}
	return nil
}

// decoder holds Scan's state: the last mapping decoded the general way, the batch handed
// over, and the layout the next mappings usually repeat.
type decoder struct {
	m     Mapping
	batch Batch
	space []int64 // the batch's coordinates
	a     arena   // for the general decoder, reset for each mapping
	dims  []int64 // the VDS's dims, loaded when a virtual selection is "all"
	// The last mapping's names and selection headers as stored, when its selections are
	// forms run decodes: head is the names and the source selection's header, vhead
	// the virtual selection's header; src and virt their encodings.
	head, vhead string
	src, virt   form
	// The names of the mappings so far, for a version 1 list's references to them.
	files, dsets nameRuns
}

// next decodes mapping i into d.m the general way.
func (d *decoder) next(l *MappingList, i uint64) (err error) {
	b := &l.b
	start := b.off
	var m Mapping
	if m.SrcFile, m.SrcDataset, err = d.names(l, i); err != nil {
		return fmt.Errorf("h5meta: mapping %d of dataset at %d: %w", i, l.ohdr, err)
	}
	nameLen := b.off - start
	d.a.reset()
	var all bool
	m.SrcStart, m.SrcCount, all, err = l.f.selection(b, &d.a)
	if err != nil {
		return fmt.Errorf("h5meta: mapping %d of dataset at %d: source selection: %w", i, l.ohdr, err)
	}
	if all {
		return fmt.Errorf("h5meta: mapping %d of dataset at %d: source selection \"all\" (extent not stored): %w", i, l.ohdr, ErrUnsupported)
	}
	m.VStart, m.VCount, all, err = l.f.selection(b, &d.a)
	if err != nil {
		return fmt.Errorf("h5meta: mapping %d of dataset at %d: virtual selection: %w", i, l.ohdr, err)
	}
	if all {
		if d.dims == nil {
			dims, _, err := l.f.dataspace(l.ohdr)
			if err != nil {
				return err
			}
			for i, x := range dims {
				if x >= maxCoord {
					return fmt.Errorf("h5meta: dataset at %d: dimension %d is %d", l.ohdr, i, x)
				}
				d.dims = append(d.dims, int64(x))
			}
		}
		m.VStart, m.VCount = d.a.take(len(d.dims)), d.a.take(len(d.dims))
		clear(m.VStart)
		copy(m.VCount, d.dims)
	}
	if b.err != nil {
		return b.err
	}
	d.m = m
	d.batch = Batch{SrcFile: m.SrcFile, SrcDataset: m.SrcDataset, SrcRank: len(m.SrcStart), VRank: len(m.VStart)}
	if n := d.batch.Stride() * batchLen; len(d.space) < n {
		d.space = make([]int64, n)
	}
	d.batch.Coords = append(append(append(append(d.space[:0], m.SrcStart...), m.SrcCount...), m.VStart...), m.VCount...)
	d.learn(b.b[start:b.off], nameLen)
	return nil
}

// Flags of a mapping in a version 1 list (HDF5 2.x with its lower version bound at 2.0):
// a name already stored is not stored again, but referred to by the index of the mapping
// it belongs to.
const (
	fileShared = 1 << 0 // the source file name is an earlier mapping's: an index in its place
	dsetShared = 1 << 1 // likewise the source dataset name
	sameFile   = 1 << 2 // the source file is the VDS's own ("."): no file name stored
)

// names decodes the source file and dataset names of mapping i, at the start of its entry.
func (d *decoder) names(l *MappingList, i uint64) (file, dset string, err error) {
	b := &l.b
	if l.vers == 0 {
		return b.cstringLike(d.m.SrcFile), b.cstringLike(d.m.SrcDataset), b.err
	}
	flags := b.u8()
	if b.err != nil {
		return "", "", b.err
	}
	if flags&^(fileShared|dsetShared|sameFile) != 0 {
		return "", "", fmt.Errorf("flags %#x: %w", flags, ErrUnsupported)
	}
	switch {
	case flags&sameFile != 0: // no index either, whatever bit 0 says (as libhdf5 2.0 reads it)
		file = "."
	case flags&fileShared != 0:
		file, err = d.files.ref(b, l.f.sl, i)
	default:
		file = b.cstringLike(d.m.SrcFile)
	}
	if err != nil {
		return "", "", fmt.Errorf("source file name: %w", err)
	}
	if flags&dsetShared != 0 {
		dset, err = d.dsets.ref(b, l.f.sl, i)
	} else {
		dset = b.cstringLike(d.m.SrcDataset)
	}
	if err != nil {
		return "", "", fmt.Errorf("source dataset name: %w", err)
	}
	if b.err != nil {
		return "", "", b.err
	}
	d.files.set(i, file)
	d.dsets.set(i, dset)
	return file, dset, nil
}

// nameRuns is the name of each mapping decoded so far, as runs of consecutive mappings
// with the same name: lists repeat a few names over millions of mappings, so this stays
// small where a name per mapping would not. Mappings run decodes repeat the last one's
// names and need no record.
type nameRuns struct {
	first []uint64 // the first mapping of each run
	name  []string
}

// set records that mapping i, the last one so far, has name.
func (r *nameRuns) set(i uint64, name string) {
	if n := len(r.name); n == 0 || r.name[n-1] != name {
		r.first = append(r.first, i)
		r.name = append(r.name, name)
	}
}

// ref decodes the index that mapping i stores in place of a name and returns the name of
// the mapping it refers to, which must come before i (libhdf5 refuses any other).
func (r *nameRuns) ref(b *buf, sl int, i uint64) (string, error) {
	k := b.uint(sl)
	if b.err != nil {
		return "", b.err
	}
	if k >= i {
		return "", fmt.Errorf("refers to mapping %d, not to an earlier one", k)
	}
	j, found := slices.BinarySearch(r.first, k)
	if !found {
		j-- // r.first[0] is 0: every list's mapping 0 is recorded
	}
	return r.name[j], nil
}

// learn records the layout of entry, the mapping just decoded into d.m, whose first names
// bytes are its names (and, in version 1, its flags), for run.
func (d *decoder) learn(entry []byte, names int) {
	d.head = ""
	sh, sf := fastHeader(entry[names:], len(d.m.SrcStart))
	if sh == 0 {
		return
	}
	vAt := names + sh + coordsLen(sf, len(d.m.SrcStart))
	vh, vf := fastHeader(entry[vAt:], len(d.m.VStart))
	if vh == 0 {
		return
	}
	d.head, d.src = string(entry[:names+sh]), sf
	d.vhead, d.virt = string(entry[vAt:vAt+vh]), vf
}

// run decodes into d.batch the entries that nearly every list is made of, up to max of
// them: entries with the same names and selection headers as the last one (learn), so that
// only their coordinates are new. It stops at anything else, including every entry the
// general decoder would refuse, and leaves it to that decoder, so both give the same
// answers. It returns the number of entries decoded.
func (d *decoder) run(b *buf, max uint64) (n uint64) {
	head, vhead := d.head, d.vhead
	srcRank, vRank := d.batch.SrcRank, d.batch.VRank
	vAt := len(head) + coordsLen(d.src, srcRank)
	size := vAt + len(vhead) + coordsLen(d.virt, vRank)
	stride := d.batch.Stride()
	out := d.space[:max*uint64(stride)]
	rank1 := d.src == form{true, 4} && d.virt == form{true, 4} && srcRank == 1 && vRank == 1
	for p := b.b[b.off:]; n < max && len(p) >= size; p = p[size:] {
		e := p[:size]
		if string(e[:len(head)]) != head || string(e[vAt:vAt+len(vhead)]) != vhead {
			break
		}
		c := out[n*uint64(stride) : (n+1)*uint64(stride)]
		if rank1 { // 1-D as libhdf5 1.10 writes it: decoded inline, the bulk of long lists
			s, sn, ok := corners1(e[len(head):vAt])
			v, vn, vok := corners1(e[vAt+len(vhead):])
			if !ok || !vok {
				break
			}
			c = c[:4]
			c[0], c[1], c[2], c[3] = s, sn, v, vn
		} else {
			if _, ok := blockCoords(e[len(head):], d.src, srcRank, c); !ok {
				break
			}
			if _, ok := blockCoords(e[vAt+len(vhead):], d.virt, vRank, c[2*srcRank:]); !ok {
				break
			}
		}
		b.off += size
		n++
	}
	d.batch.Coords = out[:n*uint64(stride)]
	return n
}

// form is the encoding of a selection blockCoords decodes, enc bytes a field: one block
// given by its first and last corners (hyperslab version 1, enc 4, or an irregular one of
// version 3), or a regular hyperslab's start, stride, count and block of each dimension
// (version 2, enc 8, or 3).
type form struct {
	corners bool
	enc     int
}

// fastHeader returns the length of the header of the selection at the start of p, of the
// given rank, and its form, when it is one blockCoords decodes. Zero otherwise.
func fastHeader(p []byte, rank int) (n int, f form) {
	if rank < 1 || rank > maxRank || len(p) < 8 || binary.LittleEndian.Uint32(p) != selHyper {
		return 0, form{}
	}
	switch binary.LittleEndian.Uint32(p[4:]) {
	case 1: // reserved, length, rank, blocks
		if len(p) >= 24 && binary.LittleEndian.Uint32(p[16:]) == uint32(rank) && binary.LittleEndian.Uint32(p[20:]) == 1 {
			return 24, form{true, 4}
		}
	case 2: // flags, length, rank
		if len(p) >= 17 && p[8]&1 != 0 && binary.LittleEndian.Uint32(p[13:]) == uint32(rank) {
			return 17, form{false, 8}
		}
	case 3: // flags, encoded size, rank (and irregular: blocks): libhdf5 1.12 on, high bounds
		if len(p) < 14 || (p[9] != 2 && p[9] != 4 && p[9] != 8) || binary.LittleEndian.Uint32(p[10:]) != uint32(rank) {
			break
		}
		enc := int(p[9])
		if p[8]&1 != 0 {
			return 14, form{false, enc}
		}
		if len(p) >= 14+enc && (packed{p[14:], enc}).at(0) == 1 {
			return 14 + enc, form{true, enc}
		}
	}
	return 0, form{}
}

// coordsLen is the length of the coordinates after a fastHeader.
func coordsLen(f form, rank int) int {
	if f.corners {
		return 2 * f.enc * rank
	}
	return 4 * f.enc * rank
}

// blockCoords decodes the coordinates after a fastHeader into out (starts, then counts)
// and returns their length, as selection would; ok is false for anything selection would
// refuse.
func blockCoords(p []byte, f form, rank int, out []int64) (n int, ok bool) {
	n = coordsLen(f, rank)
	if len(p) < n || len(out) < 2*rank {
		return 0, false
	}
	field := packed{p[:n], f.enc}
	if f.corners {
		return n, cornerBlock(field, out[:2*rank])
	}
	unlim := uint64(1)<<(8*uint(f.enc)) - 1
	if f.enc == 8 {
		unlim = ^uint64(0)
	}
	for d := range rank { // start, stride, count and block of each dimension
		st, cnt, blk := field.at(4*d), field.at(4*d+2), field.at(4*d+3)
		if cnt == unlim || blk == unlim {
			return 0, false
		}
		ext, err := regularExtent(st, field.at(4*d+1), cnt, blk)
		if err != nil {
			return 0, false
		}
		out[d], out[rank+d] = int64(st), int64(ext)
	}
	return n, true
}

// corners1 is cornerBlock for rank 1 and 4-byte corners: the start and count of the block
// at the start of p.
func corners1(p []byte) (start, count int64, ok bool) {
	if len(p) < 8 {
		return 0, 0, false
	}
	s, e := binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:])
	return int64(s), int64(e-s) + 1, e >= s
}

// cornerBlock decodes the corners of one hyperslab block of rank len(out)/2 (its start
// corner, then its end corner) into out: starts, then counts.
func cornerBlock(corners packed, out []int64) bool {
	rank := len(out) / 2
	for d := range rank {
		s, e := corners.at(d), corners.at(rank+d)
		if e < s || e >= maxCoord {
			return false
		}
		out[d], out[rank+d] = int64(s), int64(e-s)+1
	}
	return true
}

// arena hands out small []int64 carved from large blocks: a list of 100k mappings needs
// 400k of them, and one allocation each dominated decoding.
type arena struct{ free, block []int64 }

func (a *arena) take(n int) []int64 {
	if len(a.free) < n {
		a.block = make([]int64, max(n, 1<<14))
		a.free = a.block
	}
	s := a.free[:n:n]
	a.free = a.free[n:]
	return s
}

// copy is a copy of s taken from the arena.
func (a *arena) copy(s []int64) []int64 {
	c := a.take(len(s))
	copy(c, s)
	return c
}

// reset makes the current block free again, for a caller done with what it took.
func (a *arena) reset() { a.free = a.block }

// selection decodes one serialized dataspace selection (H5S_SELECT_SERIALIZE) that is a
// single regular block. all reports an "all" selection (start and count are then nil).
func (f *File) selection(b *buf, a *arena) (start, count []int64, all bool, err error) {
	typ := b.u32()
	ver := b.u32()
	if b.err != nil {
		return nil, nil, false, b.err
	}
	switch typ {
	case selAll:
		b.skip(8) // reserved, length
		return nil, nil, true, b.err
	case selNone, selPoints:
		return nil, nil, false, fmt.Errorf("selection type %d: %w", typ, ErrUnsupported)
	case selHyper:
	default:
		return nil, nil, false, fmt.Errorf("unknown selection type %d", typ)
	}
	rank := 0
	enc := 4
	regular := false
	switch ver {
	case 1:
		b.skip(8) // reserved, length
		rank = int(b.u32())
	case 2:
		regular = b.u8()&1 != 0
		b.skip(4) // length
		rank = int(b.u32())
		enc = 8
	case 3:
		regular = b.u8()&1 != 0
		enc = int(b.u8())
		rank = int(b.u32())
		if b.err == nil && enc != 2 && enc != 4 && enc != 8 {
			return nil, nil, false, fmt.Errorf("hyperslab encoded size %d", enc)
		}
	default:
		return nil, nil, false, fmt.Errorf("hyperslab selection version %d: %w", ver, ErrUnsupported)
	}
	if b.err != nil {
		return nil, nil, false, b.err
	}
	if rank < 1 || rank > maxRank {
		return nil, nil, false, fmt.Errorf("hyperslab selection rank %d", rank)
	}
	unlim := uint64(1)<<(8*uint(enc)) - 1
	if enc == 8 {
		unlim = ^uint64(0)
	}
	start, count = a.take(rank), a.take(rank)
	if regular {
		if ver == 1 {
			return nil, nil, false, fmt.Errorf("regular flag in hyperslab version 1")
		}
		field, err := fields(b, enc, 4*rank)
		if err != nil {
			return nil, nil, false, err
		}
		for d := range rank {
			st, stride, cnt, blk := field.at(4*d), field.at(4*d+1), field.at(4*d+2), field.at(4*d+3)
			if cnt == unlim || blk == unlim {
				return nil, nil, false, fmt.Errorf("unlimited hyperslab: %w", ErrUnsupported)
			}
			ext, err := regularExtent(st, stride, cnt, blk)
			if err != nil {
				return nil, nil, false, err
			}
			start[d], count[d] = int64(st), int64(ext)
		}
		return start, count, false, nil
	}
	if ver == 2 {
		return nil, nil, false, fmt.Errorf("irregular hyperslab version 2: %w", ErrUnsupported)
	}
	nblocks := b.uint(enc)
	if b.err != nil {
		return nil, nil, false, b.err
	}
	if nblocks != 1 {
		return nil, nil, false, fmt.Errorf("hyperslab of %d blocks: %w", nblocks, ErrUnsupported)
	}
	field, err := fields(b, enc, 2*rank)
	if err != nil {
		return nil, nil, false, err
	}
	for d := range rank {
		start[d] = int64(field.at(d)) // enc <= 4 or checked below
	}
	for d := range rank {
		end := field.at(rank + d)
		s := uint64(start[d])
		if enc == 8 && (s >= maxCoord || end >= maxCoord) {
			return nil, nil, false, fmt.Errorf("hyperslab coordinates out of range")
		}
		if end < s {
			return nil, nil, false, fmt.Errorf("hyperslab block ends (%d) before it starts (%d)", end, s)
		}
		count[d] = int64(end - s + 1)
	}
	return start, count, false, nil
}

// regularExtent is the extent of one dimension of a regular hyperslab (start, stride,
// count, block) that selects a single block, or why it does not decode to one.
func regularExtent(st, stride, cnt, blk uint64) (uint64, error) {
	if st >= maxCoord || cnt >= maxCoord || blk >= maxCoord {
		return 0, fmt.Errorf("hyperslab coordinates out of range")
	}
	switch {
	case cnt > 1 && stride != blk:
		return 0, fmt.Errorf("strided hyperslab (stride %d, count %d, block %d): %w", stride, cnt, blk, ErrUnsupported)
	case cnt > 1 && blk != 0 && cnt > maxCoord/blk:
		return 0, fmt.Errorf("hyperslab extent overflows")
	case st+cnt*blk >= maxCoord:
		return 0, fmt.Errorf("hyperslab coordinates out of range")
	}
	return cnt * blk, nil
}

// fields takes n fields of enc bytes each from b with one bounds check (a mapping list
// holds two selections per mapping, 100k mappings and more).
func fields(b *buf, enc, n int) (packed, error) {
	p := b.bytes(enc * n)
	return packed{p, enc}, b.err
}

// packed is a run of little-endian fields of enc bytes (2, 4 or 8).
type packed struct {
	p   []byte
	enc int
}

// at is field i.
func (f packed) at(i int) uint64 {
	switch f.enc {
	case 8:
		return binary.LittleEndian.Uint64(f.p[8*i:])
	case 4:
		return uint64(binary.LittleEndian.Uint32(f.p[4*i:]))
	}
	return uint64(binary.LittleEndian.Uint16(f.p[2*i:]))
}

// Shape returns the current dimensions of the dataset whose object header is at ohdr.
func (f *File) Shape(ohdr uint64) ([]int64, error) {
	dims, _, err := f.dataspace(ohdr)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(dims))
	for i, d := range dims {
		out[i] = int64(d)
	}
	return out, nil
}
