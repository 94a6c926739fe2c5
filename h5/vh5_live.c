#include "vh5_live.h"

hid_t vh5_open_swmr(const char *path, unsigned attempts, int locking) {
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0)
		return -1;
	hid_t f = -1;
	if (attempts > 0 && H5Pset_metadata_read_attempts(fapl, attempts) < 0)
		goto out;
	// ignore_when_disabled: a file system without flock support is no reason to fail.
	if (H5Pset_file_locking(fapl, locking ? 1 : 0, 1) < 0)
		goto out;
	f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
out:
	H5Pclose(fapl);
	return f;
}

int vh5_retry_counts(hid_t file, unsigned long long *out, unsigned long long *bins, unsigned *nbins) {
	H5F_retry_info_t info;
	if (H5Fget_metadata_read_retry_info(file, &info) < 0)
		return -1;
	*nbins = info.nbins;
	for (int i = 0; i < H5F_NUM_METADATA_READ_RETRY_TYPES; i++) {
		if (info.retries[i] == NULL)
			continue;
		for (unsigned j = 0; j < info.nbins; j++) {
			out[i] += info.retries[i][j];
			if (j < 8)
				bins[j] += info.retries[i][j];
		}
		H5free_memory(info.retries[i]);
	}
	return 0;
}

int vh5_refresh_dims(hid_t dset, int rank, hsize_t *dims) {
	if (H5Drefresh(dset) < 0)
		return -1;
	hid_t space = H5Dget_space(dset);
	if (space < 0)
		return -1;
	int r = H5Sget_simple_extent_ndims(space);
	if (r != rank) {
		H5Sclose(space);
		return -2;
	}
	int rc = H5Sget_simple_extent_dims(space, dims, NULL) < 0 ? -1 : 0;
	H5Sclose(space);
	return rc;
}
