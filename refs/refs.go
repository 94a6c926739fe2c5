// Package refs describes a version of a versioned-hdf5 file (or the tree of a plain HDF5
// file) as fsspec reference JSON, spec version 1, of a Zarr v2 group: every group gets a
// .zgroup (and a .zattrs of its HDF5 attributes), every dataset a .zarray, a .zattrs and
// one key per stored chunk, "PATH/i.j" -> [URL, offset, size] of the chunk's bytes in the
// .h5 file. Any Zarr reader (zarr-python, Dask, xarray) on any machine then reads the
// version's chunks straight from the file, or from a copy of it on object storage, without
// FUSE or libhdf5.
//
// The chunk keys come from the chunk map the mount serves (versions.Dataset.StoredChunks):
// a chunk of a version is the raw_data chunk its virtual-dataset mapping points at, so
// Zarr's chunk grid is raw_data's and its chunks are stored exactly as HDF5 filtered them.
// Unmapped chunks have no key and read as the fill value.
//
// fill_value is always the dataset's HDF5 fill value. xarray's Zarr backend copies it into
// _FillValue and masks equal elements as missing unless opened with mask_and_scale=False (as
// the README's recipe is): a _FillValue in .zattrs does not stop that (xarray overwrites
// it), and a null fill_value would, but zarr then leaves unmapped chunks uninitialized.
//
// What Zarr cannot describe per chunk is handled per dataset:
//   - filters: deflate becomes numcodecs' zlib, shuffle its shuffle; a Fletcher-32
//     checksum as the pipeline's last filter (where h5py puts it) is left out of the
//     reference's byte range (readers do not verify it); LZF, SZIP, N-bit, scale-offset and
//     Fletcher-32 anywhere else have no codec in Debian's numcodecs, so such datasets are
//     left out (one warning each);
//   - a chunk whose filter mask skipped a filter is decoded and re-encoded with the
//     dataset's codecs, and inlined ("base64:..."), as is the whole of a dataset without
//     a chunk map (contiguous or compact storage, mappings that are not one chunk per
//     block, slots that are not chunk-aligned), as the mount reads it, up to InlineLimit
//     bytes;
//   - variable-length strings are inlined as one chunk in numcodecs' VLenUTF8 encoding
//     (dtype "|O", filter vlen-utf8), up to InlineLimit bytes of text;
//   - a 0-d (scalar) dataset is a 0-d array whose one chunk ("0") is inlined;
//   - types without a byte form are left out.
//
// A dataset left out is reported through Options.Warn and never makes the rest fail.
//
// The document is written as it is made: a versioned dataset's chunk keys are checked on a
// first walk of its chunk map and written on a second, 65536 chunks located at a time, so
// that a dataset of ten million chunks costs its chunk map (12 bytes a chunk), not a list
// of its keys.
package refs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/versions"
)

// InlineLimit caps the bytes of one dataset inlined into the document (whole datasets
// without a chunk map, variable-length strings), before base64.
const InlineLimit = 16 << 20

// Options selects what Write describes and how.
type Options struct {
	// Version is the version to describe; "" is the current one. Ignored with All and for
	// plain files.
	Version string
	// All describes every committed version, under versions/<name>/.
	All bool
	// URL is written as every chunk's location; "" is the file's absolute path.
	URL string
	// Warn receives one line per dataset left out (path: reason); nil discards them.
	Warn func(msg string)
}

// Stats counts what a document holds.
type Stats struct {
	Versions int // versions described (0 for plain files)
	Groups   int
	Datasets int // datasets described
	Chunks   int // chunk keys, by reference or inlined
	Inlined  int // of Chunks, the inlined ones
	LeftOut  int // datasets left out (each reported through Warn)
}

// Write writes the references of f as Options select to w.
func Write(w io.Writer, f *versions.File, opt Options) (Stats, error) {
	url := opt.URL
	if url == "" {
		abs, err := filepath.Abs(f.Path())
		if err != nil {
			return Stats{}, err
		}
		url = abs
	}
	raw, err := os.Open(f.Path())
	if err != nil {
		return Stats{}, err
	}
	defer raw.Close()
	bw := bufio.NewWriterSize(w, 1<<20)
	g := &gen{f: f, raw: raw, w: bw, url: jsonString(url), warn: opt.Warn}
	if _, err := bw.WriteString(`{"version":1,"refs":{`); err != nil {
		return Stats{}, err
	}
	if err := g.document(opt); err != nil {
		return g.stats, err
	}
	if _, err := bw.WriteString("}}\n"); err != nil {
		return g.stats, err
	}
	return g.stats, bw.Flush()
}

