//go:build !linux

package staged

import (
	"errors"
	"os"
)

// adviseHugePages does nothing where transparent huge pages are not Linux's.
func adviseHugePages([]byte) {}

// punchHole does nothing without fallocate(2): the spill file keeps the pages until it is
// truncated after the commit.
func punchHole(uintptr, int64, int64) {}

// openTmpfile fails where O_TMPFILE is Linux's: the caller makes a named file and
// removes its name.
func openTmpfile(string) (*os.File, error) { return nil, errors.ErrUnsupported }
