//go:build !amd64

package filters

// unshuffle8SIMD does nothing where there is no assembly version: unshuffle8 does it all.
func unshuffle8SIMD(out, in []byte, n int) int { return 0 }
