package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func getxattr(path, name string) ([]byte, error) {
	buf := make([]byte, 64<<10)
	n, err := unix.Getxattr(path, name, buf)
	if err != nil {
		return nil, fmt.Errorf("getxattr %s %s: %w", path, name, err)
	}
	return buf[:n], nil
}

// peakRSS is a process's VmHWM in bytes (0 if unknown).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func runOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
