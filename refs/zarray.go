package refs

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/filters"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/versions"
)

// How a dataset's chunks reach the document.
const (
	routeChunks  = iota // references to the chunk map's stored chunks
	routeInline         // the whole dataset inlined as one chunk
	routeStrings        // variable-length strings inlined as one VLenUTF8 chunk
)

// array is what the document says about one dataset.
type array struct {
	route    int
	zarray   zarray
	codecs   []codec // the numcodecs pipeline in the order the writer applied it
	trimTail bool    // stored chunks end in a Fletcher-32 checksum left out of the range
}

// zarray is a Zarr v2 .zarray document (fields in the order zarr-python writes them).
type zarray struct {
	Chunks     []int64 `json:"chunks"`
	Compressor any     `json:"compressor"`
	DType      string  `json:"dtype"`
	FillValue  any     `json:"fill_value"`
	Filters    any     `json:"filters"`
	Order      string  `json:"order"`
	Shape      []int64 `json:"shape"`
	ZarrFormat int     `json:"zarr_format"`
}

// codec is one numcodecs codec standing for an HDF5 filter.
type codec struct {
	id    int // the HDF5 filter: filters.Deflate or filters.Shuffle
	level int // zlib level
	size  int // shuffle element size
}

func (c codec) config() map[string]any {
	if c.id == filters.Deflate {
		return map[string]any{"id": "zlib", "level": c.level}
	}
	return map[string]any{"id": "shuffle", "elementsize": c.size}
}

// errNoCodec marks filters without a numcodecs codec in Debian's numcodecs.
var errNoCodec = errors.New("no numcodecs codec")

// describe decides how the dataset is described: its .zarray and the route of its chunks.
// inline describes a dataset with a chunk map as one inlined chunk all the same.
func describe(d *versions.Dataset, inline bool) (*array, error) {
	shape := append([]int64{}, d.Shape...)
	whole := make([]int64, len(shape)) // one chunk of the whole shape
	for i, s := range shape {
		whole[i] = max(s, 1)
	}
	a := &array{zarray: zarray{Shape: shape, Order: "C", ZarrFormat: 2, DType: d.Type.DType}}
	switch {
	case d.Strings:
		a.route = routeStrings
		a.zarray.DType = "|O"
		a.zarray.Chunks = whole
		a.zarray.Filters = []any{map[string]any{"id": "vlen-utf8"}}
		return a, nil
	case d.HasChunkMap() && !inline:
		a.route = routeChunks
		a.zarray.Chunks = append([]int64{}, d.Chunks...)
		var err error
		if a.codecs, a.trimTail, err = pipeline(d.Filters, d.Type.Size); err != nil {
			return nil, err
		}
	default:
		a.route = routeInline // read through the mount's reader, stored raw
		a.zarray.Chunks = whole
	}
	fill, err := fillValue(d.Type.DType, d.Fill)
	if err != nil {
		return nil, err
	}
	a.zarray.FillValue = fill
	var fl []any
	for i, c := range a.codecs {
		if i == len(a.codecs)-1 && c.id == filters.Deflate {
			a.zarray.Compressor = c.config()
			break
		}
		fl = append(fl, c.config())
	}
	if fl != nil {
		a.zarray.Filters = fl
	}
	return a, nil
}

// pipeline maps HDF5's filter pipeline (in the order the writer applied it) to numcodecs
// codecs. A Fletcher-32 checksum is supported as the last filter only: the stored chunk is
// then the rest's output followed by 4 bytes of checksum, which the references leave out.
func pipeline(fs []h5.Filter, itemSize int) (codecs []codec, trimTail bool, err error) {
	var missing []string
	for i, f := range fs {
		switch f.ID {
		case filters.Deflate:
			level := 6
			if len(f.Params) > 0 {
				level = int(f.Params[0])
			}
			codecs = append(codecs, codec{id: filters.Deflate, level: level})
		case filters.Shuffle:
			codecs = append(codecs, codec{id: filters.Shuffle, size: itemSize})
		case filters.Fletcher32:
			if i == len(fs)-1 {
				trimTail = true
				continue
			}
			missing = append(missing, "Fletcher-32 before another filter")
		case filters.LZF:
			missing = append(missing, "LZF (filter 32000)")
		default:
			missing = append(missing, filterName(f))
		}
	}
	if missing != nil {
		return nil, false, fmt.Errorf("%w for %s", errNoCodec, strings.Join(missing, ", "))
	}
	return codecs, trimTail, nil
}

func filterName(f h5.Filter) string {
	name := map[int]string{4: "SZIP", 5: "N-bit", 6: "scale-offset"}[f.ID]
	if name == "" {
		name = f.Name
	}
	return fmt.Sprintf("%s (filter %d)", name, f.ID)
}

