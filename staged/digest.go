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

// digestJob is a digest being computed or done (done closed).
type digestJob struct {
	done    chan struct{}
	trimmed []int64
	sum     [32]byte
}

func (a *Array) job(i int32) *digestJob {
	if int(i) < len(a.jobs) {
		return a.jobs[i]
	}
	return nil
}

// waitDigest waits until no worker reads staged slab i's buffer.
func (a *Array) waitDigest(i int32) {
	if j := a.job(i); j != nil {
		<-j.done
	}
}

// forgetDigest drops slab i's digest before its buffer changes or goes.
func (a *Array) forgetDigest(i int32) {
	if j := a.job(i); j != nil {
		<-j.done
		a.jobs[i] = nil
	}
}

// startDigest digests staged slab i (chunk grid), now wholly written, in the background.
func (a *Array) startDigest(i int32, grid []int64) {
	st := a.store
	if st == nil || st.digest == nil || a.slabs[i] == nil {
		return
	}
	for len(a.jobs) < len(a.slabs) {
		a.jobs = append(a.jobs, nil)
	}
	j := &digestJob{done: make(chan struct{}), trimmed: a.trimmed(a.shape, a.grid, grid)}
	a.jobs[i] = j
	data, chunks, is := a.slabs[i], a.chunks, a.itemSize
	go func() {
		st.workers <- struct{}{}
		j.sum = st.digest(data, chunks, j.trimmed, is)
		<-st.workers
		close(j.done)
	}()
}

// digestOf is slab i's digest for the trimmed extent l, if one was made for it.
func (a *Array) digestOf(i int32, l []int64) *[32]byte {
	j := a.job(i)
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
