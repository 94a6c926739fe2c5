package main

import (
	"fmt"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/internal/procstatus"
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
	kb, _ := procstatus.KiB(strconv.Itoa(pid), "VmHWM")
	return kb << 10
}

func runOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
