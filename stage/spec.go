package stage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"syscall"

	"github.com/vh5fs/vh5fs/h5"
)

// Spec is a new dataset's description, the JSON of user.vh5fs.create; fields left out
// take versioned-hdf5's create_dataset defaults.
type Spec struct {
	DType           string          `json:"dtype"`
	Shape           []int64         `json:"shape"`
	Chunks          []int64         `json:"chunks"`
	FillValue       json.RawMessage `json:"fillvalue,omitempty"`
	Compression     *string         `json:"compression"`
	CompressionOpts *int            `json:"compression_opts,omitempty"`
	Shuffle         bool            `json:"shuffle"`
}

// Defaults: h5py's default dtype, versioned-hdf5's default chunk length of 1-D datasets,
// h5py's default gzip level.
const (
	defaultDType   = "<f4"
	defaultChunk   = 4096
	defaultGzip    = 4
	plainFileDType = "|u1" // a file written without user.vh5fs.create
)

// plainSpec is what a file created in a stage is until user.vh5fs.create says otherwise:
// a 1-D dataset of bytes, so that cp of any file works.
func plainSpec() Spec {
	return Spec{DType: plainFileDType, Shape: []int64{0}, Chunks: []int64{defaultChunk}}
}

// ParseSpec reads and completes a user.vh5fs.create value. Errors wrap EINVAL and say
// what is wrong.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, invalid("user.vh5fs.create: %v", err)
	}
	if dec.More() {
		return Spec{}, invalid("user.vh5fs.create: trailing data after the JSON object")
	}
	if s.DType == "" {
		s.DType = defaultDType
	}
	if s.Shape == nil {
		s.Shape = []int64{0}
	}
	if s.Chunks == nil {
		if len(s.Shape) != 1 {
			return Spec{}, invalid("user.vh5fs.create: a %d-D dataset needs \"chunks\"", len(s.Shape))
		}
		s.Chunks = []int64{defaultChunk}
	}
	if s.Compression != nil && *s.Compression == "gzip" && s.CompressionOpts == nil {
		lvl := defaultGzip
		s.CompressionOpts = &lvl
	}
	if _, err := s.DataSpec(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// DataSpec is the raw_data the dataset needs, checked.
func (s Spec) DataSpec() (h5.DataSpec, error) {
	if len(s.Shape) == 0 {
		return h5.DataSpec{}, invalid("shape: scalar datasets are not versioned (give at least one axis)")
	}
	if len(s.Chunks) != len(s.Shape) {
		return h5.DataSpec{}, invalid("chunks %v do not match shape %v", s.Chunks, s.Shape)
	}
	for i := range s.Shape {
		if s.Shape[i] < 0 {
			return h5.DataSpec{}, invalid("shape %v: negative length", s.Shape)
		}
		if s.Chunks[i] <= 0 {
			return h5.DataSpec{}, invalid("chunks %v: lengths must be positive", s.Chunks)
		}
	}
	size, err := h5.ItemSize(s.DType)
	if err != nil {
		return h5.DataSpec{}, invalid("dtype %q: %v", s.DType, err)
	}
	fill, err := fillBytes(s.DType, size, s.FillValue)
	if err != nil {
		return h5.DataSpec{}, err
	}
	d := h5.DataSpec{DType: s.DType, Chunks: s.Chunks, Fill: fill, Gzip: -1, Shuffle: s.Shuffle}
	comp := ""
	if s.Compression != nil {
		comp = *s.Compression
	}
	switch comp {
	case "":
		if s.CompressionOpts != nil {
			return h5.DataSpec{}, invalid("compression_opts without compression")
		}
	case "gzip":
		if o := *s.CompressionOpts; o < 0 || o > 9 {
			return h5.DataSpec{}, invalid("compression_opts %d: gzip levels are 0-9", o)
		}
		d.Gzip = *s.CompressionOpts
	case "lzf":
		if s.CompressionOpts != nil {
			return h5.DataSpec{}, invalid("lzf takes no compression_opts")
		}
		d.LZF = true
	default:
		return h5.DataSpec{}, invalid("compression %q: use null, \"gzip\" or \"lzf\"", comp)
	}
	return d, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), syscall.EINVAL)
}

