package versions

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/chunkstore"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
)

// ErrUnsupported marks a dataset vh5fs cannot serve as bytes (e.g. vlen sequences).
var ErrUnsupported = errors.New("unsupported dataset")

// Dataset is one dataset of one version (or of the plain tree), ready to be read.
type Dataset struct {
	Path    string // HDF5 path of the dataset (the VDS for versioned datasets)
	Type    h5.Type
	Shape   []int64
	Chunks  []int64 // the chunk grid (raw_data's chunks for versioned datasets); nil if contiguous
	Fill    []byte  // one element; nil for variable-length strings
	Filters []h5.Filter
	RawData string // backing raw_data path of versioned datasets
	Layout  h5.Layout
	Strings bool // variable-length strings, served as text (see TextForm)

	fillDefined bool // the dataset's creator set Fill explicitly
	null        bool // a null dataspace: no elements
	live        bool // a live snapshot (live.go): no chunk map

	lastUse uint64 // when the File's cache last handed it out (datasetBudget); GUARDED_BY(File.mu)

	attrsOnce sync.Once
	attrs     []h5.Attr // the dataset's HDF5 attributes, read on first use
	attrsErr  error
	f         *File
	size      int64
	// Exactly one read route is set: text for strings, scalar for a scalar dataset's one
	// element, arr (the chunk map) for versioned datasets whose mappings form a clean
	// chunk map, vds otherwise (libhdf5 resolves the selection). A null dataspace has none
	// (size 0).
	text   []byte
	scalar []byte
	arr    *chunkmap.Map
	raw    *h5.Dataset
	vds    *h5.Dataset
	plan   *chunkmap.Map // plans byte ranges for the vds route
	// textMap: text was read from raw_data through the mappings vh5fs decodes
	// (renderMapped), not through libhdf5 opening the virtual dataset; it is their chunk
	// map (one byte per element stands in for the strings).
	textMap *chunkmap.Map
	// chunked reads the chunk route (arr) from the File's chunk store; made on first use.
	chunkedOnce sync.Once
	chunked     *chunkstore.Chunked
	// blockList is the stored chunks of a versioned dataset, made from arr on first use.
	blockOnce sync.Once
	blockList []Block

	// derived holds values computed from the dataset once, by key (see Derived).
	derivedMu sync.Mutex
	derived   map[any]*derivedValue
}

type derivedValue struct {
	once sync.Once
	v    any
	err  error
}

// Derived returns the value build computes from d, computing it once per key for the life
// of d (a dataset is immutable, so what is made from it is too): package xattrs keeps the
// rendered attributes here, whose chunk map is costly to build. Errors are kept as well.
func (d *Dataset) Derived(key any, build func() (any, error)) (any, error) {
	d.derivedMu.Lock()
	e, ok := d.derived[key]
	if !ok {
		if d.derived == nil {
			d.derived = map[any]*derivedValue{}
		}
		e = &derivedValue{}
		d.derived[key] = e
	}
	d.derivedMu.Unlock()
	e.once.Do(func() { e.v, e.err = build() })
	return e.v, e.err
}

// File is the file d belongs to.
func (d *Dataset) File() *File { return d.f }

// TextForm documents how variable-length string datasets read: one JSON string per
// element, in C order, each followed by a newline. They are read-only.
const TextForm = "one JSON string per element in C order, newline-terminated"

// Size is the size in bytes of the dataset's file.
func (d *Dataset) Size() int64 { return d.size }

// DType is the numpy dtype string, "O" for variable-length strings.
func (d *Dataset) DType() string { return d.Type.DType }

