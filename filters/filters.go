// Package filters decodes HDF5 chunk filter pipelines in pure Go — deflate, shuffle, LZF,
// Fletcher-32 — so that chunk bytes read straight from the file at their offset can be
// decoded without libhdf5 (and without its global lock), in parallel. Pipelines with any
// other filter are reported unsupported; callers then read through libhdf5.
package filters

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// HDF5 filter identifiers.
const (
	Deflate    = 1
	Shuffle    = 2
	Fletcher32 = 3
	LZF        = 32000
)

// ErrUnsupported reports a pipeline with a filter this package does not decode.
var ErrUnsupported = errors.New("filters: unsupported filter")

// Filter is one stage of a pipeline, in the order the writer applied them.
type Filter struct {
	ID     int
	Params []uint32
}

// Supported reports whether Decode handles every filter of the pipeline.
func Supported(pipeline []Filter) bool {
	for _, f := range pipeline {
		switch f.ID {
		case Deflate, Shuffle, Fletcher32, LZF:
		default:
			return false
		}
	}
	return true
}

// Decoder decodes pipelines; Inflate, if set, replaces Go's compress/zlib for deflate
// (e.g. with zlib itself, which is faster). It writes the decoded bytes into dst and
// returns their number.
type Decoder struct {
	Inflate func(dst, src []byte) (int, error)
	// Scratch, if set, holds *[]byte buffers for the outputs of stages that a later stage
	// consumes (deflate before shuffle), so that they are not allocated per chunk.
	Scratch *sync.Pool
}

// scratch returns a buffer of n bytes from the pool, or a new one.
func (dec Decoder) scratch(n int) *[]byte {
	if dec.Scratch != nil {
		if p, ok := dec.Scratch.Get().(*[]byte); ok && cap(*p) >= n {
			*p = (*p)[:n]
			return p
		}
	}
	b := make([]byte, n)
	return &b
}

// Decode undoes the pipeline on a stored chunk with Go's decoders; see Decoder.Decode.
func Decode(stored []byte, pipeline []Filter, mask uint32, itemSize, size int, dst []byte) ([]byte, error) {
	return Decoder{}.Decode(stored, pipeline, mask, itemSize, size, dst)
}

// Decode undoes the pipeline on a stored chunk. mask has bit i set when filter i was
// skipped for this chunk. itemSize is the element size (for shuffle); size the decoded
// chunk's size in bytes. dst, if large enough, receives the result; otherwise the result
// may share memory with stored (an unfiltered chunk is returned as it is).
func (dec Decoder) Decode(stored []byte, pipeline []Filter, mask uint32, itemSize, size int, dst []byte) ([]byte, error) {
	data := stored
	// next returns the stage that runs after stage i (filters are undone from the end of
	// the pipeline), -1 if none.
	next := func(i int) int {
		for i--; i >= 0 && mask&(1<<uint(i)) != 0; i-- {
		}
		return i
	}
	for i := len(pipeline) - 1; i >= 0; i-- {
		if mask&(1<<uint(i)) != 0 {
			continue
		}
		var err error
		switch pipeline[i].ID {
		case Deflate:
			if dec.Inflate != nil {
				var out []byte
				// Only an unshuffle, which writes a new buffer, may consume a scratch buffer.
				if j := next(i); j >= 0 && pipeline[j].ID == Shuffle && itemSize > 1 && size >= itemSize && dec.Scratch != nil {
					p := dec.scratch(size)
					defer dec.Scratch.Put(p)
					out = *p
				} else {
					out = make([]byte, size)
				}
				var n int
				n, err = dec.Inflate(out, data)
				data = out[:n]
			} else {
				data, err = inflate(data, size)
			}
		case Shuffle:
			data = unshuffle(data, itemSize)
		case Fletcher32:
			data, err = checkFletcher32(data)
		case LZF:
			data, err = lzfDecompress(data, size)
		default:
			return nil, fmt.Errorf("%w %d", ErrUnsupported, pipeline[i].ID)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(data) != size {
		return nil, fmt.Errorf("filters: decoded chunk is %d bytes, want %d", len(data), size)
	}
	if cap(dst) >= size {
		dst = dst[:size]
		copy(dst, data)
		return dst, nil
	}
	return data, nil
}

func inflate(in []byte, size int) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, fmt.Errorf("filters: deflate: %w", err)
	}
	// The decoded size is known: read into one buffer of that size (no regrowth), then make
	// sure nothing follows and the stream's checksum holds (read to EOF).
	out := make([]byte, size)
	n, err := io.ReadFull(r, out)
	switch {
	case err == io.ErrUnexpectedEOF || err == io.EOF:
		return out[:n], nil // shorter than expected: Decode reports the size mismatch
	case err != nil:
		return nil, fmt.Errorf("filters: deflate: %w", err)
	}
	var extra [1]byte
	if k, err := r.Read(extra[:]); k > 0 {
		return nil, fmt.Errorf("filters: deflate: chunk longer than %d bytes", size)
	} else if err != io.EOF {
		return nil, fmt.Errorf("filters: deflate: %w", err)
	}
	return out, nil
}

