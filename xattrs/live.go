package xattrs

import (
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/versions"
)

// Live extended attributes on the mount's root.
const (
	LiveWriter     = Prefix + "live.writer"     // swmr-writing, writing or closed
	LiveRetries    = Prefix + "live.retries"    // JSON, see AddLive
	LiveSuperblock = Prefix + "live.superblock" // JSON: version, flags, eof, length
)

// retryKinds names H5Fget_metadata_read_retry_info's metadata kinds, in its order.
var retryKinds = [h5.MetadataReadRetryTypes]string{
	"object header", "object header chunk", "v2 B-tree header", "v2 B-tree internal node",
	"v2 B-tree leaf node", "fractal heap header", "fractal heap direct block",
	"fractal heap indirect block", "free-space header", "free-space sections",
	"shared message table", "shared message list", "extensible array header",
	"extensible array index block", "extensible array super block",
	"extensible array data block", "extensible array data block page",
	"fixed array super block", "fixed array data block", "fixed array data block page",
	"superblock",
}

// AddLive adds a live file's attributes to x (the root's): its writer, the retries of
// libhdf5 and of vh5fs, and the superblock's state.
func AddLive(x *Set, f *versions.File) error {
	s, err := f.LiveStatus()
	if err != nil {
		return err
	}
	x.Add(LiveWriter, []byte(s.Writer))
	byKind := map[string]uint64{}
	for i, n := range s.HDF5.Reads {
		if n > 0 {
			byKind[retryKinds[i]] = n
		}
	}
	bins := s.HDF5.Bins
	if bins == nil {
		bins = []uint64{}
	}
	retries := map[string]any{
		// metadata reads libhdf5 had to read again (checksum failed: torn by a write)
		"hdf5_metadata_reads_retried": s.HDF5.Total(),
		"hdf5_by_kind":                byKind,
		"hdf5_by_retries_decade":      bins, // [1-9 retries, 10-99, ...]
		"operations":                  s.Operations,
		"reopens":                     s.Reopens,
	}
	if s.ReopenErr != nil {
		retries["reopen_error"] = s.ReopenErr.Error()
	}
	if err := x.AddJSON(LiveRetries, retries); err != nil {
		return err
	}
	return x.AddJSON(LiveSuperblock, map[string]any{
		"version": s.State.Version, "flags": s.State.Flags, "eof": s.State.EOF,
		"length": s.State.Length, "foreign_write_lock": s.State.ForeignLock,
	})
}