// Dataset returns the dataset at path, loading it on first use. Datasets of committed
// versions are immutable, so the value is cached for the life of the File. In a live file,
// datasets outside committed versions are refreshed and snapshotted on every call instead
// (live.go).
func (f *File) Dataset(path string) (*Dataset, error) {
	if f.isLivePath(path) {
		return f.liveDataset(path)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.datasets[path]; ok {
		f.mapped.use(d)
		return d, nil
	}
	d, err := f.loadDataset(path)
	if err != nil {
		return nil, err
	}
	f.keep(path, d)
	return d, nil
}

// Attrs returns the dataset's HDF5 attributes (read on first use: for a virtual dataset
// that means libhdf5 opening it, which costs time in proportion to its mappings).
func (d *Dataset) Attrs() ([]h5.Attr, error) {
	d.attrsOnce.Do(func() {
		if d.attrs == nil {
			if d.attrsErr = d.f.CheckAttrs(d.Path); d.attrsErr == nil {
				d.attrs, d.attrsErr = d.f.h.Attrs(d.Path)
			}
		}
	})
	return d.attrs, d.attrsErr
}

func (f *File) loadDataset(path string) (*Dataset, error) {
	if f.versioned && strings.HasPrefix(path, VersionsGroup+"/") {
		if d, err := f.loadVersioned(path); err != nil || d != nil {
			return d, err
		}
	}
	return f.openDataset(path)
}

// openDataset loads the dataset at path through libhdf5 opening it: the general route,
// which for a version's dataset means libhdf5 decoding its virtual dataset.
func (f *File) openDataset(path string) (*Dataset, error) {
	h, err := f.h.OpenDataset(path)
	if err != nil {
		return nil, f.gone(path, err)
	}
	keep := false
	defer func() {
		if !keep {
			h.Close()
		}
	}()
	d := f.describe(path, h)
	if err := d.checkStorage(h); err != nil {
		return nil, err
	}
	versioned := f.versioned && strings.HasPrefix(path, VersionsGroup+"/")
	if versioned {
		if err := d.findRawData(); err != nil {
			return nil, err
		}
	}
	if text, err := d.sizeOrText(h); err != nil {
		return nil, err
	} else if text {
		return d, nil
	}
	if len(d.Shape) == 0 {
		return d, d.readScalar(h)
	}
	if versioned {
		ok, err := d.buildChunkMap(h)
		if err != nil {
			return nil, err
		}
		if ok {
			return d, nil
		}
	}
	if err := d.readThroughHDF5(h); err != nil {
		return nil, err
	}
	keep = true
	return d, nil
}

// describe is the dataset h as libhdf5 reports it. A null dataspace has a nil Shape (its
// shape xattr is null, as h5py's Empty has shape None), a scalar one an empty Shape.
func (f *File) describe(path string, h *h5.Dataset) *Dataset {
	info := h.Info()
	shape := info.Shape
	if info.Null {
		shape = nil
	}
	return &Dataset{
		Path: path, Type: info.Type, Shape: shape, Chunks: info.Chunks, Fill: info.Fill,
		Filters: info.Filters, Layout: info.Layout, f: f, fillDefined: info.FillDefined,
		null: info.Null,
	}
}

// checkStorage refuses what vh5fs cannot serve whatever the type: raw data in external
// files (HDF5 external storage), which libhdf5 looks for relative to the reader's working
// directory, not to the file, and so would read wrong or not at all from a mount.
func (d *Dataset) checkStorage(h *h5.Dataset) error {
	if n := h.Info().External; n > 0 {
		return fmt.Errorf("%s: %w: its raw data is in %d external file(s) (HDF5 external storage), which vh5fs does not serve", d.Path, ErrUnsupported, n)
	}
	return nil
}

// readScalar reads the one element of a scalar dataset (a null dataspace has none). The
// element is all the file holds: size = item size.
func (d *Dataset) readScalar(h *h5.Dataset) error {
	if d.null {
		return nil
	}
	elem := make([]byte, d.Type.Size)
	if err := h.ReadBox(nil, nil, nil, nil, elem); err != nil {
		return err
	}
	d.scalar = elem
	return nil
}

// sizeOrText sets the file's size from the type and shape; variable-length strings are
// rendered as text (text is true: nothing else to set up); types without a byte form are
// an error.
func (d *Dataset) sizeOrText(h *h5.Dataset) (text bool, err error) {
	switch {
	case d.Type.VlenString:
		d.Strings = true
		return true, d.renderText(h)
	case !d.Type.Raw:
		return false, fmt.Errorf("%s: %w: dtype %s has no byte form", d.Path, ErrUnsupported, d.Type.DType)
	}
	d.size = int64(d.Type.Size)
	if d.null {
		d.size = 0
	}
	for _, s := range d.Shape {
		d.size *= s
	}
	return false, nil
}

// readThroughHDF5 sets up the general route: libhdf5 reads the dataset through h (it
// resolves virtual mappings itself), one hyperslab per box of a byte range. d keeps h.
func (d *Dataset) readThroughHDF5(h *h5.Dataset) error {
	chunks := d.Chunks
	if chunks == nil {
		chunks = make([]int64, len(d.Shape))
		for i, s := range d.Shape {
			chunks[i] = max(s, 1)
		}
	}
	plan, err := chunkmap.New(d.Shape, chunks, d.Type.Size, d.Fill)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Path, err)
	}
	d.plan, d.vds = plan, h
	return nil
}

