package hashtable

// The data_version 4 chunk digest used for deduplication in hash_table (format
// specification section 5): SHA-256 over the chunk's trimmed contents in C order (BODY)
// followed by the ASCII shape suffix, Python's tuple repr of the trimmed extent L, e.g.
// "(10,)" or "(3, 4)". Only the trimmed corner of a chunk is hashed; padding beyond the
// dataset's edge never enters the digest.

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"

	"github.com/vh5fs/vh5fs/chunkplan"
)

// Hash returns the versioned-hdf5 (data_version 4) digest of a fixed-size
// element chunk: SHA-256 of the chunk's trimmed contents in C order followed
// by ShapeSuffix(trimmed). chunk is the full-shape chunk (shape chunkShape,
// C order, itemSize bytes per element); only the corner trimmed (the chunk's
// trimmed extent L, L[i] <= chunkShape[i]) is hashed, so padding may hold
// anything. A chunk with a zero in trimmed hashes only the suffix.
//
// Hash panics if the arguments are inconsistent (different ranks, trimmed
// outside chunkShape, chunk shorter than prod(chunkShape)*itemSize): that is
// a programming error, like an out-of-range slice index. Use CheckChunk to
// validate untrusted shapes first.
func Hash(chunk []byte, chunkShape, trimmed []int64, itemSize int) [32]byte {
	if err := CheckChunk(len(chunk), chunkShape, trimmed, itemSize); err != nil {
		panic(err)
	}
	h := sha256.New()
	writeBody(h, chunk, chunkShape, trimmed, int64(itemSize))
	return sum(h, trimmed)
}

// CheckChunk reports whether Hash accepts a chunk of chunkLen bytes with the
// given shapes and item size.
func CheckChunk(chunkLen int, chunkShape, trimmed []int64, itemSize int) error {
	if len(chunkShape) == 0 || len(trimmed) != len(chunkShape) {
		return fmt.Errorf("commit: hash: trimmed extent %v does not match chunk shape %v", trimmed, chunkShape)
	}
	if itemSize <= 0 {
		return fmt.Errorf("commit: hash: item size %d must be positive", itemSize)
	}
	need := int64(itemSize)
	for i, c := range chunkShape {
		if c <= 0 || trimmed[i] < 0 || trimmed[i] > c {
			return fmt.Errorf("commit: hash: trimmed extent %v outside chunk shape %v", trimmed, chunkShape)
		}
		if need > int64(chunkLen)/c { // need*c > chunkLen, without overflow
			return fmt.Errorf("commit: hash: chunk of %d bytes is shorter than chunk shape %v of item size %d", chunkLen, chunkShape, itemSize)
		}
		need *= c
	}
	return nil
}

// writeBody streams the trimmed corner of chunk into h as the longest
// contiguous runs: the innermost axes whose trimmed extent equals the chunk
// extent are contiguous in the chunk buffer, so an untrimmed chunk is one
// write and a chunk trimmed only on axis 0 is one prefix write.
func writeBody(h hash.Hash, chunk []byte, chunkShape, trimmed []int64, itemSize int64) {
	nd := len(chunkShape)
	for _, l := range trimmed {
		if l == 0 {
			return
		}
	}
	strides := make([]int64, nd) // byte strides in the chunk buffer
	acc := itemSize
	for i := nd - 1; i >= 0; i-- {
		strides[i] = acc
		acc *= chunkShape[i]
	}
	// Axis k is the outermost axis such that every axis after it is
	// untrimmed: a run is trimmed[k] consecutive rows of stride strides[k].
	k := nd - 1
	for k > 0 && trimmed[k] == chunkShape[k] {
		k--
	}
	run := trimmed[k] * strides[k]
	idx := make([]int64, k) // odometer over axes 0..k-1
	for {
		var off int64
		for i, x := range idx {
			off += x * strides[i]
		}
		h.Write(chunk[off : off+run])
		if !chunkplan.Next(idx, trimmed[:k]) {
			return
		}
	}
}

// HashStrings returns the data_version 4 digest of a chunk of variable-length
// strings: for each element in C order its byte length as a little-endian
// uint64 followed by its bytes (Go strings are hashed as-is, i.e. UTF-8 for
// text), then ShapeSuffix(trimmed). values holds exactly the trimmed elements
// (prod(trimmed) of them) in C order; a NULL string counts as "".
func HashStrings(values []string, trimmed []int64) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, v := range values {
		binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	return sum(h, trimmed)
}

// ShapeSuffix returns Python's tuple repr of trimmed: "(10,)" for one axis,
// "(3, 4)" otherwise ("()" for none).
func ShapeSuffix(trimmed []int64) string { return chunkplan.Tuple(trimmed) }

func sum(h hash.Hash, trimmed []int64) [32]byte {
	h.Write([]byte(ShapeSuffix(trimmed)))
	var d [32]byte
	h.Sum(d[:0])
	return d
}