// fillValue is the fill element as Zarr v2 writes fill_value: numbers, NaN and infinities
// as "NaN", "Infinity", "-Infinity", complex as [re, im], bytes (|S, |V) base64-encoded.
func fillValue(dtype string, b []byte) (any, error) {
	if len(dtype) < 3 {
		return nil, fmt.Errorf("dtype %q has no Zarr fill value", dtype)
	}
	size, err := strconv.Atoi(dtype[2:])
	if err != nil {
		return nil, fmt.Errorf("dtype %q: %w", dtype, err)
	}
	if len(b) == 0 {
		b = make([]byte, size) // no fill value set: HDF5 reads zeros
	}
	if len(b) != size {
		return nil, fmt.Errorf("fill value of %d bytes for dtype %s", len(b), dtype)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if dtype[0] == '>' {
		order = binary.BigEndian
	}
	switch kind := dtype[1]; {
	case kind == 'b' && size == 1:
		return b[0] != 0, nil
	case kind == 'u' && size <= 8:
		return h5json.Uint(order, b, size), nil
	case kind == 'i' && size <= 8:
		shift := 64 - 8*size
		return int64(h5json.Uint(order, b, size)<<shift) >> shift, nil
	case kind == 'f' && (size == 2 || size == 4 || size == 8):
		return h5json.Float(floatBits(b, order)), nil
	case kind == 'c' && (size == 8 || size == 16):
		h := size / 2
		return []any{h5json.Float(floatBits(b[:h], order)), h5json.Float(floatBits(b[h:], order))}, nil
	case kind == 'S' || kind == 'V':
		return base64.StdEncoding.EncodeToString(b), nil
	}
	return nil, fmt.Errorf("dtype %q has no Zarr fill value", dtype)
}

// floatBits decodes an IEEE float of 2, 4 or 8 bytes.
func floatBits(b []byte, order binary.ByteOrder) float64 {
	switch len(b) {
	case 2:
		return halfFloat(order.Uint16(b))
	case 4:
		return float64(math.Float32frombits(order.Uint32(b)))
	}
	return math.Float64frombits(order.Uint64(b))
}

func halfFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// reencode reads the stored chunk at ci, undoes the filters its mask did not skip and
// encodes it again with the dataset's codecs, as an inline reference.
func (g *gen) reencode(d *versions.Dataset, a *array, ci h5.ChunkInfo) ([]byte, error) {
	stored := make([]byte, ci.Size)
	if _, err := g.raw.ReadAt(stored, ci.Offset); err != nil {
		return nil, fmt.Errorf("reading %d bytes at %d: %w", ci.Size, ci.Offset, err)
	}
	size := d.Type.Size
	for _, c := range d.Chunks {
		size *= int(c)
	}
	pl := make([]filters.Filter, len(d.Filters))
	for i, f := range d.Filters {
		pl[i] = filters.Filter{ID: f.ID, Params: f.Params}
	}
	data, err := filters.Decode(stored, pl, ci.FilterMask, d.Type.Size, size, nil)
	if err != nil {
		return nil, err
	}
	enc, err := encodeChunk(data, a.codecs, d.Type.Size)
	if err != nil {
		return nil, err
	}
	return base64Ref(enc), nil
}

// encodeChunk applies codecs, in order, as numcodecs encodes them.
func encodeChunk(data []byte, codecs []codec, itemSize int) ([]byte, error) {
	for _, c := range codecs {
		switch c.id {
		case filters.Shuffle:
			data = shuffle(data, c.size)
		case filters.Deflate:
			var buf bytes.Buffer
			zw, err := zlib.NewWriterLevel(&buf, c.level)
			if err != nil {
				return nil, err
			}
			if _, err := zw.Write(data); err != nil {
				return nil, err
			}
			if err := zw.Close(); err != nil {
				return nil, err
			}
			data = buf.Bytes()
		}
	}
	return data, nil
}

// shuffle groups byte k of every element together (HDF5's and numcodecs' shuffle); bytes
// past the last whole element stay in place.
func shuffle(in []byte, size int) []byte {
	if size <= 1 {
		return in
	}
	n := len(in) / size
	out := make([]byte, len(in))
	for k := 0; k < size; k++ {
		dst := out[k*n : (k+1)*n]
		for i := range dst {
			dst[i] = in[i*size+k]
		}
	}
	copy(out[n*size:], in[n*size:])
	return out
}

func base64Ref(data []byte) []byte {
	out := make([]byte, len("base64:")+base64.StdEncoding.EncodedLen(len(data)))
	copy(out, "base64:")
	base64.StdEncoding.Encode(out[len("base64:"):], data)
	return out
}

// inlineStrings is a variable-length string dataset as one chunk in numcodecs' VLenUTF8
// encoding: the item count, then each item's length and UTF-8 bytes (little-endian
// 32-bit integers).
func inlineStrings(d *versions.Dataset) ([]chunkRef, error) {
	if d.Size() > InlineLimit {
		return nil, fmt.Errorf("variable-length strings of %d bytes as text, more than the %d inlined", d.Size(), InlineLimit)
	}
	text := make([]byte, d.Size())
	if n, err := d.ReadAt(text, 0); err != nil {
		return nil, err
	} else if int64(n) != d.Size() {
		return nil, fmt.Errorf("read %d of %d bytes", n, d.Size())
	}
	n := int64(1)
	for _, s := range d.Shape {
		n *= s
	}
	if n == 0 {
		return nil, nil
	}
	enc := binary.LittleEndian.AppendUint32(nil, uint32(n))
	lines := bytes.Split(bytes.TrimSuffix(text, []byte("\n")), []byte("\n"))
	if int64(len(lines)) != n {
		return nil, fmt.Errorf("%d strings for %d elements", len(lines), n)
	}
	for _, l := range lines {
		var s string
		if err := json.Unmarshal(l, &s); err != nil {
			return nil, fmt.Errorf("string: %w", err)
		}
		enc = binary.LittleEndian.AppendUint32(enc, uint32(len(s)))
		enc = append(enc, s...)
	}
	return []chunkRef{{grid: make([]int64, len(d.Shape)), inline: base64Ref(enc)}}, nil
}