// findRawData locates the backing raw_data of a versioned dataset and its chunk grid:
// the VDS attribute raw_data, or (files from versioned-hdf5 <= 1.1) the path derived from
// the dataset's place in the version.
func (d *Dataset) findRawData() error {
	attrs, err := d.Attrs()
	if err != nil {
		return err
	}
	for _, a := range attrs {
		if a.Name == AttrRawData {
			d.RawData, _ = a.Value.(string)
		}
	}
	if d.RawData == "" {
		rel := strings.TrimPrefix(d.Path, VersionsGroup+"/")
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			d.RawData = RawDataOf(rel[i+1:])
		}
	}
	raw, err := d.f.rawData(d.RawData)
	if err != nil {
		return fmt.Errorf("%s: backing dataset: %w", d.Path, err)
	}
	d.raw = raw
	d.Chunks = raw.Info().Chunks
	d.Filters = raw.Info().Filters // the VDS has none; its chunks are stored with these
	if len(d.Chunks) != len(d.Shape) {
		return fmt.Errorf("%s: raw_data %s has chunks %v for a %d-d dataset", d.Path, d.RawData, d.Chunks, len(d.Shape))
	}
	return nil
}

// buildChunkMap turns the VDS mappings into a chunk map whose base slab is raw_data.
// It reports false when the mappings are not one clean, chunk-aligned block per chunk
// (spec section 8); such datasets are then read through libhdf5.
func (d *Dataset) buildChunkMap(h *h5.Dataset) (bool, error) {
	m, err := chunkmap.New(d.Shape, d.Chunks, d.Type.Size, d.Fill)
	if err != nil {
		return false, fmt.Errorf("%s: %w", d.Path, err)
	}
	if h.Info().Layout != h5.Virtual {
		d.arr = m // no storage at all: every chunk is fill
		return true, nil
	}
	maps, err := d.f.mappings(h)
	if err != nil {
		if errors.Is(err, h5.ErrUnsupported) {
			return false, nil
		}
		return false, err
	}
	if err := d.checkSources(maps); err != nil {
		return false, err
	}
	cm := d.newChunkMapper(m, d.raw.Info().Shape)
	for i := range maps {
		if !cm.add(&maps[i]) {
			return false, nil
		}
	}
	cm.finish()
	return true, nil
}

