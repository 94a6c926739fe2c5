package decoded

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate gives f size bytes of disk now, so that a full disk fails the fill at its
// start rather than at some write, and the accounting sees the whole entry.
func preallocate(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
