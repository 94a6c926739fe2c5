package h5

// #include <stdlib.h>
// #include "vh5_live.h"
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"gonum.org/v1/hdf5"
)

// Live (SWMR-reader) access. A live open is libhdf5's own SWMR reader: H5F_ACC_RDONLY |
// H5F_ACC_SWMR_READ, which verifies every checksummed metadata read and reads it again (up
// to the metadata read attempts) when the checksum fails because a writer was rewriting it,
// and which skips the end-of-allocation check (a SWMR writer does not keep the superblock's
// EOF up to date). Datasets see a writer's growth through Refresh (H5Drefresh).

// SWMROptions are the file-access settings of a live open.
type SWMROptions struct {
	// ReadAttempts is H5Pset_metadata_read_attempts: how often libhdf5 reads a checksummed
	// metadata structure before it gives up (0: the library's default, 100 for SWMR reads).
	ReadAttempts uint
	// Locking is libhdf5's flock of the file (H5Pset_file_locking). A SWMR reader that takes
	// it holds a shared lock for as long as the file is open, and then no writer can open
	// the file (h5py's File(..., "a") fails with EAGAIN). The HDF5_USE_FILE_LOCKING
	// environment variable, if set, overrides this.
	Locking bool
}

// OpenSWMR opens path read-only as an HDF5 SWMR reader.
func OpenSWMR(path string, o SWMROptions) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lock()
	defer unlock()
	if !hdf5.IsHDF5(path) {
		stackMessage()
		return nil, fmt.Errorf("%s: %w", path, ErrNotHDF5)
	}
	locking := C.int(0)
	if o.Locking {
		locking = 1
	}
	id := C.vh5_open_swmr(cpath, C.uint(o.ReadAttempts), locking)
	if id < 0 {
		return nil, fail("open file (SWMR read)", path, nil)
	}
	return &File{path: path, f: gonumFile(id)}, nil
}

// gonumFile wraps an open file identifier in gonum's File, whose only state is that
// identifier (hdf5.File{CommonFG{Identifier{id}}}) and which has no constructor for an
// identifier opened with a file-access property list.
func gonumFile(id C.hid_t) *hdf5.File {
	f := new(hdf5.File)
	*(*C.hid_t)(unsafe.Pointer(f)) = id
	return f
}

// MetadataReadRetryTypes is the number of metadata kinds libhdf5 counts retries for.
const MetadataReadRetryTypes = C.H5F_NUM_METADATA_READ_RETRY_TYPES

// RetryInfo is libhdf5's count of metadata reads that needed more than one attempt
// (H5Fget_metadata_read_retry_info), since the file was opened.
type RetryInfo struct {
	// Reads is the number of metadata reads that were retried at least once, per metadata
	// kind (libhdf5's order: object header, object header chunk, v2 B-tree header, ...).
	Reads [MetadataReadRetryTypes]uint64
	// Bins counts those reads by how many retries they needed: Bins[j] needed 10^j to
	// 10^(j+1)-1 retries. libhdf5 sizes the bins by the read attempts (2 for 100).
	Bins []uint64
}

// Total is the number of retried metadata reads of every kind.
func (r RetryInfo) Total() uint64 {
	var n uint64
	for _, x := range r.Reads {
		n += x
	}
	return n
}

// MetadataRetries returns libhdf5's retry counts for the file.
func (f *File) MetadataRetries() (RetryInfo, error) {
	lock()
	defer unlock()
	id, err := f.id()
	if err != nil {
		return RetryInfo{}, err
	}
	var (
		reads [MetadataReadRetryTypes]C.ulonglong
		bins  [8]C.ulonglong
		nbins C.uint
	)
	if C.vh5_retry_counts(id, &reads[0], &bins[0], &nbins) < 0 {
		return RetryInfo{}, fail("metadata read retry info", f.path, nil)
	}
	var out RetryInfo
	for i, x := range reads {
		out.Reads[i] = uint64(x)
	}
	for _, x := range bins[:min(int(nbins), len(bins))] {
		out.Bins = append(out.Bins, uint64(x))
	}
	return out, nil
}

// Refresh makes the dataset see its writer's latest flushed state (H5Drefresh: libhdf5
// evicts the dataset's cached metadata, chunk index included, and reads the object header
// again) and updates Info's shape. The handle stays valid.
func (d *Dataset) Refresh() error {
	info := d.Info()
	rank := len(info.Shape)
	dims := make([]C.hsize_t, max(rank, 1))
	lock()
	id, err := d.id()
	if err != nil {
		unlock()
		return err
	}
	rc := C.vh5_refresh_dims(id, C.int(rank), &dims[0])
	if rc < 0 {
		e := fail("refresh", d.path, nil)
		if rc == -2 {
			e = &Error{Op: "refresh", Path: d.path, Stack: stackMessage(), Err: fmt.Errorf("rank changed")}
		}
		unlock()
		return e
	}
	unlock()
	d.infoMu.Lock()
	d.info.Shape = int64s(dims[:rank])
	d.infoMu.Unlock()
	return nil
}
