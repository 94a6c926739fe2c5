package chunkstore

import "sync"

// fileMap is a read-only mapping of the file's bytes (mapFile), unmapped when garbage.
// Go code never reads it (a page the file lost would fault): its slices go to the kernel
// (writev), which reports such a page as an error.
type fileMap struct {
	b []byte

	mu     sync.Mutex
	lo, hi int64 // the range of the file replies were written from since the last release (hi 0: none); GUARDED_BY(mu)
}

// releaseBytes bounds the range of the file that replies write from before the pages they
// used are unmapped from the process, in one system call. The range, not the bytes
// written: a fault on a page of a large folio of the page cache maps the whole folio
// (megabytes of ext4's), so a reply of 512 KiB can leave several times that mapped.
const releaseBytes = 32 << 20

// folioBytes is what a range to unmap is widened to on both sides: the largest folio a
// fault maps entirely (a PMD's worth).
const folioBytes = 2 << 20

// slices returns the spans' bytes in the mapping, or nil if one lies beyond it (bytes
// the file gained after it was mapped).
func (m *fileMap) slices(spans []span) [][]byte {
	if m == nil {
		return nil
	}
	vec := make([][]byte, len(spans))
	for i, s := range spans {
		if s.at+s.n > int64(len(m.b)) {
			return nil
		}
		vec[i] = m.b[s.at : s.at+s.n : s.at+s.n]
	}
	return vec
}
