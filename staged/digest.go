package staged

import (
	"runtime"
	"slices"
)

// Digester computes a chunk's digest (commit's Hash): of the trimmed corner of chunk, a
// full-shape chunk buffer.
type Digester func(chunk []byte, chunkShape, trimmed []int64, itemSize int) [32]byte

// SetDigester makes the arrays of the store digest each chunk a write covers wholly, on a
// pool of one worker per core, while later writes go on: the commit then takes the digest
// instead of reading the chunk back (perhaps from the spill file) to hash it. A digest is
// dropped when its chunk is written again or its buffer changes.
func (s *Store) SetDigester(d Digester) {
	s.digest = d
	s.workers = make(chan struct{}, runtime.GOMAXPROCS(0))
}

// Encoder encodes a whole chunk (full chunk shape, ChunkBytes long; not modified) as the
// dataset's filter pipeline stores it, into a new slice; nil leaves it to the commit.
type Encoder func(chunk []byte) []byte

// SetEncoder makes the store's digest workers also encode each chunk of the array that a
// write covers wholly and that is not an edge chunk, so that the commit only writes it
// (and never reads a spilled chunk back to encode it). Encoded bytes count against the
// store's budget and are kept, in memory, when their chunk spills; a worker encodes
// nothing while they reach half the budget (the commit encodes those chunks). A later
// write to the chunk drops its encoding. Call it before the first write; nil: none.
func (a *Array) SetEncoder(e Encoder) { a.encode = e }

// digestJob is a digest being computed or done (done closed).
type digestJob struct {
	done    chan struct{}
	trimmed []int64
	sum     [32]byte
	encoded []byte // the chunk as stored, if an Encoder made it
}

// waitDigest waits until no worker reads staged slab i's buffer.
func (a *Array) waitDigest(i int32) {
	if j := a.slabs[i].job; j != nil {
		<-j.done
	}
}

// forgetDigest drops slab i's digest (and encoding) before its buffer changes or goes.
func (a *Array) forgetDigest(i int32) {
	if j := a.slabs[i].job; j != nil {
		<-j.done
		if n := int64(len(j.encoded)); n > 0 {
			a.store.resident.Add(-n)
			a.store.encoded.Add(-n)
		}
		a.slabs[i].job = nil
	}
}

// startDigest digests staged slab i (chunk grid), now wholly written, in the background.
func (a *Array) startDigest(i int32, grid []int64) {
	st := a.store
	if st == nil || st.digest == nil || a.slabs[i].buf == nil {
		return
	}
	j := &digestJob{done: make(chan struct{}), trimmed: a.Layout().Trimmed(grid)}
	a.slabs[i].job = j
	data, chunks, is := a.slabs[i].buf, a.Layout().Chunks(), a.ItemSize()
	enc := a.encode
	if !slices.Equal(j.trimmed, chunks) {
		enc = nil // an edge chunk: the commit writes its trimmed box through libhdf5
	}
	go func() {
		st.workers <- struct{}{}
		j.sum = st.digest(data, chunks, j.trimmed, is)
		if enc != nil && st.encodeRoom() {
			if e := enc(data); e != nil {
				j.encoded = e
				st.encoded.Add(int64(len(e)))
				st.resident.Add(int64(len(e)))
			}
		}
		<-st.workers
		close(j.done)
	}()
}

// encodeRoom reports whether the encoded chunks held are under half the budget.
func (s *Store) encodeRoom() bool {
	return s.budget < 0 || 2*s.encoded.Load() < s.budget
}

// encodedOf is slab i's encoding for the trimmed extent l, if one was made for it (valid
// until the next mutation).
func (a *Array) encodedOf(i int32, l []int64) []byte {
	j := a.slabs[i].job
	if j == nil {
		return nil
	}
	<-j.done
	if !slices.Equal(j.trimmed, l) {
		return nil
	}
	return j.encoded
}

// digestOf is slab i's digest for the trimmed extent l, if one was made for it.
func (a *Array) digestOf(i int32, l []int64) *[32]byte {
	j := a.slabs[i].job
	if j == nil {
		return nil
	}
	<-j.done
	if !slices.Equal(j.trimmed, l) {
		return nil
	}
	sum := j.sum
	return &sum
}