// gen writes one document.
type gen struct {
	f     *versions.File
	raw   *os.File // the file's bytes, for chunks that are re-encoded
	w     *bufio.Writer
	url   []byte // JSON string
	warn  func(string)
	stats Stats
	n     int    // keys written
	buf   []byte // scratch for one key
}

func (g *gen) document(opt Options) error {
	if !g.f.Versioned() {
		return g.group("/", "")
	}
	if !opt.All {
		name, err := g.version(opt.Version)
		if err != nil {
			return err
		}
		return g.versionTree(name, "", false)
	}
	vs, err := g.f.Versions()
	if err != nil {
		return err
	}
	cur, err := g.f.CurrentVersion()
	if err != nil {
		return err
	}
	if err := g.text(".zgroup", zgroup); err != nil {
		return err
	}
	attrs := map[string]any{"versions": names(vs)}
	if cur != "" {
		attrs["current_version"] = cur
	}
	if err := g.jsonKey(".zattrs", attrs); err != nil {
		return err
	}
	if err := g.text("versions/.zgroup", zgroup); err != nil {
		return err
	}
	g.stats.Groups += 2
	for _, v := range vs {
		if !zarrName(v.Name) {
			g.warnf("%s: left out: the name %q cannot be a Zarr key (\".\", \"..\", a backslash or invalid UTF-8)", displayPath(v.Name), v.Name)
			continue
		}
		if err := g.versionTree(v.Name, "versions/"+v.Name+"/", true); err != nil {
			return err
		}
	}
	return nil
}

func names(vs []versions.Version) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// version resolves name ("" = current) to a committed version.
func (g *gen) version(name string) (string, error) {
	if name == "" {
		cur, err := g.f.CurrentVersion()
		if err != nil {
			return "", err
		}
		if cur == "" {
			return "", errors.New("no committed version")
		}
		return cur, nil
	}
	_, ok, err := g.f.Version(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("no version %q", name)
	}
	return name, nil
}

// versionTree writes the tree of version name with keys under prefix. With All, a version
// whose metadata cannot be read is left out (with a warning) instead of failing the rest.
func (g *gen) versionTree(name, prefix string, all bool) error {
	v, ok, err := g.f.Version(name)
	if err == nil && !ok {
		err = versions.ErrNotFound
	}
	if err != nil {
		if !all {
			return err
		}
		g.warnf("%s: left out: %s", displayPath(name), strings.TrimPrefix(err.Error(), versions.VersionsGroup+"/"+name+": "))
		return nil
	}
	g.stats.Versions++
	return g.group(v.Path(), prefix)
}

const zgroup = `{"zarr_format":2}`