// loadVersioned loads a version's dataset without opening its virtual dataset through
// libhdf5: shape and mappings come from the file's bytes (h5meta), type, fill value,
// filters and chunks from raw_data, attributes later if asked for. nil means "use the
// general route" (anything h5meta does not read, odd mappings). Metadata h5meta finds
// corrupt is an error, not handed to libhdf5 (which can loop forever on some, see
// h5meta's heapObjects). Called with f.mu held.
//
// Variable-length strings are read here too, from raw_data through libhdf5 (renderMapped):
// libhdf5 cannot open the virtual datasets of files written with a newer library bound
// (1.12's hyperslab selections on a 1.10 build), while raw_data's encodings are old ones.
func (f *File) loadVersioned(path string) (*Dataset, error) {
	d, cm, err := f.scanVersioned(path)
	if err != nil || d == nil {
		return nil, err
	}
	if !d.Strings {
		cm.finish()
		return d, nil
	}
	// Read once scanVersioned has let go of the file's bytes: reading every string takes
	// long, and a commit's apply would wait for it.
	if err := d.renderMapped(cm.m); err != nil {
		return nil, err
	}
	return d, nil
}

// scanVersioned decodes the mappings of the version's dataset at path into a chunkMapper
// over raw_data (see loadVersioned); nil if the dataset takes the general route.
//
// A version of 100k chunks has a mapping list of about 12 MB: its checksum is computed on
// another core while the mappings are decoded straight into the chunk map, and nothing is
// served before both are done.
func (f *File) scanVersioned(path string) (*Dataset, *chunkMapper, error) {
	addr, err := f.h.ObjectAddr(path)
	if err != nil {
		return nil, nil, nil
	}
	f.store.RLockBytes() // the bytes read below are not being rewritten by a commit
	defer f.store.RUnlockBytes()
	m, err := f.bytesMeta(false)
	var list *h5meta.MappingList
	var shape []int64
	if err == nil {
		list, err = m.Mappings(addr)
	}
	if err == nil {
		shape, err = m.Shape(addr)
	}
	if err != nil && !errors.Is(err, h5meta.ErrUnsupported) {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil || list.Len() == 0 {
		return nil, nil, nil
	}
	verified := make(chan error, 1)
	go func() { verified <- list.Verify() }()
	var d *Dataset
	var cm *chunkMapper
	mapped := false // every mapping maps one chunk
	err = list.Scan(func(b *h5meta.Batch) bool {
		if cm == nil { // the first mapping names raw_data
			if d, cm = f.versionedDataset(path, shape, b.SrcDataset); cm == nil {
				return false
			}
		}
		mapped = cm.addBatch(b)
		return mapped
	})
	// Whatever else is wrong with it, a list whose checksum fails is corrupt: an error,
	// not the general route (which reports what Scan found, or reads the odd mappings).
	if err := <-verified; err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err != nil || !mapped {
		return nil, nil, nil
	}
	return d, cm, nil
}

// versionedDataset starts the Dataset of a version's dataset of the given shape whose
// chunks are in the raw_data at rawPath, with a chunkMapper for its mappings; nil if
// raw_data does not suit the chunk map route. For variable-length strings the chunk map
// only records which raw_data rows each chunk maps (renderMapped reads them): one byte
// per element stands in for the strings, and the size is the text's, set once rendered.
func (f *File) versionedDataset(path string, shape []int64, rawPath string) (*Dataset, *chunkMapper) {
	raw, err := f.rawData(rawPath)
	if err != nil {
		return nil, nil
	}
	info := raw.Info()
	if !info.Type.Raw && !info.Type.VlenString || len(info.Chunks) != len(shape) {
		return nil, nil
	}
	d := &Dataset{
		Path: path, Type: info.Type, Shape: shape, Chunks: info.Chunks, Fill: info.Fill,
		Filters: info.Filters, Layout: h5.Virtual, f: f, fillDefined: info.FillDefined,
		RawData: rawPath, raw: raw, Strings: info.Type.VlenString,
	}
	itemSize, fill := info.Type.Size, info.Fill
	if d.Strings {
		itemSize, fill = 1, []byte{0}
	}
	m, err := chunkmap.New(shape, info.Chunks, itemSize, fill)
	if err != nil {
		return nil, nil
	}
	if !d.Strings {
		d.size = int64(itemSize)
		for _, s := range shape {
			d.size *= s
		}
	}
	return d, d.newChunkMapper(m, info.Shape)
}

// checkSources refuses mappings that read rows of the dataset's raw_data beyond its extent.
// libhdf5 would answer them with the fill value, but no writer maps a slot it has not
// stored: the version is damaged, and reading it is an error rather than made-up data.
func (d *Dataset) checkSources(maps []h5.Mapping) error {
	extent := d.raw.Info().Shape
	for _, m := range maps {
		if m.SrcFile != "." || m.SrcDataset != d.RawData || len(m.SrcStart) != len(extent) {
			continue
		}
		if i, end, ok := beyond(m, extent); ok {
			return fmt.Errorf("%s: the mapping at %v reads %s[%d:%d] on axis %d, beyond its extent %v", d.Path, m.VStart, d.RawData, m.SrcStart[i], end, i, extent)
		}
	}
	return nil
}

// beyond reports the first axis on which m's source ends beyond extent, and where.
func beyond(m h5.Mapping, extent []int64) (axis int, end int64, ok bool) {
	for i, s := range m.SrcStart {
		if end := s + m.SrcCount[i]; end > extent[i] {
			return i, end, true
		}
	}
	return 0, 0, false
}

// chunkMapper points a chunk map's chunks at the raw_data slots of a version's mappings,
// one mapping at a time.
type chunkMapper struct {
	d                     *Dataset
	m                     *chunkmap.Map
	shape, chunks, extent []int64 // the dataset's, and raw_data's shape
	grid                  []int64 // the grid index of the mapping being added
}

// newChunkMapper maps mappings onto m out of raw_data of shape extent.
func (d *Dataset) newChunkMapper(m *chunkmap.Map, extent []int64) *chunkMapper {
	rank := len(d.Shape)
	return &chunkMapper{
		d: d, m: m, shape: d.Shape[:rank], chunks: d.Chunks[:rank], extent: extent[:rank],
		grid: make([]int64, rank),
	}
}

// add maps m (see block).
func (c *chunkMapper) add(m *h5.Mapping) bool {
	rank := len(c.grid)
	if len(m.VStart) != rank || len(m.SrcStart) != rank || m.SrcDataset != c.d.RawData || m.SrcFile != "." {
		return false
	}
	return c.block(m.SrcStart, m.SrcCount, m.VStart, m.VCount)
}

// addBatch maps a batch of mappings (see block), checking what they share once.
func (c *chunkMapper) addBatch(b *h5meta.Batch) bool {
	rank := len(c.grid)
	if b.SrcRank != rank || b.VRank != rank || b.SrcDataset != c.d.RawData || b.SrcFile != "." {
		return false
	}
	if rank == 1 {
		return c.batch1(b.Coords)
	}
	for co := b.Coords; len(co) >= 4*rank; co = co[4*rank:] {
		if !c.block(co[:rank], co[rank:2*rank], co[2*rank:3*rank], co[3*rank:4*rank]) {
			return false
		}
	}
	return true
}

// batch1 is addBatch for 1-D datasets: block's checks, written out for one axis.
func (c *chunkMapper) batch1(coords []int64) bool {
	ch, shape, extent, g := c.chunks[0], c.shape[0], c.extent[0], c.grid[0]
	for ; len(coords) >= 4; coords = coords[4:] {
		src, count, v, vcount := coords[0], coords[1], coords[2], coords[3]
		if g*ch != v {
			if g++; g*ch != v {
				g = v / ch
			}
		}
		if g*ch != v || count != vcount || vcount != min(ch, shape-v) || src+count > extent {
			return false
		}
		c.grid[0] = g
		if c.m.MapBase(c.grid, src) != nil {
			return false
		}
	}
	return true
}

// block maps the mapping of raw_data's block at src (count) to the dataset's at vstart
// (vcount); false if it is not one chunk-aligned block of exactly its chunk's trimmed
// extent, within raw_data's extent (spec section 8). A chunk mapped twice reads from the
// later mapping, as libhdf5 reads it.
func (c *chunkMapper) block(src, count, vstart, vcount []int64) bool {
	for i, ch := range c.chunks {
		// Lists are mostly in grid order: try the previous mapping's grid index on this
		// axis, and the next one, before dividing.
		v, g := vstart[i], c.grid[i]
		if g*ch != v && (g+1)*ch != v {
			g = v / ch
		} else if g*ch != v {
			g++
		}
		switch {
		case g*ch != v, count[i] != vcount[i], i > 0 && src[i] != 0:
			return false
		case vcount[i] != min(ch, c.shape[i]-v):
			return false // covers less (or more) than the chunk's trimmed extent
		case src[i]+count[i] > c.extent[i]:
			return false // beyond raw_data's extent: the general route reports it
		}
		c.grid[i] = g
	}
	return c.m.MapBase(c.grid, src[0]) == nil
}

// finish hands the chunk map to the dataset.
func (c *chunkMapper) finish() { c.d.arr = c.m }

// renderText renders the strings of h, the whole dataset read through libhdf5 at once.
func (d *Dataset) renderText(h *h5.Dataset) error {
	start := make([]int64, len(d.Shape))
	strs, err := h.ReadStrings(start, d.Shape)
	if err != nil {
		return err
	}
	return d.setText(strs)
}

// setText renders strs, the dataset's elements in C order, as its text (TextForm).
func (d *Dataset) setText(strs []string) error {
	n := 0
	for _, s := range strs {
		n += len(s) + 3
	}
	buf := bytes.NewBuffer(make([]byte, 0, n))
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	for _, s := range strs {
		// A string JSON writes as it is (most are) is written so, without the encoder's
		// reflection: a million of them cost a second.
		if plainJSON(s) {
			buf.WriteByte('"')
			buf.WriteString(s)
			buf.WriteString("\"\n")
		} else if err := enc.Encode(s); err != nil { // Encode adds the newline
			return err
		}
	}
	d.text = buf.Bytes()
	d.size = int64(len(d.text))
	return nil
}

// plainJSON reports whether encoding/json writes s as its own bytes between quotes: valid
// UTF-8 without control characters, quotes, backslashes, U+2028 or U+2029.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\':
			return false
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			return false
		}
	}
	return utf8.ValidString(s)
}

