package versions

import (
	"github.com/vh5fs/vh5fs/h5"
)

// The file's layout (spec sections 2 to 4): where versioned-hdf5 keeps the versions and
// each dataset's data group, and the attributes a version group holds. Engines build these
// paths and read these attributes here, never by hand, so that the layout has one owner.

const (
	// DataRoot is the group versioned-hdf5 keeps everything in.
	DataRoot = "/_version_data"
	// VersionsGroup holds one group per version.
	VersionsGroup = DataRoot + "/versions"
	// FirstVersion is the empty root of every version history; it is never served.
	FirstVersion = "__first_version__"
	// SupportedDataVersion is the format revision vh5fs reads and writes.
	SupportedDataVersion = 4
)

// The datasets of a data group (DataGroupOf): the chunks of every version of a dataset,
// and the hash table of their digests (package hashtable).
const (
	RawData   = "raw_data"
	HashTable = "hash_table"
)

// The attributes of the versions group and of each version group (spec section 3).
const (
	AttrCurrentVersion = "current_version"
	AttrDataVersion    = "data_version"
	AttrPrevVersion    = "prev_version"
	AttrCommitted      = "committed"
	AttrTimestamp      = "timestamp"
	// AttrRawData and AttrChunks, on a version's dataset: its data group's raw_data, and
	// its chunk shape.
	AttrRawData = "raw_data"
	AttrChunks  = "chunks"
)

// VersionGroup is the group of version name.
func VersionGroup(name string) string { return VersionsGroup + "/" + name }

// DataGroupOf is the data group of the dataset at rel, its path in a version without the
// leading slash ("grp/ds").
func DataGroupOf(rel string) string { return DataRoot + "/" + rel }

// InVersion is the path of the object at rel ("grp/ds") in version name.
func InVersion(name, rel string) string { return VersionGroup(name) + "/" + rel }

// RawDataOf and HashTableOf are the raw_data and hash_table of the dataset at rel.
func RawDataOf(rel string) string   { return RawDataIn(DataGroupOf(rel)) }
func HashTableOf(rel string) string { return HashTableIn(DataGroupOf(rel)) }

// RawDataIn is the raw_data dataset of the data group group.
func RawDataIn(group string) string { return group + "/" + RawData }

// HashTableIn is the hash_table dataset of the data group group.
func HashTableIn(group string) string { return group + "/" + HashTable }

// PrevVersion reads version name's prev_version as stored in h (not through a File's
// cache: a history edit reads the versions it rewrites); ok is false when the group has
// no such attribute or it is not a string.
func PrevVersion(h *h5.File, name string) (prev string, ok bool, err error) {
	return stringAttr(h, VersionGroup(name), AttrPrevVersion)
}

// Current reads the versions group's current_version as stored in h; ok is false when
// there is none or it is not a string.
func Current(h *h5.File) (name string, ok bool, err error) {
	return stringAttr(h, VersionsGroup, AttrCurrentVersion)
}

func stringAttr(h *h5.File, path, name string) (string, bool, error) {
	a, ok, err := h.Attr(path, name)
	if err != nil {
		return "", false, err
	}
	s, isString := a.Value.(string)
	return s, ok && isString, nil
}
