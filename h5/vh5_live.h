// C helpers for live (SWMR-reader) mounts; see live.go.
#ifndef VH5_LIVE_H
#define VH5_LIVE_H

#include "hdf5.h"

// vh5_open_swmr opens path with H5F_ACC_RDONLY|H5F_ACC_SWMR_READ, attempts metadata read
// attempts (0: the library's default, 100 for SWMR access) and file locking on or off.
hid_t vh5_open_swmr(const char *path, unsigned attempts, int locking);

// vh5_retry_counts adds, per metadata type (H5F_NUM_METADATA_READ_RETRY_TYPES of them), the
// number of metadata reads that needed retries into out, and the counts per decade bin
// (bin j: 10^j to 10^(j+1)-1 retries, at most 8 bins) into bins.
int vh5_retry_counts(hid_t file, unsigned long long *out, unsigned long long *bins, unsigned *nbins);

// vh5_refresh_dims runs H5Drefresh on dset and reads its current extent into dims.
int vh5_refresh_dims(hid_t dset, int rank, hsize_t *dims);

#endif
