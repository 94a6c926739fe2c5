package modify

// lzfSize is the size LZF (filter 32000) stores chunk in: liblzf's compressor (lzf_c.c,
// HLOG 16, VERY_FAST), ported to measure, not to store: the output is counted, never
// written. Like h5py's LZF filter, whose output buffer is the chunk's size, a chunk that
// does not shrink is stored whole. The estimate of modify -n samples new chunks with it;
// the rewrite stores LZF chunks through libhdf5.
func lzfSize(chunk []byte, htab []int32) int {
	const (
		hlog   = 16
		maxLit = 1 << 5
		maxOff = 1 << 13
		maxRef = (1 << 8) + (1 << 3)
	)
	n := len(chunk)
	if n < 4 {
		return n
	}
	for i := range htab {
		htab[i] = -1
	}
	idx := func(h uint32) uint32 { return ((h >> (3*8 - hlog)) - h*5) & (1<<hlog - 1) }
	frst := func(p int) uint32 { return uint32(chunk[p])<<8 | uint32(chunk[p+1]) }
	next := func(v uint32, p int) uint32 { return v<<8 | uint32(chunk[p+2]) }
	out := 1 // the first literal run's length byte
	lit := 0
	ip := 0
	hval := frst(ip)
	for ip < n-2 {
		hval = next(hval, ip)
		slot := idx(hval)
		ref := int(htab[slot])
		htab[slot] = int32(ip)
		if off := ip - ref - 1; ref > 0 && off < maxOff && chunk[ref+2] == chunk[ip+2] &&
			chunk[ref] == chunk[ip] && chunk[ref+1] == chunk[ip+1] {
			length := 2
			maxlen := min(n-ip-length, maxRef)
			if lit == 0 {
				out-- // no literal run before the reference
			}
			for length++; length < maxlen && chunk[ref+length] == chunk[ip+length]; length++ {
			}
			length -= 2 // octets - 1
			ip++
			if length < 7 {
				out += 2
			} else {
				out += 3
			}
			lit = 0
			out++ // the next literal run's length byte
			ip += length + 1
			if ip >= n-2 {
				break
			}
			ip -= 2
			hval = frst(ip)
			hval = next(hval, ip)
			htab[idx(hval)] = int32(ip)
			ip++
			hval = next(hval, ip)
			htab[idx(hval)] = int32(ip)
			ip++
		} else {
			lit++
			out++
			ip++
			if lit == maxLit {
				lit = 0
				out++
			}
		}
		if out >= n {
			return n
		}
	}
	for ip < n {
		lit++
		out++
		ip++
		if lit == maxLit {
			lit = 0
			out++
		}
	}
	if lit == 0 {
		out--
	}
	return min(out, n)
}
