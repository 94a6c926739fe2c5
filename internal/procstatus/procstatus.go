// Package procstatus reads the memory figures of /proc/PID/status (Linux), for the
// benchmark's and the tests' measurements.
package procstatus

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KiB returns field (e.g. "VmHWM", "VmRSS", "RssFile") of /proc/<pid>/status in KiB; pid
// "self" is the calling process.
func KiB(pid, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%s/status: %s: %w", pid, field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%s/status has no %s", pid, field)
}
