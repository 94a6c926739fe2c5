package staged

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// adviseHugePages asks the kernel to back r with huge pages (fewer faults and TLB misses
// for the arena's large regions); a refusal changes nothing.
func adviseHugePages(r []byte) { _ = unix.Madvise(r, unix.MADV_HUGEPAGE) }

// punchHole frees the pages of n bytes at off in fd's file, keeping its size; best effort.
func punchHole(fd uintptr, off, n int64) {
	_ = unix.Fallocate(int(fd), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}

// openTmpfile opens an unnamed file in dir (O_TMPFILE): nothing to remove after a crash.
func openTmpfile(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, "(spill file)")), nil
}
