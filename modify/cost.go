package modify

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/vh5fs/vh5fs/chunkplan"
	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
	"github.com/vh5fs/vh5fs/hashtable"
	"github.com/vh5fs/vh5fs/versions"
)

// MaxVersionChunks is how many chunks one version of the dataset may have after a rewrite
// without Options.Force, unless it had more before. Each chunk is one mapping of the
// version's virtual dataset, and libhdf5 1.10 (what h5py and versioned-hdf5 use) opens a
// virtual dataset by building every mapping's selections: measured with h5py 3.7 on
// libhdf5 1.10.8, opening a version of 10,000 chunks takes 0.3 GiB of memory, 100,000 take
// 2.5 GiB and 5 to 13 s, and 1,000,000 were killed at 19 GiB. The limit keeps a version
// openable by the library on an ordinary machine.
const MaxVersionChunks = 100_000

// openBytesPerChunk is the memory h5py needs per mapping to open a virtual dataset, as
// measured above (2.5 GiB for 100,000): what the refusal quotes.
const openBytesPerChunk = 25 << 10

// ErrTooManyChunks marks a rewrite past MaxVersionChunks without Options.Force.
var ErrTooManyChunks = errors.New("too many chunks per version")

// Cost is what a rewrite makes and leaves behind. The chunk counts are exact (they follow
// from the versions' shapes); the bytes written depend on how the new chunks deduplicate
// and compress, so they are an estimate; the old storage is measured in the file.
type Cost struct {
	// VersionChunks are the new chunks (mappings) of each of Plan.Versions.
	VersionChunks []int64
	// MaxChunks and OldMaxChunks are the most chunks one version has after and before.
	MaxChunks, OldMaxChunks int64
	// Mappings is the chunks of all versions: what the new virtual datasets map.
	Mappings int64
	// NewSlots estimates the new raw_data's chunk slots: the new chunks of distinct
	// sources (sourceCount), fewer in the proportion of a sample's chunks of different
	// sources that hold equal data (Counted); else, where a version has no chunk map vh5fs
	// reads, the old slots' data cut into new chunks, at most one per mapping, which
	// leaves out the chunks versions share in part: about a lower bound.
	NewSlots int64
	// Counted: NewSlots and the sample come from the versions' chunk maps.
	Counted bool
	// Strings: variable-length strings, whose chunks hold references to the strings in
	// the file's heap: Growth counts the references, not the strings, a lower bound.
	Strings bool
	// Growth estimates the bytes the file grows by: the new slots' stored chunks,
	// hash-table rows and chunk-index entries, the new mapping lists (libhdf5 1.10's
	// encoding) and the new objects' headers. The old storage stays in the file until
	// vh5fs compact. Compressed chunks are taken to compress as Sampled new chunks did
	// (the new filters run on them), else, where none could be made, as the old ones did;
	// GrowthWhole is the same estimate with every chunk stored whole, equal to Growth for
	// uncompressed data.
	Growth, GrowthWhole int64
	// Sampled is how many new chunks were made to measure how the new filters compress
	// them and how many hold equal data (0: none could be; the old chunks' ratio stands
	// in), Ratio what they were stored in over their whole size.
	Sampled int
	Ratio   float64
	// Unused is the stored bytes of the old raw_data's chunks, its hash_table's and the
	// versions' mapping lists, read from the file: space the rewrite leaves unused, which
	// vh5fs compact gives back (with the old objects' headers and index nodes, not
	// counted). -1 where the file's layout is not one h5meta reads.
	Unused int64
}

// chunkCount is the number of chunks of chunk shape c covering shape.
func chunkCount(shape, c []int64) int64 {
	n := int64(1)
	for i, s := range shape {
		n *= (s + c[i] - 1) / c[i]
	}
	return n
}

