//go:build !linux

package fsnode

// readAheadKB: other systems keep their own read-ahead policy for FUSE mounts.
const readAheadKB = 0

// RaiseReadAhead is Linux-only (the mount's backing-device read-ahead in /sys).
func RaiseReadAhead(mountpoint string) error { return nil }
