package h5meta

import "fmt"

// Fixed array and extensible array chunk indexes (data layout message version 4).
//
// Both store one element per chunk, indexed by the chunk's position in the row-major
// chunk grid: {address} for unfiltered datasets (client ID 0), {address, stored size,
// filter mask} for filtered ones (client ID 1). An undefined address is an unallocated
// chunk.

const (
	checksumLen = 4
	// maxArrayBits bounds the element counts of a fixed or extensible array.
	maxArrayBits = 48
)

// elemDecoder decodes array elements into chunks.
type elemDecoder struct {
	f          *File
	filtered   bool
	esize      int
	chunkBytes uint64 // stored size of an unfiltered chunk
	grid       []uint64
	chunkDims  []uint64
	out        []Chunk
}

func (f *File) newElemDecoder(ohdr uint64, l *layout, dims []uint64, client, esize int) (*elemDecoder, error) {
	d := &elemDecoder{f: f, esize: esize, chunkDims: l.dims}
	switch client {
	case 0:
		if esize != f.so {
			return nil, fmt.Errorf("h5meta: chunk index of dataset at %d: element size %d for unfiltered chunks", ohdr, esize)
		}
	case 1:
		d.filtered = true
		if esize <= f.so+checksumLen || esize > f.so+checksumLen+8 {
			return nil, fmt.Errorf("h5meta: chunk index of dataset at %d: element size %d for filtered chunks", ohdr, esize)
		}
	default:
		return nil, fmt.Errorf("h5meta: chunk index of dataset at %d: client ID %d", ohdr, client)
	}
	d.chunkBytes = l.elemSize
	for _, c := range l.dims {
		if d.chunkBytes > maxCoord/max(c, 1) {
			return nil, fmt.Errorf("h5meta: dataset at %d: chunk size overflows", ohdr)
		}
		d.chunkBytes *= c
	}
	d.grid = make([]uint64, len(dims))
	for i, n := range dims {
		d.grid[i] = (n + l.dims[i] - 1) / l.dims[i]
	}
	return d, nil
}

// elems decodes n elements from p, the first having array index idx.
func (d *elemDecoder) elems(p []byte, idx uint64, n uint64, what string) error {
	b := &buf{b: p, what: what}
	for i := uint64(0); i < n; i++ {
		addr := b.offset(d.f.so)
		size, mask := d.chunkBytes, uint32(0)
		if d.filtered {
			size = b.uint(d.esize - d.f.so - checksumLen)
			mask = uint32(b.u32())
		}
		if b.err != nil {
			return b.err
		}
		if addr == d.f.undef() {
			continue
		}
		if addr >= maxCoord || size >= maxCoord {
			return fmt.Errorf("h5meta: %s: chunk address %d / size %d out of range", what, addr, size)
		}
		off, err := d.offset(idx + i)
		if err != nil {
			return fmt.Errorf("h5meta: %s: %w", what, err)
		}
		d.out = append(d.out, Chunk{Offset: off, Addr: int64(addr), Size: int64(size), FilterMask: mask})
	}
	return nil
}

// offset converts a row-major chunk index into the chunk's element offset. The first
// dimension is not bounded (it is the unlimited one of an extensible array).
func (d *elemDecoder) offset(idx uint64) ([]int64, error) {
	off := make([]int64, len(d.grid))
	for i := len(d.grid) - 1; i > 0; i-- {
		if d.grid[i] == 0 {
			return nil, fmt.Errorf("chunk %d in an empty grid", idx)
		}
		off[i] = int64((idx % d.grid[i]) * d.chunkDims[i])
		idx /= d.grid[i]
	}
	if d.chunkDims[0] > 0 && idx > maxCoord/d.chunkDims[0] {
		return nil, fmt.Errorf("chunk index out of range")
	}
	off[0] = int64(idx * d.chunkDims[0])
	return off, nil
}

// pageInit reports bit i (most significant bit first) of a page-initialised bitmap.
func pageInit(bitmap []byte, i uint64) bool {
	return i/8 < uint64(len(bitmap)) && bitmap[i/8]&(0x80>>(i%8)) != 0
}

// fixedDims checks that no dimension can change (maxdims == dims): libhdf5 versions
// disagree on how array indexes are computed otherwise. unlim is the one dimension
// allowed to be unlimited (-1 for none).
func fixedDims(ohdr uint64, dims, maxdims []uint64, unlim int) error {
	for i := range dims {
		if i == unlim {
			if maxdims[i] != ^uint64(0) {
				return fmt.Errorf("h5meta: dataset at %d: dimension %d is not unlimited: %w", ohdr, i, ErrUnsupported)
			}
			continue
		}
		if maxdims[i] != dims[i] {
			return fmt.Errorf("h5meta: dataset at %d: dimension %d can be resized (%d < max %d): %w", ohdr, i, dims[i], maxdims[i], ErrUnsupported)
		}
	}
	return nil
}

