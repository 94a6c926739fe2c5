package lifecycle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/vh5fs/vh5fs/internal/durable"
)

// PendingSuffix names the sidecar of the data groups that deletions' bodies (DeleteBody)
// left to Reclaim: ".FILE.vh5fs-reclaim", beside FILE as its stages are. It is outside the
// HDF5 file, where versioned-hdf5 never looks: the file itself only holds unused chunks
// (slots with hash rows no version maps), which the library reads as any other.
const PendingSuffix = ".vh5fs-reclaim"

// PendingPath is the pending set's sidecar of the HDF5 file at file.
func PendingPath(file string) string {
	return filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+PendingSuffix)
}

// pendingSet is the sidecar's JSON.
type pendingSet struct {
	// Groups are data groups (paths below /_version_data) that may hold chunks no version
	// maps since a deletion's body, in name order.
	Groups []string `json:"groups"`
}

// Pending lists the data groups deletions' bodies left to reclaim in the file at file,
// in name order; none if it has no sidecar.
func Pending(file string) ([]string, error) {
	b, err := os.ReadFile(PendingPath(file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("deletions' pending reclaim: %w", err)
	}
	var s pendingSet
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("deletions' pending reclaim: %s: %w", PendingPath(file), err)
	}
	return s.Groups, nil
}

// addPending records groups in file's pending set, durably (written beside, fsynced,
// renamed over, its directory fsynced), unless it holds them already.
func addPending(file string, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	have, err := Pending(file)
	if err != nil {
		return err
	}
	all := slices.Clone(have)
	for _, g := range groups {
		if !slices.Contains(all, g) {
			all = append(all, g)
		}
	}
	if len(all) == len(have) {
		return nil
	}
	slices.Sort(all)
	return writePending(file, all)
}

// writePending writes groups (sorted) as file's pending set, durably.
func writePending(file string, all []string) error {
	b, err := json.Marshal(pendingSet{Groups: all})
	if err != nil {
		return err
	}
	if err := durable.WriteFile(PendingPath(file), 0o644, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("deletions' pending reclaim: %w", err)
	}
	return nil
}

// keepPending makes groups file's whole pending set once a sync reclaimed the others:
// the sidecar is removed if there are none, else rewritten with them alone.
func keepPending(file string, groups []string) error {
	if len(groups) == 0 {
		forgetPending(file)
		return nil
	}
	have, err := Pending(file)
	if err != nil {
		return err
	}
	if slices.Equal(have, groups) {
		return nil
	}
	return writePending(file, groups)
}

// forgetPending removes file's pending set once a sync reclaimed it. A sidecar left by a
// crash in between costs nothing but a later reclaim that finds nothing to move.
func forgetPending(file string) {
	if err := os.Remove(PendingPath(file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Warn("deletions' pending reclaim: sidecar not removed; the next reclaim finds nothing to do", "file", PendingPath(file), "err", err)
	}
}