// cost fills m.Cost from the versions' shapes and the file's old storage; with estimate,
// NewSlots and Growth from the versions' chunk maps and a sample of new chunks too (a
// rewrite that runs needs neither, and it would read every chunk map once more).
func (m *modification) cost(estimate bool) {
	c := &m.Cost
	c.VersionChunks = make([]int64, len(m.shapes))
	for i, s := range m.shapes {
		n := chunkCount(s, m.New.Chunks)
		c.VersionChunks[i] = n
		c.Mappings += n
		c.MaxChunks = max(c.MaxChunks, n)
		c.OldMaxChunks = max(c.OldMaxChunks, chunkCount(s, m.Old.Chunks))
	}
	rank := int64(len(m.New.Chunks))
	newElems, oldElems := int64(1), int64(1)
	for i := range m.New.Chunks {
		newElems *= m.New.Chunks[i]
		oldElems *= m.Old.Chunks[i]
	}
	var n int64
	var samples []sample
	ok := false
	if estimate {
		n, samples, ok = m.sourceCount()
	}
	var sampled sampling
	// Strings are not sampled: their chunks hold heap handles, so Growth counts the handles
	// and not the strings' bytes, a lower bound.
	if ok && len(samples) > 0 && !m.strings {
		// A sample that cannot be made leaves the source count and the old chunks' ratio.
		if s, err := m.sample(samples); err == nil {
			sampled = s
		}
	}
	c.Strings = m.strings
	if ok {
		c.NewSlots, c.Counted = n, true
		if sampled.n > 0 {
			// Sources whose chunks hold equal data are one slot: as many, in proportion, as
			// in the sample (never fewer slots than the sample's distinct chunks).
			c.NewSlots = max(int64(sampled.distinct), (n*int64(sampled.distinct)+int64(sampled.n)-1)/int64(sampled.n))
		}
	} else {
		c.NewSlots = min(c.Mappings, max(1, (m.OldSlots*oldElems+newElems-1)/newElems))
	}
	if c.Mappings == 0 {
		c.NewSlots = 0
	}
	stored, ratio := m.oldStorage()
	c.Unused = stored
	chunkBytes := float64(newElems * int64(m.to.size))
	if sampled.n > 0 {
		c.Sampled = sampled.n
		ratio = float64(sampled.stored) / float64(sampled.whole)
	}
	switch {
	case compression(m.New) == "none":
		ratio = 1
	case c.Sampled > 0:
	case compression(m.Old) == "none" || ratio <= 0 || ratio > 1:
		ratio = 1 // no measure of how the new filters compress: whole chunks
	}
	c.Ratio = ratio
	// Per mapping, in libhdf5 1.10's list: the source file and dataset names, then two
	// one-block hyperslab selections.
	src := len(versions.RawDataOf(m.Dataset))
	perMapping := int64(2+src+1) + 2*(24+8*rank)
	growth := func(ratio float64) int64 {
		// Per slot: the stored chunk, its hash-table row and its entry in raw_data's chunk
		// index (a version 1 B-tree key of size, filter mask and rank+1 offsets, and a
		// child address).
		perSlot := chunkBytes*ratio + hashtable.RowBytes + float64(16+8*(rank+1))
		return int64(float64(c.NewSlots)*perSlot) + c.Mappings*perMapping + rewriteBytes + int64(len(m.Versions))*versionBytes
	}
	c.Growth, c.GrowthWhole = growth(ratio), growth(1)
}

// rewriteBytes and versionBytes are what a rewrite adds besides its chunks and mappings,
// fitted with libhdf5 1.10.8 to the rewrites TestEstimate makes (2 to 300 versions): the
// new raw_data and hash_table (object headers, index roots, the hash table's first
// chunk, heap collection), and each version's new virtual dataset's object header and
// attributes.
const (
	rewriteBytes = 13 << 10
	versionBytes = 480
)

// oldStorage measures the old storage in the file: the stored bytes of raw_data's and
// hash_table's chunks and of the versions' mapping lists, and how raw_data's chunks
// compress (stored bytes over whole chunks). -1 where h5meta cannot read them.
func (m *modification) oldStorage() (stored int64, ratio float64) {
	h := m.f.HDF5()
	fh, err := os.Open(m.File)
	if err != nil {
		return -1, 0
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return -1, 0
	}
	meta, err := h5meta.Open(fh, st.Size())
	if err != nil {
		return -1, 0
	}
	group := versions.DataGroupOf(m.Dataset)
	var rawChunks int64
	for _, name := range []string{versions.RawData, versions.HashTable} {
		addr, err := h.ObjectAddr(group + "/" + name)
		if err != nil {
			return -1, 0
		}
		chunks, err := meta.Chunks(addr)
		if err != nil {
			return -1, 0
		}
		var sum int64
		for _, ch := range chunks {
			sum += ch.Size
		}
		stored += sum
		if name == versions.RawData && len(chunks) > 0 {
			rawChunks = int64(len(chunks))
			whole := int64(m.from.size)
			for _, c := range m.Old.Chunks {
				whole *= c
			}
			ratio = float64(sum) / float64(rawChunks*whole)
		}
	}
	for _, v := range m.Versions {
		addr, err := h.ObjectAddr(versions.InVersion(v, m.Dataset))
		if err != nil {
			return -1, 0
		}
		n, err := meta.MappingListLen(addr)
		if err != nil {
			return -1, 0
		}
		stored += int64(n)
	}
	return stored, ratio
}

