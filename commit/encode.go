package commit

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/staged"
	"github.com/vh5fs/vh5fs/versions"
)

// HDF5 filter identifiers the encoder knows.
const (
	filterDeflate = 1
	filterShuffle = 2
)

// encoder runs a raw_data filter pipeline in Go (shuffle) and libdeflate (deflate), so that
// whole chunks are encoded on every core and stored with one direct chunk write each. A
// nil encoder means the pipeline has a filter it does not know: libhdf5 filters those.
type encoder struct {
	pipeline []h5.Filter
	itemSize int
	bufs     sync.Pool // *[]byte scratch of DeflateBound(chunk bytes) or chunk bytes
}

// newEncoder returns the encoder of pipeline, or nil if a filter is not one it runs.
func newEncoder(pipeline []h5.Filter, itemSize int) *encoder {
	for _, f := range pipeline {
		switch {
		case f.ID == filterShuffle:
		case f.ID == filterDeflate && len(f.Params) >= 1 && f.Params[0] <= 9:
		default:
			return nil
		}
	}
	return &encoder{pipeline: pipeline, itemSize: itemSize}
}

// ChunkEncoder is the encoder of ds's raw_data filter pipeline for staged chunks encoded
// when written (staged.Array.SetEncoder): each whole chunk as the commit would store it,
// in a slice of its own. nil when there is nothing to gain: no filter, or one the encoder
// does not run (libhdf5 filters those at the commit).
func ChunkEncoder(ds *versions.Dataset) staged.Encoder {
	info := ds.RawDataset().Info()
	if len(info.Filters) == 0 {
		return nil
	}
	enc := newEncoder(info.Filters, info.Type.Size)
	if enc == nil {
		return nil
	}
	return func(chunk []byte) []byte {
		out, owned, err := enc.encode(chunk)
		if err != nil {
			return nil // the commit encodes it again, and answers the error
		}
		b := slices.Clone(out)
		if owned {
			enc.release(out)
		}
		return b
	}
}

// scratch returns a buffer of at least n bytes.
func (e *encoder) scratch(n int) []byte {
	if p, ok := e.bufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]byte, n)
}

// release hands back a buffer encode returned (or scratch gave).
func (e *encoder) release(b []byte) {
	if b != nil {
		e.bufs.Put(&b)
	}
}

// encode applies the pipeline to chunk (not modified) and returns the stored bytes: in a
// buffer of the encoder's when owned (release it), else chunk itself (no filter changed it).
func (e *encoder) encode(chunk []byte) (stored []byte, owned bool, err error) {
	cur, owned := chunk, false
	for _, f := range e.pipeline {
		switch f.ID {
		case filterShuffle:
			if e.itemSize <= 1 {
				continue
			}
			out := e.scratch(len(cur))
			shuffle(out, cur, e.itemSize)
			if owned {
				e.release(cur)
			}
			cur, owned = out, true
		case filterDeflate:
			out := e.scratch(h5.DeflateBound(len(cur)))
			n, err := h5.Deflate(out, cur, int(f.Params[0]))
			if owned {
				e.release(cur)
			}
			if err != nil {
				e.release(out)
				return nil, false, err
			}
			cur, owned = out[:n], true
		default:
			if owned {
				e.release(cur)
			}
			return nil, false, fmt.Errorf("commit: filter %d has no encoder", f.ID)
		}
	}
	return cur, owned, nil
}

// shuffle is HDF5's shuffle filter: byte j of every element, for each j in turn. Bytes
// past the last whole element are copied as they are.
func shuffle(dst, src []byte, size int) {
	n := len(src) / size
	i := 0
	if size == 8 { // float64, int64: 8x8 byte transposes, eight elements at a time
		for ; i+8 <= n; i += 8 {
			e := src[i*8 : i*8+64 : i*8+64]
			x := [8]uint64{
				binary.LittleEndian.Uint64(e[0:]), binary.LittleEndian.Uint64(e[8:]),
				binary.LittleEndian.Uint64(e[16:]), binary.LittleEndian.Uint64(e[24:]),
				binary.LittleEndian.Uint64(e[32:]), binary.LittleEndian.Uint64(e[40:]),
				binary.LittleEndian.Uint64(e[48:]), binary.LittleEndian.Uint64(e[56:]),
			}
			transpose8(&x)
			for j := range x {
				binary.LittleEndian.PutUint64(dst[j*n+i:], x[j])
			}
		}
	}
	for j := range size {
		out := dst[j*n : (j+1)*n]
		for k := i; k < n; k++ {
			out[k] = src[k*size+j]
		}
	}
	copy(dst[n*size:], src[n*size:])
}

