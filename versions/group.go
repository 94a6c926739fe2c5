package versions

import (
	"time"

	"github.com/vh5fs/vh5fs/h5"
)

// The version group's metadata, written: the one codec of the attributes every change of
// the history writes (File.Version and File.CurrentVersion read them). Each writes in the
// order versioned-hdf5 does, so that files match it byte for byte.

// CreateVersion creates the group of version name on prev, under committed=False, stamped
// at t: the start of a commit's body, which readers ignore until PublishVersion.
func CreateVersion(h *h5.File, name, prev string, t time.Time) error {
	p := VersionGroup(name)
	if err := h.CreateGroup(p); err != nil {
		return err
	}
	if err := h.SetAttrString(p, AttrPrevVersion, prev); err != nil {
		return err
	}
	if err := h.SetAttrBool(p, AttrCommitted, false); err != nil {
		return err
	}
	return h.SetAttrString(p, AttrTimestamp, CanonicalTimestamp(t))
}

// PublishVersion marks version name committed at t and, if makeCurrent, makes it current
// (versioned-hdf5's make_current), recording the data format that wrote it: a commit's
// publish.
func PublishVersion(h *h5.File, name string, t time.Time, makeCurrent bool) error {
	p := VersionGroup(name)
	if err := h.SetAttrBool(p, AttrCommitted, true); err != nil {
		return err
	}
	if err := h.SetAttrString(p, AttrTimestamp, CanonicalTimestamp(t)); err != nil {
		return err
	}
	if makeCurrent {
		if err := SetCurrent(h, name); err != nil {
			return err
		}
	}
	return h.SetAttrInt64(VersionsGroup, AttrDataVersion, SupportedDataVersion)
}

// SetCurrent makes name the current version (current_version).
func SetCurrent(h *h5.File, name string) error {
	return h.SetAttrString(VersionsGroup, AttrCurrentVersion, name)
}

// Relink makes prev the previous version of version (prev_version).
func Relink(h *h5.File, version, prev string) error {
	return h.SetAttrString(VersionGroup(version), AttrPrevVersion, prev)
}
