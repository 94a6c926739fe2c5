package fsck

import (
	"fmt"
	"strings"

	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/versions"
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
	f, err := versions.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	blocked, err := lifecycle.CheckPending(f)
	if err != nil {
		return "", fmt.Errorf("planning the pending reclaim: %w", err)
	}
	if len(blocked) == 0 {
		return fmt.Sprintf("pending: %d %s to reclaim from deleted versions (%s); vh5fs fsck --repair, vh5fs compact "+
			"or the next delete reclaims them", len(pending), groups, strings.Join(pending, ", ")), nil
	}
	why := make([]string, len(blocked))
	for i, b := range blocked {
		why[i] = b.String()
	}
	return fmt.Sprintf("pending: %d %s to reclaim from deleted versions (%s); this vh5fs cannot reclaim %d of them (%s): "+
		"their unused chunks stay in raw_data and every version reads whole; vh5fs compact %s copies the file with them "+
		"as they are", len(pending), groups, strings.Join(pending, ", "), len(blocked), strings.Join(why, "; "), file), nil
}