// Read is the mount's one read entry point: bytes [off, off+len(p)) of the dataset at
// path, answered as a chunkstore.Reply (maxRange as for Dataset.Read). A live dataset is
// refreshed and read as it is now, its bytes copied into p (LiveReadAt). A read-write
// file's bytes are copied into p too, under slotsMu: a rewrite that moves slots may
// follow the read at once (MoveSlots), and a reply holding a range or slices of the file
// would be written out after it.
func (f *File) Read(path string, p []byte, off int64, maxRange int) (chunkstore.Reply, error) {
	if f.isLivePath(path) {
		n, err := f.LiveReadAt(path, p, off)
		return chunkstore.Reply{N: n}, err
	}
	if f.Writable() {
		f.slotsMu.RLock()
		defer f.slotsMu.RUnlock()
		maxRange = 0
	}
	d, err := f.Dataset(path)
	if err != nil {
		return chunkstore.Reply{}, err
	}
	return d.Read(p, off, maxRange)
}

// ReadAt reads the dataset's bytes [off, off+len(p)), clipped to Size; it returns the
// number of bytes read and no io.EOF.
func (d *Dataset) ReadAt(p []byte, off int64) (int, error) {
	r, err := d.Read(p, off, 0)
	return r.N, err
}

// Read is the dataset's one read: bytes [off, off+len(p)), clipped to Size, answered as a
// chunkstore.Reply. With maxRange 0 the bytes are copied into p; with maxRange > 0 the
// chunk route may instead locate them in the file (one range of up to maxRange bytes, or
// slices of the file's mapping) or hand out slices of cached decoded chunks
// (chunkstore.Chunked.Read). Strings, scalars and datasets libhdf5 reads are copied.
func (d *Dataset) Read(p []byte, off int64, maxRange int) (chunkstore.Reply, error) {
	switch {
	case off >= d.size || off < 0:
		return chunkstore.Reply{}, nil
	case d.text != nil || d.Strings:
		return chunkstore.Reply{N: copy(p, d.text[off:])}, nil
	case d.scalar != nil:
		return chunkstore.Reply{N: copy(p, d.scalar[off:])}, nil
	case d.arr == nil:
		n, err := d.readVDS(p, off)
		return chunkstore.Reply{N: n}, err
	}
	return d.Chunked().Read(p, off, maxRange)
}

