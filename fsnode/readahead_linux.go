//go:build linux

package fsnode

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// readAheadKB is the read-ahead vh5fs asks of the kernel. Buffered reads reach a FUSE
// daemon as read-ahead-sized requests, and the mount's default (128 KiB) makes a
// sequential reader pay one round trip per 128 KiB.
const readAheadKB = 512

// RaiseReadAhead sets the backing-device read-ahead of the mount at mountpoint to
// readAheadKB unless it is already larger (needs root).
func RaiseReadAhead(mountpoint string) error {
	const kb = readAheadKB
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	cur, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(cur))); err == nil && n >= kb {
		return nil
	}
	return os.WriteFile(path, []byte(strconv.Itoa(kb)), 0)
}
