package fsck

import (
	"fmt"
	"strings"

	"github.com/vh5fs/vh5fs/lifecycle"
)

// PendingNote says, in one line, which data groups deletions' bodies left to reclaim in
// the file at file (lifecycle.Pending), "" if none. A pending set is no problem: its
// chunks sit in slots no version maps, with their hash rows, as a file that versioned-hdf5
// reads like any other holds them, and the hash tables check as any unused slot.
func PendingNote(file string) (string, error) {
	pending, err := lifecycle.Pending(file)
	if err != nil || len(pending) == 0 {
		return "", err
	}
	groups := "data groups"
	if len(pending) == 1 {
		groups = "data group"
	}
	return fmt.Sprintf("pending: %d %s to reclaim from deleted versions (%s); vh5fs fsck --repair, vh5fs compact "+
		"or the next delete reclaims them", len(pending), groups, strings.Join(pending, ", ")), nil
}
