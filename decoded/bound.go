package decoded

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// freeShare is the share of the cache filesystem's free space a default-sized cache may
// take: the directory usually sits on the same filesystem as the user's home and its HDF5
// files, whose commits, spill files and staging files need the rest.
const freeShare = 4

// DefaultLimit is the size of a cache in dir when none is given: the lesser of ceiling and
// a quarter of the space free on dir's filesystem now (dir is made if needed). 0 means no
// room for a cache.
func DefaultLimit(dir string, ceiling int64) (int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("decoded cache: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("decoded cache: free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	return min(ceiling, free/freeShare), nil
}