// checkLimit refuses, unless forced, a rewrite that gives a version more chunks than
// MaxVersionChunks and than it had.
func (m *modification) checkLimit(force bool) error {
	c := m.Cost
	if force || c.MaxChunks <= MaxVersionChunks || c.MaxChunks <= c.OldMaxChunks {
		return nil
	}
	return limitError(fmt.Sprintf("chunks %s make %d chunks in a version, past the limit of %d per version "+
		"(h5py needs about %d KiB of memory per chunk to open a version: %s here); --force rewrites anyway",
		chunkplan.Tuple(m.New.Chunks), c.MaxChunks, MaxVersionChunks, openBytesPerChunk>>10,
		sizeText(c.MaxChunks*openBytesPerChunk)))
}

// checkReadLimit refuses a rewrite of a dataset whose version v (at p) already has more
// than MaxVersionChunks chunks of raw_data's chunks, before anything of it is read: the
// rewrite reads each version's chunk map whole, and libhdf5 decodes the mapping list of
// the first version it unlinks (measured: 0.6 GiB for one of 100,000 chunks, 6.5 GiB for
// 1,000,000), past the memory vh5fs commands stay within. The count comes from the
// headers alone; with chunks nil the plan goes on and reports what is wrong.
func checkReadLimit(h *h5.File, p, v string, chunks []int64) error {
	hd, ok, err := h.DatasetHeader(p)
	if err != nil || !ok {
		return err // libhdf5 reads it: the plan goes on and finds what is wrong
	}
	if len(chunks) != len(hd.Shape) || slices.Contains(chunks, 0) {
		return nil
	}
	if n := chunkCount(hd.Shape, chunks); n > MaxVersionChunks {
		return limitError(fmt.Sprintf("version %s has %d chunks, past the limit of %d per version: modify reads "+
			"each version's chunk map, and libhdf5 decodes the mappings it replaces (about %d KiB a chunk: %s here); "+
			"--force rewrites anyway", v, n, MaxVersionChunks, readBytesPerChunk>>10, sizeText(n*readBytesPerChunk)))
	}
	return nil
}

// readBytesPerChunk is the memory a rewrite took per chunk of a version it replaced, as
// measured above: what checkReadLimit's refusal quotes.
const readBytesPerChunk = 6 << 10

// limitError is checkLimit's refusal: errors.Is(err, ErrTooManyChunks).
type limitError string

func (e limitError) Error() string        { return string(e) }
func (e limitError) Is(target error) bool { return target == ErrTooManyChunks }