// fillBytes encodes a JSON fill value as one element of dtype (size bytes); none is zero.
func fillBytes(dtype string, size int, v json.RawMessage) ([]byte, error) {
	out := make([]byte, size)
	if len(v) == 0 || string(v) == "null" {
		return out, nil
	}
	var order binary.ByteOrder = binary.LittleEndian
	if dtype[0] == '>' {
		order = binary.BigEndian
	}
	bad := func(err error) error { return invalid("fillvalue %s for dtype %s: %v", v, dtype, err) }
	kind := dtype[1]
	switch kind {
	case 'b':
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			var n float64
			if json.Unmarshal(v, &n) != nil || (n != 0 && n != 1) {
				return nil, bad(fmt.Errorf("not a bool"))
			}
			b = n == 1
		}
		if b {
			out[0] = 1
		}
	case 'i', 'u':
		n, err := strconv.ParseInt(string(v), 10, 64)
		if kind == 'u' {
			var u uint64
			u, err = strconv.ParseUint(string(v), 10, 64)
			n = int64(u)
			if err == nil && size < 8 && u >= 1<<(8*size) {
				err = fmt.Errorf("out of range")
			}
		} else if err == nil && size < 8 && (n < -(1<<(8*size-1)) || n >= 1<<(8*size-1)) {
			err = fmt.Errorf("out of range")
		}
		if err != nil {
			return nil, bad(err)
		}
		putUint(order, out, uint64(n))
	case 'f':
		f, err := jsonFloat(v)
		if err != nil {
			return nil, bad(err)
		}
		if err := putFloat(order, out, f); err != nil {
			return nil, bad(err)
		}
	case 'c':
		var parts [2]json.RawMessage
		if json.Unmarshal(v, &parts) != nil {
			parts = [2]json.RawMessage{v, json.RawMessage("0")}
		}
		for i, p := range parts {
			f, err := jsonFloat(p)
			if err != nil {
				return nil, bad(err)
			}
			if err := putFloat(order, out[i*size/2:(i+1)*size/2], f); err != nil {
				return nil, bad(err)
			}
		}
	case 'S':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, bad(err)
		}
		if len(s) > size {
			return nil, bad(fmt.Errorf("longer than %d bytes", size))
		}
		copy(out, s)
	default:
		return nil, bad(fmt.Errorf("unsupported kind"))
	}
	return out, nil
}

// jsonFloat reads a JSON number, or "NaN", "Infinity", "-Infinity" (as getfattr shows them).
func jsonFloat(v json.RawMessage) (float64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err == nil {
		return f, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, fmt.Errorf("not a number")
	}
	switch s {
	case "NaN", "nan":
		return math.NaN(), nil
	case "Infinity", "inf":
		return math.Inf(1), nil
	case "-Infinity", "-inf":
		return math.Inf(-1), nil
	}
	return 0, fmt.Errorf("not a number")
}

func putUint(order binary.ByteOrder, b []byte, u uint64) {
	switch len(b) {
	case 1:
		b[0] = byte(u)
	case 2:
		order.PutUint16(b, uint16(u))
	case 4:
		order.PutUint32(b, uint32(u))
	case 8:
		order.PutUint64(b, u)
	}
}

func putFloat(order binary.ByteOrder, b []byte, f float64) error {
	switch len(b) {
	case 4:
		order.PutUint32(b, math.Float32bits(float32(f)))
	case 8:
		order.PutUint64(b, math.Float64bits(f))
	default:
		return fmt.Errorf("%d-byte floats are not supported", len(b))
	}
	return nil
}