// group writes the group at the HDF5 path dir (its .zgroup, .zattrs and members) with
// keys under prefix. Attributes or members that cannot be read are left out with a
// warning; only errors writing the document are returned.
func (g *gen) group(dir, prefix string) error {
	if err := g.text(prefix+".zgroup", zgroup); err != nil {
		return err
	}
	g.stats.Groups++
	if attrs, err := g.attrs(dir); err != nil {
		g.warnf("%s: attributes left out: %s", displayPath(dir), strings.TrimPrefix(err.Error(), dir+": "))
	} else if len(attrs) > 0 {
		if err := g.jsonKey(prefix+".zattrs", attrs); err != nil {
			return err
		}
	}
	entries, err := g.f.List(dir)
	if err != nil {
		g.warnf("%s: members left out: %s", displayPath(dir), strings.TrimPrefix(err.Error(), dir+": "))
		return nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	for _, e := range entries {
		p := strings.TrimSuffix(dir, "/") + "/" + e.Name
		if !zarrName(e.Name) {
			g.warnf("%s: left out: the name %q cannot be a Zarr key (\".\", \"..\", a backslash or invalid UTF-8)", displayPath(p), e.Name)
			if !e.IsGroup {
				g.stats.LeftOut++
			}
			continue
		}
		if e.IsGroup {
			if err := g.group(p, prefix+e.Name+"/"); err != nil {
				return err
			}
			continue
		}
		if err := g.dataset(p, prefix+e.Name+"/", e.Name); err != nil {
			return err
		}
	}
	return nil
}

// zarrName reports whether an HDF5 link name can be a segment of a Zarr key: zarr refuses
// "." and "..", reads a backslash as "/", and JSON carries only UTF-8.
func zarrName(name string) bool {
	return name != "." && name != ".." && !strings.Contains(name, `\`) && utf8.ValidString(name)
}

// attrs is the HDF5 attributes of the object at path as JSON values by name.
func (g *gen) attrs(path string) (map[string]any, error) {
	list, err := g.f.Attrs(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(list))
	for _, a := range list {
		out[a.Name] = h5json.Attr(a)
	}
	return out, nil
}

// leaveOut reports a dataset the document does not describe.
func (g *gen) leaveOut(path string, reason error) {
	g.stats.LeftOut++
	why := strings.TrimPrefix(reason.Error(), path+": ") // said once, as users know it
	g.warnf("%s: left out: %s", displayPath(path), why)
}

func (g *gen) warnf(format string, args ...any) {
	if g.warn != nil {
		g.warn(fmt.Sprintf(format, args...))
	}
}

// displayPath names a group or dataset of a version as users know it, VERSION/PATH, quoted
// if it holds control characters (a warning stays one line).
func displayPath(path string) string {
	if rest, ok := strings.CutPrefix(path, versions.VersionsGroup+"/"); ok {
		path = rest
	}
	if strings.ContainsFunc(path, unicode.IsControl) {
		return strconv.Quote(path)
	}
	return path
}

// dataset writes the dataset at the HDF5 path p with keys under prefix (which ends in
// "/"), or leaves it out with a warning. Everything that can fail is decided before the
// first key of the dataset is written: a dataset is described whole or not at all.
func (g *gen) dataset(p, prefix, name string) error {
	a, chunks, err := g.prepare(p)
	if err != nil {
		g.leaveOut(p, err)
		return nil
	}
	attrs, err := g.attrs(p)
	if err != nil {
		g.leaveOut(p, fmt.Errorf("attributes: %w", err))
		return nil
	}
	if _, ok := attrs["_ARRAY_DIMENSIONS"]; !ok {
		dims := make([]string, len(a.zarray.Shape))
		for i := range dims {
			dims[i] = name + "_dim_" + strconv.Itoa(i)
		}
		attrs["_ARRAY_DIMENSIONS"] = dims // xarray needs names; unique within the group
	}
	if err := g.jsonKey(prefix+".zarray", a.zarray); err != nil {
		return err
	}
	if err := g.jsonKey(prefix+".zattrs", attrs); err != nil {
		return err
	}
	g.stats.Datasets++
	pre := jsonString(prefix)
	pre = pre[:len(pre)-1] // open: the chunk index follows
	return chunks(func(c chunkRef) error { return g.chunk(pre, c) })
}

// chunkWalk calls yield with every chunk key of a dataset, in grid order.
type chunkWalk func(yield func(chunkRef) error) error

// listed is the walk of a list of chunk keys.
func listed(refs []chunkRef) chunkWalk {
	return func(yield func(chunkRef) error) error {
		for _, c := range refs {
			if err := yield(c); err != nil {
				return err
			}
		}
		return nil
	}
}

// prepare describes the dataset at p and checks its chunk keys, which the walk returned
// then writes.
func (g *gen) prepare(p string) (*array, chunkWalk, error) {
	d, err := g.f.Dataset(p)
	if err != nil {
		return nil, nil, err
	}
	a, err := describe(d, false)
	if err != nil {
		return nil, nil, err
	}
	var refs []chunkRef
	switch a.route {
	case routeChunks:
		walk, ok, err := g.streamChunks(d, a)
		if ok && err == nil {
			return a, walk, nil
		}
		if !ok {
			refs, err = g.storedChunks(d, a)
		}
		if err != nil {
			// The chunk map cannot be listed (e.g. slots that are not chunk-aligned): what
			// the mount reads can still be inlined.
			if ia, ierr := describe(d, true); ierr == nil {
				if ic, ierr := g.inlineWhole(d, ia); ierr == nil {
					return ia, listed(ic), nil
				}
			}
			return a, nil, err
		}
	case routeInline:
		refs, err = g.inlineWhole(d, a)
	case routeStrings:
		refs, err = inlineStrings(d)
	}
	return a, listed(refs), err
}

// chunkRef is one chunk key: a byte range of the file, or inline data.
type chunkRef struct {
	grid      []int64
	off, size int64
	inline    []byte // already "base64:..." encoded when set
}

// chunk writes `"PREFIXi.j":["URL",off,size]` (or the inline string); pre is the JSON
// string of the prefix without its closing quote.
func (g *gen) chunk(pre []byte, c chunkRef) error {
	b := g.sep(g.buf[:0])
	b = append(b, pre...)
	if len(c.grid) == 0 {
		b = append(b, '0') // a 0-d array's one chunk
	}
	for i, x := range c.grid {
		if i > 0 {
			b = append(b, '.')
		}
		b = strconv.AppendInt(b, x, 10)
	}
	b = append(b, `":`...)
	if c.inline != nil {
		b = append(b, '"')
		b = append(b, c.inline...) // base64: nothing to escape
		b = append(b, '"')
		g.stats.Inlined++
	} else {
		b = append(b, '[')
		b = append(b, g.url...)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.off, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, c.size, 10)
		b = append(b, ']')
	}
	g.buf = b
	g.stats.Chunks++
	_, err := g.w.Write(b)
	return err
}

// sep starts a key: a comma before every key but the first.
func (g *gen) sep(b []byte) []byte {
	if g.n > 0 {
		b = append(b, ',')
	}
	g.n++
	return b
}

// text writes key -> the JSON document doc, as a string value.
func (g *gen) text(key, doc string) error {
	b := g.sep(g.buf[:0])
	b = append(b, jsonString(key)...)
	b = append(b, ':')
	b = append(b, jsonString(doc)...)
	g.buf = b
	_, err := g.w.Write(b)
	return err
}

// jsonKey writes key -> v encoded as JSON, as a string value. The document is ASCII, non-ASCII
// characters escaped, as zarr-python writes metadata (2.13 decodes it as ASCII).
func (g *gen) jsonKey(key string, v any) error {
	doc, err := marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return g.text(key, string(asciiJSON(doc)))
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX (UTF-16, as JSON
// has it); outside strings JSON has none.
func asciiJSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf {
		i++
	}
	if i == len(b) {
		return b
	}
	out := append(make([]byte, 0, len(b)+16), b[:i]...)
	for _, r := range string(b[i:]) {
		if r < utf8.RuneSelf {
			out = append(out, byte(r))
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			out = fmt.Appendf(out, `\u%04x`, u)
		}
	}
	return out
}

// marshal is json.Marshal without HTML escaping ("<f8" stays readable).
func marshal(v any) ([]byte, error) {
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(sb.String(), "\n")), nil
}

func jsonString(s string) []byte {
	b, _ := marshal(s)
	return b
}

// storedChunks are the chunk map's chunks: references to the stored bytes, or inline
// re-encodings of chunks whose filter mask skipped a filter of the pipeline.
func (g *gen) storedChunks(d *versions.Dataset, a *array) ([]chunkRef, error) {
	stored, err := d.StoredChunks()
	if err != nil {
		return nil, err
	}
	out := make([]chunkRef, len(stored))
	for i, c := range stored {
		if out[i], err = g.storedRef(d, a, c.Grid, c.ChunkInfo, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// storedRef is the key of the stored chunk at grid: its bytes, or, when its filter mask
// skipped a filter, inline (the re-encoding reencoded made, or one made now).
func (g *gen) storedRef(d *versions.Dataset, a *array, grid []int64, c h5.ChunkInfo, reencoded []byte) (chunkRef, error) {
	ref := chunkRef{grid: grid, off: c.Offset, size: c.Size}
	mask := c.FilterMask
	if a.trimTail {
		last := uint32(1) << (len(d.Filters) - 1)
		switch {
		case mask&last != 0:
			mask &^= last // no checksum stored: nothing to trim
		case c.Size < 4:
			return ref, fmt.Errorf("chunk %v: %d bytes stored, too short for its Fletcher-32 checksum", grid, c.Size)
		default:
			ref.size -= 4
		}
	}
	if mask == 0 {
		return ref, nil
	}
	if reencoded != nil {
		ref.inline = reencoded
		return ref, nil
	}
	data, err := g.reencode(d, a, c)
	if err != nil {
		return ref, fmt.Errorf("chunk %v (filter mask %#x): %w", grid, c.FilterMask, err)
	}
	ref.inline = data
	return ref, nil
}

// streamBatch is how many stored chunks streamChunks locates at a time.
const streamBatch = 1 << 16

// streamChunks is storedChunks for a versioned dataset's chunk map (ok false for other
// datasets), without a list of its chunks (about 200 bytes a chunk: two gigabytes for ten
// million): the map is walked once to check every key, as storedChunks would, keeping only
// the re-encodings of chunks whose filter mask skipped a filter, and again by the walk
// returned, which writes them.
func (g *gen) streamChunks(d *versions.Dataset, a *array) (walk chunkWalk, ok bool, err error) {
	probe := errors.New("probe")
	if ok, _ := d.EachBlock(func([]int64, int64) error { return probe }); !ok {
		return nil, false, nil
	}
	inline := map[int64][]byte{} // by the chunk's place among the stored ones
	// each calls fn with every stored chunk's key, given the re-encodings known.
	each := func(known map[int64][]byte, fn func(k int64, ref chunkRef) error) error {
		rank := len(d.Shape)
		grids := make([]int64, 0, streamBatch*rank)
		rows := make([]int64, 0, streamBatch)
		var k int64
		flush := func() error {
			for _, row := range rows {
				if row%d.Chunks[0] != 0 {
					return fmt.Errorf("%s: slot at row %d is not chunk-aligned", d.Path, row)
				}
			}
			infos, err := d.Chunked().Slots(rows)
			if err != nil {
				return err
			}
			for i, c := range infos {
				if c.Offset < 0 {
					continue // not allocated: reads as fill
				}
				ref, err := g.storedRef(d, a, grids[i*rank:(i+1)*rank:(i+1)*rank], c, known[k])
				if err != nil {
					return err
				}
				if err := fn(k, ref); err != nil {
					return err
				}
				k++
			}
			grids, rows = grids[:0], rows[:0]
			return nil
		}
		_, err := d.EachBlock(func(grid []int64, row int64) error {
			grids, rows = append(grids, grid...), append(rows, row)
			if len(rows) == streamBatch {
				return flush()
			}
			return nil
		})
		if err == nil && len(rows) > 0 {
			err = flush()
		}
		return err
	}
	err = each(nil, func(k int64, ref chunkRef) error {
		if ref.inline != nil {
			inline[k] = ref.inline
		}
		return nil
	})
	if err != nil {
		return nil, true, err
	}
	return func(yield func(chunkRef) error) error {
		return each(inline, func(_ int64, ref chunkRef) error { return yield(ref) })
	}, true, nil
}

// inlineWhole is a dataset without a chunk map as one inlined chunk of its whole shape.
func (g *gen) inlineWhole(d *versions.Dataset, a *array) ([]chunkRef, error) {
	if d.Size() > InlineLimit {
		return nil, fmt.Errorf("%s has no chunk map and is %d bytes, more than the %d inlined", layoutName(d), d.Size(), InlineLimit)
	}
	if d.Size() == 0 {
		return nil, nil
	}
	buf := make([]byte, d.Size())
	n, err := d.ReadAt(buf, 0)
	if err != nil {
		return nil, err
	}
	if int64(n) != d.Size() {
		return nil, fmt.Errorf("read %d of %d bytes", n, d.Size())
	}
	data, err := encodeChunk(buf, a.codecs, d.Type.Size)
	if err != nil {
		return nil, err
	}
	return []chunkRef{{grid: make([]int64, len(d.Shape)), inline: base64Ref(data)}}, nil
}

func layoutName(d *versions.Dataset) string {
	switch {
	case d.Layout == h5.Contiguous:
		return "contiguous storage"
	case d.Layout == h5.Compact:
		return "compact storage"
	case d.Layout == h5.Virtual:
		return "a virtual dataset whose mappings are not one chunk per block"
	}
	return "storage"
}