// unshuffle reverses HDF5's byte shuffle: byte j of every element was stored together.
// Trailing bytes that do not make a whole element were left in place.
func unshuffle(in []byte, itemSize int) []byte {
	if itemSize <= 1 || len(in) < itemSize {
		return in
	}
	n := len(in) / itemSize
	out := make([]byte, len(in))
	// 4- and 8-byte items 16 at a time where there is assembly; the rest of 8-byte items
	// (float64, int64) eight at a time; anything left one at a time.
	i := unshuffleSIMD(out, in, itemSize, n)
	if itemSize == 8 {
		i += unshuffle8(out[8*i:], in[i:], n, n-i)
	}
	for ; i < n; i++ {
		o := out[i*itemSize : (i+1)*itemSize]
		for j := range o {
			o[j] = in[j*n+i]
		}
	}
	copy(out[n*itemSize:], in[n*itemSize:])
	return out
}

// unshuffle8 undoes the shuffle of the first m of n 8-byte items eight at a time, the
// byte planes being n apart in in: eight bytes from each of the eight planes make an 8x8
// byte matrix, transposed in registers (three rounds of masked swaps of 32-, 16- and 8-bit
// halves) and stored as eight items. It returns how many items it did (a multiple of 8).
func unshuffle8(out, in []byte, n, m int) int {
	p0, p1, p2, p3 := in[:m], in[n:n+m], in[2*n:2*n+m], in[3*n:3*n+m]
	p4, p5, p6, p7 := in[4*n:4*n+m], in[5*n:5*n+m], in[6*n:6*n+m], in[7*n:7*n+m]
	le := binary.LittleEndian
	const m32, m16, m8 = 0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	i := 0
	for ; i+8 <= m; i += 8 {
		a0, a1, a2, a3 := le.Uint64(p0[i:]), le.Uint64(p1[i:]), le.Uint64(p2[i:]), le.Uint64(p3[i:])
		a4, a5, a6, a7 := le.Uint64(p4[i:]), le.Uint64(p5[i:]), le.Uint64(p6[i:]), le.Uint64(p7[i:])
		a0, a4 = a0&m32|a4<<32, a0>>32|a4&^m32
		a1, a5 = a1&m32|a5<<32, a1>>32|a5&^m32
		a2, a6 = a2&m32|a6<<32, a2>>32|a6&^m32
		a3, a7 = a3&m32|a7<<32, a3>>32|a7&^m32
		a0, a2 = a0&m16|(a2&m16)<<16, (a0>>16)&m16|a2&^m16
		a1, a3 = a1&m16|(a3&m16)<<16, (a1>>16)&m16|a3&^m16
		a4, a6 = a4&m16|(a6&m16)<<16, (a4>>16)&m16|a6&^m16
		a5, a7 = a5&m16|(a7&m16)<<16, (a5>>16)&m16|a7&^m16
		a0, a1 = a0&m8|(a1&m8)<<8, (a0>>8)&m8|a1&^m8
		a2, a3 = a2&m8|(a3&m8)<<8, (a2>>8)&m8|a3&^m8
		a4, a5 = a4&m8|(a5&m8)<<8, (a4>>8)&m8|a5&^m8
		a6, a7 = a6&m8|(a7&m8)<<8, (a6>>8)&m8|a7&^m8
		o := out[i*8 : i*8+64]
		le.PutUint64(o[0:], a0)
		le.PutUint64(o[8:], a1)
		le.PutUint64(o[16:], a2)
		le.PutUint64(o[24:], a3)
		le.PutUint64(o[32:], a4)
		le.PutUint64(o[40:], a5)
		le.PutUint64(o[48:], a6)
		le.PutUint64(o[56:], a7)
	}
	return i
}

