package h5

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/vh5fs/vh5fs/h5meta"
)

// ErrNewerFormat is wrapped by the errors of files that use an encoding newer than the
// libhdf5 vh5fs is built with can read (written by a newer HDF5 with libver="latest"): vh5fs
// reads them with its own reader, but cannot change or check them.
var ErrNewerFormat = errors.New("file format newer than this HDF5 reads")

// FormatError names the encoding a file uses that the running libhdf5 cannot read.
type FormatError struct {
	Feature string // e.g. "datatype message version 4"
	Since   string // the first HDF5 release that reads it, "" if unknown
	Library string // the libhdf5 vh5fs runs with
}

func (e *FormatError) Error() string {
	since, need := "a newer HDF5", "1.14"
	if e.Since != "" {
		since = "HDF5 >= " + e.Since
		if e.Since > need {
			need = e.Since
		}
	}
	return fmt.Sprintf("%s (%s writes it with libver=\"latest\"): vh5fs built with HDF5 %s reads this file "+
		"but cannot change or check it; rebuild vh5fs against HDF5 >= %s (make HDF5_DIR=PREFIX)", e.Feature, since, e.Library, need)
}

func (e *FormatError) Is(target error) bool { return target == ErrNewerFormat }

// reads is what the running libhdf5 decodes: the newest version of each encoding.
type reads struct {
	datatype, layout, selection, mappingList int
}

// libReads is the table of what each release reads, by (major, minor).
func libReads(major, minor int) reads {
	switch {
	case major >= 2:
		return reads{datatype: 5, layout: 5, selection: 3, mappingList: 1}
	case minor >= 12:
		return reads{datatype: 4, layout: 4, selection: 3, mappingList: 0}
	default:
		return reads{datatype: 3, layout: 4, selection: 2, mappingList: 0}
	}
}

// libVersion is the libhdf5's major and minor version.
func libVersion() (major, minor int) {
	v := strings.SplitN(HeaderVersion(), ".", 3)
	major, _ = strconv.Atoi(v[0])
	if len(v) > 1 {
		minor, _ = strconv.Atoi(v[1])
	}
	return major, minor
}

// CheckEncodings returns a *FormatError if the running libhdf5 cannot read an object
// whose header uses the encodings e (h5meta.File.Encodings), else nil.
func CheckEncodings(e h5meta.Encodings) error {
	r := libReads(libVersion())
	newer := func(feature string, v int, since string) error {
		return &FormatError{Feature: fmt.Sprintf("%s version %d", feature, v), Since: since, Library: HeaderVersion()}
	}
	switch {
	case e.MappingList > r.mappingList:
		return newer("virtual dataset mapping list encoding", e.MappingList, "2.0")
	case e.Datatype > r.datatype:
		return newer("datatype message", e.Datatype, map[int]string{4: "1.12", 5: "2.0"}[e.Datatype])
	case e.Selection > r.selection:
		return newer("hyperslab selection", e.Selection, map[int]string{3: "1.12"}[e.Selection])
	case e.Layout > r.layout:
		return newer("data layout message", e.Layout, "")
	}
	return nil
}

// newerStack matches libhdf5's own words for an encoding it does not know.
var newerStack = regexp.MustCompile(`bad version number for ([a-z ]+?)(?: message)?(?:;|$)`)

// newerFormat is the *FormatError an HDF5 error stack reports, nil if it reports none.
func newerFormat(stack string) *FormatError {
	m := newerStack.FindStringSubmatch(stack)
	if m == nil {
		return nil
	}
	return &FormatError{Feature: "a " + m[1] + " encoding HDF5 " + HeaderVersion() + " does not know", Library: HeaderVersion()}
}
