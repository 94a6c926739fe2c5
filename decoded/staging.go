package decoded

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// stagingPrefix names the staging files of passthrough writes: write.tmp-RANDOM. They
// carry tempMark, so the accounting counts them as the temporary files of fills are
// counted, and Open removes those a crash left (no process holds their flock).
const stagingPrefix = "write"

// Staging creates a staging file in the directory for a write handle whose content the
// kernel writes directly (FUSE passthrough): empty, locked (flock) while the returned file
// is open, removed by the next Open of the directory if the process dies with it.
func (c *Cache) Staging() (*os.File, error) {
	f, err := os.CreateTemp(c.dir, stagingPrefix+tempMark+"*")
	if err != nil {
		return nil, fmt.Errorf("decoded cache: staging file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		os.Remove(f.Name())
		f.Close()
		return nil, fmt.Errorf("decoded cache: staging file %s: %w", f.Name(), err)
	}
	return f, nil
}

// Free is the space free on the directory's filesystem for unprivileged writers.
func (c *Cache) Free() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(c.dir, &st); err != nil {
		return 0, fmt.Errorf("decoded cache: free space of %s: %w", c.dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
