package modify

import (
	"errors"
	"fmt"
	"os"
	"slices"

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
	// NewSlots estimates the new raw_data's chunk slots: the distinct data of the old slots
	// cut into new chunks, at most one per mapping.
	NewSlots int64
	// Growth estimates the bytes the file grows by: the new slots' stored chunks,
	// hash-table rows and chunk-index entries, the new mapping lists (libhdf5 1.10's
	// encoding) and the new objects' headers. The old storage stays in the file until
	// vh5fs compact. Compressed chunks are taken to compress as the old ones did;
	// GrowthWhole is the same estimate with every chunk stored whole (new chunks,
	// smaller ones above all, may compress worse), equal to Growth for uncompressed data.
	Growth, GrowthWhole int64
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

// cost fills m.Cost from the versions' shapes and the file's old storage.
func (m *modification) cost() {
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
	c.NewSlots = min(c.Mappings, max(1, (m.OldSlots*oldElems+newElems-1)/newElems))
	if c.Mappings == 0 {
		c.NewSlots = 0
	}
	stored, ratio := m.oldStorage()
	c.Unused = stored
	chunkBytes := float64(newElems * int64(m.to.size))
	if compression(m.New) == "none" || compression(m.Old) == "none" || ratio <= 0 || ratio > 1 {
		ratio = 1 // stored whole, or no measure of how the new filters compress: whole chunks
	}
	// Per mapping, in libhdf5 1.10's list: the source file and dataset names, then two
	// one-block hyperslab selections.
	src := len(versions.DataRoot + "/" + m.Dataset + "/raw_data")
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
// measured with libhdf5 1.10.8 (rewrites of 1 and of 20 versions of 8 chunks): the new
// raw_data and hash_table (object headers, index roots, heap collection), and each
// version's new virtual dataset's object header.
const (
	rewriteBytes = 16 << 10
	versionBytes = 320
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
	group := versions.DataRoot + "/" + m.Dataset
	var rawChunks int64
	for _, name := range []string{"raw_data", "hash_table"} {
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
		if name == "raw_data" && len(chunks) > 0 {
			rawChunks = int64(len(chunks))
			whole := int64(m.from.size)
			for _, c := range m.Old.Chunks {
				whole *= c
			}
			ratio = float64(sum) / float64(rawChunks*whole)
		}
	}
	for _, v := range m.Versions {
		addr, err := h.ObjectAddr(versions.VersionsGroup + "/" + v + "/" + m.Dataset)
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
		tuple(m.New.Chunks), c.MaxChunks, MaxVersionChunks, openBytesPerChunk>>10,
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
