package filters

//go:noescape
func unshuffle8x16(out, in *byte, n, count int)

//go:noescape
func unshuffle4x16(out, in *byte, n, count int)

// unshuffleSIMD undoes the shuffle of the first n/16*16 of the n items of itemSize bytes
// in in with SSE2 (part of every amd64 CPU), for items of 4 and 8 bytes, and returns how
// many it did.
func unshuffleSIMD(out, in []byte, itemSize, n int) int {
	count := n / 16
	if count == 0 || len(in) < itemSize*n || len(out) < itemSize*n {
		return 0
	}
	switch itemSize {
	case 8:
		unshuffle8x16(&out[0], &in[0], n, count)
	case 4:
		unshuffle4x16(&out[0], &in[0], n, count)
	default:
		return 0
	}
	return 16 * count
}
