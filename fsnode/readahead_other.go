//go:build !linux

package fsnode

// readAheadKB: other systems keep their own read-ahead policy for FUSE mounts.
const readAheadKB = 0

// raiseReadAhead is Linux-only (the mount's backing-device read-ahead in /sys).
func raiseReadAhead(mountpoint string, kb int) error { return nil }