// sizeText is n in B, KiB, MiB or GiB with one decimal.
func sizeText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, units := float64(n)/1024, []string{"KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// sourceCount counts the distinct sources of the new chunks of every version: a new
// chunk's data follows from its extent (trimmed to the version's shape), its offset in
// the old chunk grid and the raw_data slot of every old chunk it overlaps, unmapped ones
// being the fill value; a chunk all fill is the same wherever it is. Equal sources make
// equal chunks, which the rewrite stores once; different ones may still hold equal data,
// so the count is an upper bound of the slots the rewrite makes, and near it on data that
// versions changed. Only the chunk maps are read, each version's in turn; a band (a row
// of new chunks along axis 0) whose old slots an earlier version had at the same place,
// with the same shape, is not looked at again, as the rewrite does not read it again. ok
// is false if a version has no clean chunk map (Dataset.Blocks).
//
// The new chunks of distinct sources are sampled for sample: sampleCount of them drawn
// at random, each as likely (a reservoir; a fixed seed, so that -n says the same each
// time): a regular pick would follow the grid's period (every other chunk of a band of
// two is always the same column).
func (m *modification) sourceCount() (n int64, samples []sample, ok bool) {
	seen := map[[16]byte]struct{}{}
	bandsSeen := map[[16]byte]struct{}{}
	rng := rand.New(rand.NewPCG(1, 2))
	want := m.sampleCount()
	found := func(version int, idx []int64) {
		s := sample{version, slices.Clone(idx)}
		if n := int64(len(seen)); n <= want {
			samples = append(samples, s)
		} else if j := rng.Int64N(n); j < want {
			samples[j] = s
		}
	}
	for i, v := range m.Versions {
		d, err := m.f.Dataset(versions.InVersion(v, m.Dataset))
		if err != nil {
			return 0, nil, false
		}
		ok := m.versionSources(d.EachBlock, m.shapes[i], seen, bandsSeen, func(idx []int64) { found(i, idx) })
		m.f.Forget(v) // memory holds one version's chunk map
		if !ok {
			return 0, nil, false
		}
	}
	// Read in the versions' order: each version's dataset is opened once.
	slices.SortStableFunc(samples, func(a, b sample) int { return a.version - b.version })
	return int64(len(seen)), samples, true
}

// versionSources adds the sources of one version's new chunks (shape, chunk map each)
// to seen, telling found of each new one; bandsSeen holds the bands done. false if each
// reports no chunk map.
func (m *modification) versionSources(each func(func(grid []int64, row int64) error) (bool, error), shape []int64,
	seen, bandsSeen map[[16]byte]struct{}, found func(idx []int64)) bool {
	if slices.Contains(shape, 0) {
		return true
	}
	oc, nc := m.Old.Chunks, m.New.Chunks
	rank := len(shape)
	og := make([]int64, rank) // the old grid
	ostride := make([]int64, rank)
	for a := rank - 1; a >= 0; a-- {
		og[a] = (shape[a] + oc[a] - 1) / oc[a]
		ostride[a] = 1
		if a < rank-1 {
			ostride[a] = ostride[a+1] * og[a+1]
		}
	}
	rows := make([]int64, ostride[0]*og[0]) // old chunk (C order) -> slot row, -1 unmapped
	for i := range rows {
		rows[i] = -1
	}
	ok, err := each(func(grid []int64, row int64) error {
		var k int64
		for a, g := range grid {
			k += g * ostride[a]
		}
		if k >= 0 && k < int64(len(rows)) {
			rows[k] = row
		}
		return nil
	})
	if !ok || err != nil {
		return false
	}
	ng := make([]int64, rank) // the new grid
	for a := range shape {
		ng[a] = (shape[a] + nc[a] - 1) / nc[a]
	}
	h := sha256.New()
	var buf [8]byte
	put := func(x int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(x))
		h.Write(buf[:])
	}
	sum := func() (k [16]byte) {
		var full [32]byte
		h.Sum(full[:0])
		copy(k[:], full[:])
		return k
	}
	idx := make([]int64, rank)   // a new chunk's grid index
	lo := make([]int64, rank)    // its first old chunk, per axis
	hi := make([]int64, rank)    // its last
	pos := make([]int64, rank)   // an old chunk it overlaps
	L := make([]int64, rank)     // its extent, trimmed to the shape
	srcs := make([]int64, 0, 16) // the slots of the old chunks it overlaps
	for b := int64(0); b < ng[0]; b++ {
		// The band's key, as the rewrite's memo (sources.key): its index, the shape and
		// the slots of the old chunk rows it overlaps.
		h.Reset()
		put(b)
		for _, x := range shape {
			put(x)
		}
		r0, r1 := b*nc[0]/oc[0], (min(shape[0], (b+1)*nc[0])-1)/oc[0]
		for _, r := range rows[r0*ostride[0] : (r1+1)*ostride[0]] {
			put(r)
		}
		bk := sum()
		if _, done := bandsSeen[bk]; done {
			continue
		}
		bandsSeen[bk] = struct{}{}
		clear(idx)
		idx[0] = b
		for {
			for a := range rank {
				start := idx[a] * nc[a]
				L[a] = min(shape[a], start+nc[a]) - start
				lo[a], hi[a] = start/oc[a], (start+L[a]-1)/oc[a]
			}
			srcs = srcs[:0]
			copy(pos, lo)
			mapped := false
			for {
				var k int64
				for a, p := range pos {
					k += p * ostride[a]
				}
				srcs = append(srcs, rows[k])
				mapped = mapped || rows[k] >= 0
				a := rank - 1
				for ; a >= 0; a-- {
					if pos[a]++; pos[a] <= hi[a] {
						break
					}
					pos[a] = lo[a]
				}
				if a < 0 {
					break
				}
			}
			h.Reset()
			for _, x := range L {
				put(x)
			}
			if mapped { // else all fill: the same chunk wherever it is
				for a := range rank {
					put(idx[a] * nc[a] % oc[a])
				}
				for _, r := range srcs {
					put(r)
				}
			}
			if k := sum(); !has(seen, k) {
				seen[k] = struct{}{}
				found(idx)
			}
			if !chunkplan.Next(idx[1:], ng[1:]) {
				break
			}
		}
	}
	return true
}

func has(set map[[16]byte]struct{}, k [16]byte) bool {
	_, ok := set[k]
	return ok
}

// The estimate makes sampleBytes of new chunks, at least minSamples and at most
// maxSamples of them: enough to see how the data compresses and whether chunks of
// different sources hold equal data (the more the surer), a read of a few MiB.
const (
	sampleBytes = 16 << 20
	minSamples  = 4
	maxSamples  = 256
)