func (f *File) fixedArrayChunks(ohdr uint64, l *layout, dims, maxdims []uint64) ([]Chunk, error) {
	if err := fixedDims(ohdr, dims, maxdims, -1); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("fixed array header of dataset at %d", ohdr)
	raw, err := f.read(l.idxAddr, 8+f.sl+f.so+checksumLen, what)
	if err != nil {
		return nil, err
	}
	b := &buf{b: raw, what: what}
	b.signature("FAHD")
	if v := b.u8(); v != 0 && b.err == nil {
		return nil, fmt.Errorf("h5meta: %s: version %d: %w", what, v, ErrUnsupported)
	}
	client, esize, pageBits := int(b.u8()), int(b.u8()), b.u8()
	nelmts := b.uint(f.sl)
	dblk := b.offset(f.so)
	if b.err != nil {
		return nil, b.err
	}
	if nelmts >= 1<<maxArrayBits || pageBits >= maxArrayBits {
		return nil, fmt.Errorf("h5meta: %s: %d elements, %d page bits", what, nelmts, pageBits)
	}
	d, err := f.newElemDecoder(ohdr, l, dims, client, esize)
	if err != nil {
		return nil, err
	}
	d.out = []Chunk{}
	if dblk == f.undef() || nelmts == 0 {
		return d.out, nil
	}
	what = fmt.Sprintf("fixed array data block of dataset at %d", ohdr)
	prefix := 4 + 1 + 1 + f.so
	pageN := uint64(1) << pageBits
	if nelmts <= pageN { // not paged: the elements follow the prefix
		raw, err := f.read(dblk, prefix+int(nelmts)*esize, what)
		if err != nil {
			return nil, err
		}
		if string(raw[:4]) != "FADB" {
			return nil, fmt.Errorf("h5meta: %s: bad signature %q", what, raw[:4])
		}
		if err := d.elems(raw[prefix:], 0, nelmts, what); err != nil {
			return nil, err
		}
		return d.out, nil
	}
	npages := (nelmts + pageN - 1) / pageN
	bitmapLen := (npages + 7) / 8
	if bitmapLen > maxRead {
		return nil, fmt.Errorf("h5meta: %s: %d pages", what, npages)
	}
	raw, err = f.read(dblk, prefix+int(bitmapLen), what)
	if err != nil {
		return nil, err
	}
	if string(raw[:4]) != "FADB" {
		return nil, fmt.Errorf("h5meta: %s: bad signature %q", what, raw[:4])
	}
	bitmap := raw[prefix:]
	pageSize := pageN*uint64(esize) + checksumLen
	first := dblk + uint64(prefix) + bitmapLen + checksumLen
	for p := uint64(0); p < npages; p++ {
		if !pageInit(bitmap, p) {
			continue
		}
		n := min(pageN, nelmts-p*pageN)
		page, err := f.read(first+p*pageSize, int(n)*esize, what+" page")
		if err != nil {
			return nil, err
		}
		if err := d.elems(page, p*pageN, n, what+" page"); err != nil {
			return nil, err
		}
	}
	return d.out, nil
}

