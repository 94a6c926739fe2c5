package filters

//go:noescape
func unshuffle8x16(out, in *byte, n, count int)

// unshuffle8SIMD undoes the shuffle of the first n/16*16 of the n 8-byte items in in with
// SSE2 (part of every amd64 CPU) and returns how many it did.
func unshuffle8SIMD(out, in []byte, n int) int {
	count := n / 16
	if count == 0 || len(in) < 8*n || len(out) < 8*n {
		return 0
	}
	unshuffle8x16(&out[0], &in[0], n, count)
	return 16 * count
}