// transpose8 transposes the 8x8 bytes of x: byte j of x[k] becomes byte k of x[j] (bytes
// numbered little-endian), in three rounds of swapping blocks of 4, 2 and 1 bytes.
func transpose8(x *[8]uint64) {
	const m4, m2, m1 = 0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	x[0], x[4] = x[0]&m4|x[4]<<32, x[0]>>32|x[4]&^m4
	x[1], x[5] = x[1]&m4|x[5]<<32, x[1]>>32|x[5]&^m4
	x[2], x[6] = x[2]&m4|x[6]<<32, x[2]>>32|x[6]&^m4
	x[3], x[7] = x[3]&m4|x[7]<<32, x[3]>>32|x[7]&^m4
	x[0], x[2] = x[0]&m2|(x[2]&m2)<<16, (x[0]>>16)&m2|x[2]&^m2
	x[1], x[3] = x[1]&m2|(x[3]&m2)<<16, (x[1]>>16)&m2|x[3]&^m2
	x[4], x[6] = x[4]&m2|(x[6]&m2)<<16, (x[4]>>16)&m2|x[6]&^m2
	x[5], x[7] = x[5]&m2|(x[7]&m2)<<16, (x[5]>>16)&m2|x[7]&^m2
	x[0], x[1] = x[0]&m1|(x[1]&m1)<<8, (x[0]>>8)&m1|x[1]&^m1
	x[2], x[3] = x[2]&m1|(x[3]&m1)<<8, (x[2]>>8)&m1|x[3]&^m1
	x[4], x[5] = x[4]&m1|(x[5]&m1)<<8, (x[4]>>8)&m1|x[5]&^m1
	x[6], x[7] = x[6]&m1|(x[7]&m1)<<8, (x[6]>>8)&m1|x[7]&^m1
}

// workers is how many chunks are hashed or encoded at once.
func workers() int { return runtime.GOMAXPROCS(0) }

// Parallel runs fn(i) for i in [0, n) on every core and returns the first error.
func Parallel(n int, fn func(i int) error) error {
	w := min(workers(), n)
	if w <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		ferr error
	)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := ferr != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if ferr == nil {
						ferr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return ferr
}

// Ordered runs produce(i) for i in [0, n) on every core and calls consume(i, result) in
// order on the calling goroutine. At most window results are produced or in production
// beyond the one consume holds (memory follows window, not n): a slot is freed as consume
// takes a result, so producers go on while it runs. It returns the first error of either;
// produce's results that consume never saw go to discard (if not nil).
func Ordered[T any](n, window int, produce func(i int) (T, error), consume func(i int, v T) error, discard func(T)) error {
	if n <= 2 || workers() == 1 { // too little to start goroutines for
		for i := range n {
			v, err := produce(i)
			if err != nil {
				return err
			}
			if err := consume(i, v); err != nil {
				return err
			}
		}
		return nil
	}
	type result struct {
		v   T
		err error
	}
	// Job i's result goes to ring[i%window]: the slots keep at most window jobs between
	// their start and their consume, so no two of them share a place.
	ring := make([]chan result, window)
	for i := range ring {
		ring[i] = make(chan result, 1)
	}
	quit := make(chan struct{})
	slots := make(chan struct{}, window)
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for i := range n {
			select {
			case slots <- struct{}{}:
			case <-quit:
				return
			}
			select {
			case jobs <- i:
			case <-quit:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range min(workers(), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				v, err := produce(i)
				ring[i%window] <- result{v, err}
			}
		}()
	}
	var err error
	for i := 0; i < n && err == nil; i++ {
		r := <-ring[i%window]
		<-slots
		if err = r.err; err == nil {
			err = consume(i, r.v)
		}
	}
	close(quit)
	wg.Wait()
	for _, c := range ring { // produced but not consumed
		select {
		case r := <-c:
			if r.err == nil && discard != nil {
				discard(r.v)
			}
		default:
		}
	}
	return err
}