// sampleCount is how many new chunks the estimate makes.
func (m *modification) sampleCount() int64 {
	whole := int64(m.to.size) * chunkplan.Elements(m.New.Chunks)
	return min(maxSamples, max(minSamples, sampleBytes/max(whole, 1)))
}

// sample is a new chunk of one of Versions: its grid index.
type sample struct {
	version int
	idx     []int64
}

// sampling is what the sampled new chunks were: how many, how many of them held
// different data, their whole and stored bytes.
type sampling struct {
	n, distinct   int
	whole, stored int64
}

// sample makes the sampled new chunks (read from their versions, converted to the new
// dtype, padded with the new fill value, as the rewrite makes them), digests them as the
// rewrite does and runs the new filters on them.
func (m *modification) sample(samples []sample) (sampling, error) {
	var pipeline []h5.Filter
	if m.New.Shuffle {
		pipeline = append(pipeline, h5.Filter{ID: filterShuffle})
	}
	if m.New.Gzip >= 0 {
		pipeline = append(pipeline, h5.Filter{ID: filterDeflate, Params: []uint32{uint32(m.New.Gzip)}})
	}
	enc := commit.PipelineEncoder(pipeline, m.to.size)
	if enc == nil {
		return sampling{}, fmt.Errorf("no encoder for %v", pipeline)
	}
	var htab []int32
	if m.New.LZF {
		htab = make([]int32, 1<<16)
	}
	var s sampling
	digests := map[[32]byte]bool{}
	for i := 0; i < len(samples); {
		v := m.Versions[samples[i].version]
		d, err := m.f.Dataset(versions.InVersion(v, m.Dataset))
		if err != nil {
			return sampling{}, err
		}
		for ; i < len(samples) && m.Versions[samples[i].version] == v; i++ {
			chunk, trimmed, err := m.sampleChunk(d, samples[i].idx)
			if err != nil {
				return sampling{}, fmt.Errorf("version %s: %w", v, err)
			}
			dg := hashtable.Hash(chunk, m.New.Chunks, trimmed, m.to.size)
			if digests[dg] {
				continue // stored once: its bytes count once
			}
			digests[dg] = true
			out, err := enc(chunk)
			if err != nil {
				return sampling{}, err
			}
			n := len(out)
			if m.New.LZF { // after the shuffle
				n = lzfSize(out, htab)
			}
			s.stored += int64(n)
			s.whole += int64(len(chunk))
		}
		m.f.Forget(v)
	}
	s.n, s.distinct = len(samples), len(digests)
	return s, nil
}

// sampleChunk makes new chunk idx of d as the rewrite's cut does, reading only it: its
// elements in the new dtype, the padding the new fill value; and its trimmed extent.
func (m *modification) sampleChunk(d *versions.Dataset, idx []int64) ([]byte, []int64, error) {
	shape, nc := d.Shape, m.New.Chunks
	rank := len(shape)
	from, to := int64(m.from.size), int64(m.to.size)
	chunk := make([]byte, to*chunkplan.Elements(nc))
	L := make([]int64, rank)
	for a := range rank {
		start := idx[a] * nc[a]
		L[a] = min(shape[a], start+nc[a]) - start
	}
	if !slices.Equal(L, nc) {
		for i := 0; i < len(chunk); i += len(m.New.Fill) {
			copy(chunk[i:], m.New.Fill)
		}
	}
	dstride, cstride := make([]int64, rank), make([]int64, rank) // elements
	dstride[rank-1], cstride[rank-1] = 1, 1
	for a := rank - 2; a >= 0; a-- {
		dstride[a], cstride[a] = dstride[a+1]*shape[a+1], cstride[a+1]*nc[a+1]
	}
	last := L[rank-1]
	buf := make([]byte, last*from)
	pos := make([]int64, rank-1) // within the chunk, along the axes but the last
	for {
		off, coff := idx[rank-1]*nc[rank-1], int64(0)
		for a, p := range pos {
			off += (idx[a]*nc[a] + p) * dstride[a]
			coff += p * cstride[a]
		}
		if n, err := d.ReadAt(buf, off*from); err != nil && n != len(buf) {
			return nil, nil, err
		} else if n != len(buf) {
			return nil, nil, fmt.Errorf("read %d bytes at element %d, not %d", n, off, len(buf))
		}
		m.conv.run(chunk[coff*to:], buf, int(last))
		a := rank - 2
		for ; a >= 0; a-- {
			if pos[a]++; pos[a] < L[a] {
				break
			}
			pos[a] = 0
		}
		if a < 0 {
			return chunk, L, nil
		}
	}
}
