package versions

import (
	"fmt"
	"path"

	"github.com/vh5fs/vh5fs/h5"
)

// CheckFormat returns an error wrapping h5.ErrNewerFormat when the file uses an encoding
// the libhdf5 vh5fs is built with cannot read (HDF5 1.14 with libver="latest" writes
// datatype messages and selections 1.10 does not know), before anything that goes
// through libhdf5 (a commit, a history edit, fsck) starts and fails half-way. It reads
// the headers of the current and the newest version's datasets and of their raw_data and
// hash_table, with vh5fs's own reader: a writer's library bound shows in every object it
// writes, and these are the ones the last writers wrote. Reads never need it.
func (f *File) CheckFormat() error {
	if !f.versioned {
		return nil
	}
	m, err := f.bytesMeta(false)
	if err != nil {
		return nil
	}
	// Only the answer matters here: an object that cannot be found or read is the business
	// of what runs next, which says so in its own words (fsck finds it damaged).
	for _, obj := range f.formatSample() {
		addr, err := f.h.ObjectAddr(obj)
		if err != nil {
			continue
		}
		e, err := m.Encodings(addr)
		if err != nil {
			continue
		}
		if err := h5.CheckEncodings(e); err != nil {
			return fmt.Errorf("%s: %w", obj, err)
		}
	}
	return nil
}

// formatSample lists the objects CheckFormat reads: the datasets of the current and the
// newest version, and each one's raw_data and hash_table.
func (f *File) formatSample() []string {
	names := map[string]bool{}
	if cur, err := f.CurrentVersion(); err == nil && cur != "" {
		names[cur] = true
	}
	if vs, err := f.Versions(); err == nil {
		var newest Version
		for _, v := range vs {
			if newest.Name == "" || v.Time().After(newest.Time()) {
				newest = v
			}
		}
		if newest.Name != "" {
			names[newest.Name] = true
		}
	}
	var objs []string
	seen := map[string]bool{}
	for name := range names {
		paths, _ := f.DatasetPaths(name)
		for _, p := range paths {
			objs = append(objs, path.Join(VersionsGroup, name, p))
			if !seen[p] {
				seen[p] = true
				objs = append(objs, RawDataIn(path.Join(DataRoot, p)), HashTableIn(path.Join(DataRoot, p)))
			}
		}
	}
	return objs
}

// CheckFileFormat is CheckFormat on the file at path, opened read-only for it: for a caller
// that opens the file with libhdf5 itself, and OpenRW. Every file is looked at, whatever its
// superblock: a newer HDF5 that adds to a file keeps the superblock it found.
func CheckFileFormat(path string) error {
	f, err := Open(path)
	if err != nil {
		return nil // the open that follows reports what is wrong with the file
	}
	defer f.Close()
	if err := f.CheckFormat(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
