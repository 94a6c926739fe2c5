//go:build !amd64

package filters

// unshuffleSIMD does nothing where there is no assembly version: unshuffle does it all.
func unshuffleSIMD(out, in []byte, itemSize, n int) int { return 0 }
