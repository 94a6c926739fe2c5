package stage

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
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
	// Encoding is a variable-length string dataset's (dtype "O"): "utf-8", the default
	// (h5py's str), or "ascii" (h5py's bytes).
	Encoding string `json:"encoding,omitempty"`
}

// stringDType is the dtype of variable-length strings, numpy's object.
const stringDType = "O"

// Strings reports whether the spec is of a variable-length string dataset.
func (s Spec) Strings() bool { return s.DType == stringDType }

// ASCII reports whether the spec is of variable-length ASCII strings.
func (s Spec) ASCII() bool { return s.Strings() && s.Encoding == "ascii" }

// encoding names a string charset as a spec gives it.
func encoding(utf8 bool) string {
	if utf8 {
		return "utf-8"
	}
	return "ascii"
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

// ParseSpec reads and completes a user.vh5fs.create value. Errors wrap ErrInvalid and say
// what is wrong.
func ParseSpec(b []byte) (Spec, error) { return parseSpec(b, nil) }

// parseSpec is ParseSpec for a path whose data group stored fixes (Stage.stored; nil for
// none): there the fields left out take stored's values, not create_dataset's defaults,
// and a field given must agree with stored (else ErrInvalid naming the spec to give), as
// versioned-hdf5 takes and checks them when a dataset is created at a path that held one.
func parseSpec(b []byte, stored *Spec) (Spec, error) {
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, invalid("user.vh5fs.create: %v", err)
	}
	if dec.More() {
		return Spec{}, invalid("user.vh5fs.create: trailing data after the JSON object")
	}
	var given map[string]json.RawMessage
	if err := json.Unmarshal(b, &given); err != nil {
		return Spec{}, invalid("user.vh5fs.create: %v", err)
	}
	if s.Compression != nil && *s.Compression == "gzip" && s.CompressionOpts == nil {
		lvl := defaultGzip
		s.CompressionOpts = &lvl
	}
	if stored != nil {
		if err := s.takeStored(given, *stored); err != nil {
			return Spec{}, err
		}
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
	if _, err := s.DataSpec(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// takeStored completes s, parsed from a user.vh5fs.create value whose fields are given,
// from stored: fields left out take stored's values, and given ones must agree with them
// (ErrInvalid otherwise, naming each conflict and the whole spec to give instead).
func (s *Spec) takeStored(given map[string]json.RawMessage, stored Spec) error {
	has := func(k string) bool { _, ok := given[k]; return ok }
	var conflicts []string
	conflict := func(field string, got, want any) {
		conflicts = append(conflicts, fmt.Sprintf("%s %s (the path's is %s)", field, got, want))
	}
	storedData, err := stored.DataSpec()
	if err != nil {
		return err
	}
	if !has("dtype") {
		s.DType = stored.DType
	} else if s.DType != stored.DType {
		conflict("dtype", s.DType, stored.DType)
	}
	if !has("encoding") {
		s.Encoding = stored.Encoding
	} else if s.Strings() && stored.Strings() && encoding(!s.ASCII()) != encoding(!stored.ASCII()) {
		conflict("encoding", s.Encoding, stored.Encoding)
	}
	if !has("shape") || s.Shape == nil {
		s.Shape = slices.Clone(stored.Shape)
	}
	if !has("chunks") || s.Chunks == nil {
		s.Chunks = slices.Clone(stored.Chunks)
	} else if !slices.Equal(s.Chunks, stored.Chunks) {
		conflict("chunks", fmt.Sprint(s.Chunks), fmt.Sprint(stored.Chunks))
	}
	if !has("fillvalue") || string(given["fillvalue"]) == "null" {
		s.FillValue = stored.FillValue
	} else if s.DType == stored.DType && !s.Strings() {
		if fill, err := fillBytes(s.DType, len(storedData.Fill), s.FillValue); err == nil && !bytes.Equal(fill, storedData.Fill) {
			conflict("fillvalue", h5json.FillText(s.DType, fill), h5json.FillText(stored.DType, storedData.Fill))
		}
	}
	if !has("compression") && !has("compression_opts") && !has("shuffle") {
		s.Compression, s.CompressionOpts, s.Shuffle = stored.Compression, stored.CompressionOpts, stored.Shuffle
	} else if mine, err := s.DataSpec(); err == nil && (mine.Gzip != storedData.Gzip || mine.LZF != storedData.LZF || mine.Shuffle != storedData.Shuffle) {
		conflict("filters", filterText(mine), filterText(storedData))
	}
	if len(conflicts) == 0 {
		return nil
	}
	want := stored
	want.Shape = s.Shape
	b, err := h5json.Marshal(want)
	if err != nil {
		return err
	}
	return invalid("user.vh5fs.create: an earlier dataset of this path fixed its dtype, chunks, fill value and filters (versioned-hdf5 keeps them per path): %s; give %s, or leave those fields out",
		strings.Join(conflicts, ", "), b)
}

// filterText names a DataSpec's filters as the spec gives them.
func filterText(d h5.DataSpec) string {
	var parts []string
	switch {
	case d.Gzip >= 0:
		parts = append(parts, fmt.Sprintf("gzip %d", d.Gzip))
	case d.LZF:
		parts = append(parts, "lzf")
	}
	if d.Shuffle {
		parts = append(parts, "shuffle")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// StoredSpec is the spec of a dataset that info, the raw_data of a path's data group,
// fixes: its dtype, chunks, fill value and the filters a spec can name (gzip, LZF,
// shuffle; others stay the data group's all the same), with shape. ErrInvalid for element
// types a stage cannot create.
func StoredSpec(info h5.Info, shape []int64) (Spec, error) {
	dt := info.Type.DType
	s := Spec{DType: dt, Shape: shape, Chunks: slices.Clone(info.Chunks)}
	if info.Type.VlenString {
		s.DType, s.Encoding = stringDType, encoding(info.Type.UTF8)
		s.filtersOf(info)
		return s, nil
	}
	size, err := h5.ItemSize(dt)
	if err != nil {
		return Spec{}, invalid("dtype %q: %v", dt, err)
	}
	// The fill value in the form getfattr shows, if that gives back its bytes exactly;
	// else (a NaN with a payload, bytes with NULs inside) the bytes themselves.
	var v any = h5json.Fill(dt, info.Fill)
	if dt[1] == 'S' {
		v = string(bytes.TrimRight(info.Fill, "\x00"))
	}
	fill, err := h5json.Marshal(v)
	if err != nil {
		return Spec{}, err
	}
	if b, err := fillBytes(dt, size, fill); err != nil || !bytes.Equal(b, info.Fill) {
		if fill, err = h5json.Marshal(map[string]string{"bytes_b64": base64.StdEncoding.EncodeToString(info.Fill)}); err != nil {
			return Spec{}, err
		}
	}
	s.FillValue = fill
	s.filtersOf(info)
	return s, nil
}

// filtersOf sets the filters of raw_data's info a spec can name.
func (s *Spec) filtersOf(info h5.Info) {
	for _, f := range info.Filters {
		switch f.ID {
		case 1: // deflate
			gz, lvl := "gzip", defaultGzip
			if len(f.Params) > 0 {
				lvl = int(f.Params[0])
			}
			s.Compression, s.CompressionOpts = &gz, &lvl
		case 2:
			s.Shuffle = true
		case 32000:
			lzf := "lzf"
			s.Compression = &lzf
		}
	}
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
	var fill []byte
	switch {
	case s.Strings():
		// h5py sets no fill value for strings: unset elements read as "".
		if len(s.FillValue) > 0 && string(s.FillValue) != "null" && string(s.FillValue) != `""` {
			return h5.DataSpec{}, invalid("fillvalue %s: variable-length strings have none (unset elements read as \"\")", s.FillValue)
		}
		if s.Encoding != "" && s.Encoding != "utf-8" && s.Encoding != "ascii" {
			return h5.DataSpec{}, invalid("encoding %q: use \"utf-8\" or \"ascii\"", s.Encoding)
		}
	case s.Encoding != "":
		return h5.DataSpec{}, invalid("encoding %q: only variable-length strings (dtype \"O\") have one", s.Encoding)
	default:
		size, err := h5.ItemSize(s.DType)
		if err != nil {
			return h5.DataSpec{}, invalid("dtype %q: %v", s.DType, err)
		}
		if fill, err = fillBytes(s.DType, size, s.FillValue); err != nil {
			return h5.DataSpec{}, err
		}
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
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalid)
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
	var raw struct {
		B64 *string `json:"bytes_b64"`
	}
	if v[0] == '{' {
		// The element's bytes, as user.vh5fs.fillvalue shows a fill value it cannot
		// decode.
		if err := json.Unmarshal(v, &raw); err != nil || raw.B64 == nil {
			return nil, bad(fmt.Errorf(`an object must be {"bytes_b64": "..."}`))
		}
		b, err := base64.StdEncoding.DecodeString(*raw.B64)
		if err != nil || len(b) != size {
			return nil, bad(fmt.Errorf("bytes_b64 must hold the %d bytes of one element", size))
		}
		return b, nil
	}
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

// putFloat writes f; a NaN as numpy's (and h5py's) quiet NaN, 0x7ff8000000000000 or
// 0x7fc00000, not Go's math.NaN(), so that "NaN" matches the fill value h5py stored.
func putFloat(order binary.ByteOrder, b []byte, f float64) error {
	switch len(b) {
	case 4:
		u := math.Float32bits(float32(f))
		if math.IsNaN(f) {
			u = 0x7fc00000
		}
		order.PutUint32(b, u)
	case 8:
		u := math.Float64bits(f)
		if math.IsNaN(f) {
			u = 0x7ff8000000000000
		}
		order.PutUint64(b, u)
	default:
		return fmt.Errorf("%d-byte floats are not supported", len(b))
	}
	return nil
}
