//go:build !linux

package decoded

import "os"

// preallocate sets f's size (no fallocate: a full disk shows at a write).
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