// Chunked is the dataset's stored chunks as the File's chunk store reads them: the chunk
// route of reads, for datasets with a chunk map, and the chunk source of write handles.
func (d *Dataset) Chunked() *chunkstore.Chunked {
	d.chunkedOnce.Do(func() {
		src := chunkstore.Source{Path: d.RawData, Raw: d.raw, Filters: d.Filters, ElemSize: d.Type.Size, Chunks: d.Chunks}
		d.chunked = d.f.store.Chunked(d.Path, src, d.arr, d.Shape, d.size)
	})
	return d.chunked
}

// readVDS reads through libhdf5, one hyperslab read per box of the byte range.
func (d *Dataset) readVDS(p []byte, off int64) (int, error) {
	plan, err := d.plan.GetItemPlan(off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	isz := int64(d.Type.Size)
	zero := make([]int64, len(d.Shape))
	var elem []byte
	for _, hs := range plan.Hyperslabs {
		if hs.ByteLo != 0 || hs.ByteHi != int(isz) {
			if elem == nil {
				elem = make([]byte, isz)
			}
			if err := d.vds.ReadBox(hs.Start, hs.Count, hs.Count, zero, elem); err != nil {
				return 0, err
			}
			copy(p[hs.DstOff+int64(hs.ByteLo):hs.DstOff+int64(hs.ByteHi)], elem[hs.ByteLo:hs.ByteHi])
			continue
		}
		n := isz
		for _, c := range hs.Count {
			n *= c
		}
		if err := d.vds.ReadBox(hs.Start, hs.Count, hs.Count, zero, p[hs.DstOff:hs.DstOff+n]); err != nil {
			return 0, err
		}
	}
	return int(plan.N), nil
}

func (d *Dataset) close() {
	if d.vds != nil {
		d.vds.Close()
	}
}

// mappings reads a virtual dataset's mappings through h5meta, falling back to libhdf5.
func (f *File) mappings(h *h5.Dataset) ([]h5.Mapping, error) {
	if !f.store.TryRLockBytes() { // a commit is writing: libhdf5 answers (see BeginWrite)
		return h.Mappings()
	}
	defer f.store.RUnlockBytes()
	if m, err := f.bytesMeta(false); err == nil {
		if addr, err := h.Addr(); err == nil {
			if maps, err := m.VirtualMappings(addr); err == nil {
				out := make([]h5.Mapping, len(maps))
				for i, x := range maps {
					out[i] = h5.Mapping(x)
				}
				return out, nil
			}
		}
	}
	return h.Mappings()
}

// rawData returns the open raw_data dataset at path, shared by all versions.
func (f *File) rawData(path string) (*h5.Dataset, error) {
	// Called with f.mu held (from loadDataset).
	if d, ok := f.raws[path]; ok {
		return d, nil
	}
	h, err := f.h.OpenDataset(path)
	if err != nil {
		return nil, err
	}
	if h.Info().Layout != h5.Chunked {
		h.Close()
		return nil, fmt.Errorf("%s is not chunked", path)
	}
	f.raws[path] = h
	return h, nil
}