func (f *File) extArrayChunks(ohdr uint64, l *layout, dims, maxdims []uint64) ([]Chunk, error) {
	if err := fixedDims(ohdr, dims, maxdims, 0); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("extensible array header of dataset at %d", ohdr)
	raw, err := f.read(l.idxAddr, 12+6*f.sl+f.so+checksumLen, what)
	if err != nil {
		return nil, err
	}
	b := &buf{b: raw, what: what}
	b.signature("EAHD")
	if v := b.u8(); v != 0 && b.err == nil {
		return nil, fmt.Errorf("h5meta: %s: version %d: %w", what, v, ErrUnsupported)
	}
	client, esize := int(b.u8()), int(b.u8())
	maxBits, iblkElmts, dblkMin, sblkMinPtrs, pageBits := b.u8(), b.u8(), b.u8(), b.u8(), b.u8()
	b.skip(4 * f.sl) // statistics: super blocks, their size, data blocks, their size
	maxIdx := b.uint(f.sl)
	b.uint(f.sl) // number of elements
	iblk := b.offset(f.so)
	if b.err != nil {
		return nil, b.err
	}
	log2 := func(x uint64) (uint, bool) { // exact log2 of a power of two
		for i := uint(0); i < 64; i++ {
			if x == 1<<i {
				return i, true
			}
		}
		return 0, false
	}
	lgMin, ok1 := log2(dblkMin)
	lgPtrs, ok2 := log2(sblkMinPtrs)
	if !ok1 || !ok2 || sblkMinPtrs < 2 || maxBits > maxArrayBits || uint64(lgMin) > maxBits ||
		pageBits >= maxArrayBits || maxIdx >= 1<<maxArrayBits {
		return nil, fmt.Errorf("h5meta: %s: bad parameters (max bits %d, data block min %d, super block min pointers %d, page bits %d, max index %d)",
			what, maxBits, dblkMin, sblkMinPtrs, pageBits, maxIdx)
	}
	d, err := f.newElemDecoder(ohdr, l, dims, client, esize)
	if err != nil {
		return nil, err
	}
	d.out = []Chunk{}
	if iblk == f.undef() || maxIdx == 0 {
		return d.out, nil
	}
	nsblks := 1 + int(maxBits) - int(lgMin)
	iblkSblks := min(2*int(lgPtrs), nsblks)
	ndblkAddrs := 2 * (int(sblkMinPtrs) - 1)
	nsblkAddrs := nsblks - iblkSblks
	offSize := (int(maxBits) + 7) / 8
	pageN := uint64(1) << pageBits

	what = fmt.Sprintf("extensible array index block of dataset at %d", ohdr)
	prefix := 4 + 1 + 1 + f.so
	raw, err = f.read(iblk, prefix+int(iblkElmts)*esize+(ndblkAddrs+nsblkAddrs)*f.so, what)
	if err != nil {
		return nil, err
	}
	b = &buf{b: raw, what: what}
	b.signature("EAIB")
	b.skip(prefix - 4)
	elems := b.bytes(int(iblkElmts) * esize)
	dblkAddrs := make([]uint64, ndblkAddrs)
	for i := range dblkAddrs {
		dblkAddrs[i] = b.offset(f.so)
	}
	sblkAddrs := make([]uint64, nsblkAddrs)
	for i := range sblkAddrs {
		sblkAddrs[i] = b.offset(f.so)
	}
	if b.err != nil {
		return nil, b.err
	}
	if err := d.elems(elems, 0, min(uint64(iblkElmts), maxIdx), what); err != nil {
		return nil, err
	}

	// dataBlock decodes data block addr holding n elements from array index idx; bitmap
	// and bit0 give its pages' initialised flags when it is paged.
	dataBlock := func(addr, idx, n uint64, bitmap []byte, bit0 uint64) error {
		what := fmt.Sprintf("extensible array data block of dataset at %d", ohdr)
		dprefix := prefix + offSize
		if n <= pageN {
			raw, err := f.read(addr, dprefix+int(n)*esize, what)
			if err != nil {
				return err
			}
			if string(raw[:4]) != "EADB" {
				return fmt.Errorf("h5meta: %s at %d: bad signature %q", what, addr, raw[:4])
			}
			return d.elems(raw[dprefix:], idx, min(n, maxIdx-idx), what)
		}
		npages := n / pageN
		pageSize := pageN*uint64(esize) + checksumLen
		first := addr + uint64(dprefix) + checksumLen
		for p := uint64(0); p < npages && idx+p*pageN < maxIdx && bit0+p < 8*uint64(len(bitmap)); p++ {
			if !pageInit(bitmap, bit0+p) {
				continue
			}
			page, err := f.read(first+p*pageSize, int(pageN)*esize, what+" page")
			if err != nil {
				return err
			}
			start := idx + p*pageN
			if err := d.elems(page, start, min(pageN, maxIdx-start), what+" page"); err != nil {
				return err
			}
		}
		return nil
	}

	idx := uint64(iblkElmts) // array index of the first element of super block s
	for s := 0; s < nsblks && idx < maxIdx; s++ {
		ndblks := uint64(1) << (s / 2)
		dn := (uint64(1) << ((s + 1) / 2)) * dblkMin
		if s < iblkSblks {
			first := (uint64(1)<<(s/2+1) - 2 + uint64(s%2)*(uint64(1)<<(s/2))) // data blocks of super blocks < s
			for k := uint64(0); k < ndblks && idx < maxIdx; k++ {
				if first+k >= uint64(len(dblkAddrs)) {
					return nil, fmt.Errorf("h5meta: %s: data block %d out of range", what, first+k)
				}
				if a := dblkAddrs[first+k]; a != f.undef() {
					if err := dataBlock(a, idx, dn, nil, 0); err != nil {
						return nil, err
					}
				}
				idx += dn
			}
			continue
		}
		sa := sblkAddrs[s-iblkSblks]
		if sa == f.undef() {
			idx += ndblks * dn
			continue
		}
		swhat := fmt.Sprintf("extensible array super block of dataset at %d", ohdr)
		var bitmapLen uint64
		if dn > pageN {
			bitmapLen = ndblks * ((dn/pageN + 7) / 8)
		}
		raw, err := f.read(sa, prefix+offSize+int(bitmapLen)+int(ndblks)*f.so, swhat)
		if err != nil {
			return nil, err
		}
		sb := &buf{b: raw, what: swhat}
		sb.signature("EASB")
		sb.skip(prefix - 4 + offSize)
		bitmap := sb.bytes(int(bitmapLen))
		for k := uint64(0); k < ndblks && idx < maxIdx; k++ {
			a := sb.offset(f.so)
			if sb.err != nil {
				return nil, sb.err
			}
			if a != f.undef() {
				if err := dataBlock(a, idx, dn, bitmap, k*(dn/pageN)); err != nil {
					return nil, err
				}
			}
			idx += dn
		}
	}
	return d.out, nil
}
