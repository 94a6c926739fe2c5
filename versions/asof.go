package versions

import (
	"fmt"
	"time"
)

// asOf pins a File to a moment: the file as it was then (mount -o at=TIME).
type asOf struct {
	t       time.Time
	version string // the version current at t
}

// AsOf makes f show the file as it was at t: the version current at t (versioned-hdf5's
// rule, VersionAt) is the current version, and versions stamped later do not exist. It
// must be called before f is shared (the pin is read without a lock and never changes).
func (f *File) AsOf(t time.Time) (Version, error) {
	v, ok, err := f.VersionAt(t)
	if err != nil {
		return Version{}, err
	}
	if !ok {
		return Version{}, fmt.Errorf("no version at or before %s", CanonicalTimestamp(t))
	}
	f.asOf = &asOf{t: t, version: v.Name}
	return v, nil
}

// hidden reports a version made after the moment f is pinned to.
func (f *File) hidden(v Version) bool {
	return f.asOf != nil && v.Time().After(f.asOf.t)
}