// checkFletcher32 verifies and strips HDF5's trailing Fletcher-32 checksum.
func checkFletcher32(in []byte) ([]byte, error) {
	if len(in) < 4 {
		return nil, fmt.Errorf("filters: fletcher32: chunk of %d bytes", len(in))
	}
	data, stored := in[:len(in)-4], binary.LittleEndian.Uint32(in[len(in)-4:])
	if sum := fletcher32(data); sum != stored && swap16(sum) != stored {
		return nil, fmt.Errorf("filters: fletcher32 checksum mismatch")
	}
	return data, nil
}

// fletcher32 is HDF5's variant: 16-bit big-endian words, an odd trailing byte as the
// high byte of a last word.
func fletcher32(data []byte) uint32 {
	var sum1, sum2 uint32
	n := len(data) / 2
	for n > 0 {
		tlen := min(n, 360)
		n -= tlen
		for ; tlen > 0; tlen-- {
			sum1 += uint32(data[0])<<8 | uint32(data[1])
			sum2 += sum1
			data = data[2:]
		}
		sum1 = (sum1 & 0xffff) + (sum1 >> 16)
		sum2 = (sum2 & 0xffff) + (sum2 >> 16)
	}
	if len(data) == 1 {
		sum1 += uint32(data[0]) << 8
		sum2 += sum1
		sum1 = (sum1 & 0xffff) + (sum1 >> 16)
		sum2 = (sum2 & 0xffff) + (sum2 >> 16)
	}
	sum1 = (sum1 & 0xffff) + (sum1 >> 16)
	sum2 = (sum2 & 0xffff) + (sum2 >> 16)
	return sum2<<16 | sum1
}

// swap16 swaps the two halves: HDF5 1.6 wrote the checksum that way round on some hosts.
func swap16(v uint32) uint32 { return v<<16 | v>>16 }

// lzfDecompress decodes liblzf's format: literal runs (control < 32: copy control+1
// bytes) and back references (length = control>>5, +next byte if 7; offset from the low
// five bits and the next byte).
func lzfDecompress(in []byte, size int) ([]byte, error) {
	out := make([]byte, 0, size)
	for i := 0; i < len(in); {
		ctrl := int(in[i])
		i++
		if ctrl < 32 {
			n := ctrl + 1
			if i+n > len(in) || len(out)+n > size {
				return nil, errors.New("filters: lzf: literal run past the end")
			}
			out = append(out, in[i:i+n]...)
			i += n
			continue
		}
		length := ctrl >> 5
		if length == 7 {
			if i >= len(in) {
				return nil, errors.New("filters: lzf: truncated length")
			}
			length += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, errors.New("filters: lzf: truncated reference")
		}
		ref := len(out) - ((ctrl & 0x1f) << 8) - int(in[i]) - 1
		i++
		if ref < 0 || len(out)+length+2 > size {
			return nil, errors.New("filters: lzf: reference outside the chunk")
		}
		for k := 0; k < length+2; k++ {
			out = append(out, out[ref+k])
		}
	}
	return out, nil
}
