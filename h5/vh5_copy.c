#include <stdlib.h>
#include <string.h>
#include "vh5.h"
#include "vh5_copy.h"

// vh5_create_like creates (truncating) the file at path with src's creation properties and
// its access properties' format bounds, so that readers of src can read the copy; through
// the journal driver (vh5j_set_fapl), which writes a new file as it comes, so that the
// copy's mapping lists can be written as stored (h5/copy.go).
hid_t vh5_create_like(hid_t src, const char *path) {
	hid_t fcpl = H5Fget_create_plist(src);
	hid_t sfapl = H5Fget_access_plist(src);
	hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
	H5F_libver_t lo, hi;
	hid_t f = -1;
	if (fcpl >= 0 && sfapl >= 0 && fapl >= 0 && H5Pget_libver_bounds(sfapl, &lo, &hi) >= 0 &&
	    H5Pset_libver_bounds(fapl, lo, hi) >= 0 && vh5j_set_fapl(fapl) == 0) {
		f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
	}
	if (fapl >= 0) H5Pclose(fapl);
	if (sfapl >= 0) H5Pclose(sfapl);
	if (fcpl >= 0) H5Pclose(fcpl);
	return f;
}

// gcpl_like is a new group creation property list with the settings of src's, a group's
// (link and attribute storage, creation order): not src itself, which for a group with
// dense link storage carries that group's fractal heap and B-tree addresses, and a group
// created with it in another file looks its links up there (libhdf5 1.10 and 1.14 alike).
static hid_t gcpl_like(hid_t src) {
	hid_t p = H5Pcreate(H5P_GROUP_CREATE);
	unsigned corder, max_compact, min_dense, est_num, est_len, acorder, amax, amin;
	size_t heap_hint;
	if (p < 0 || H5Pget_link_creation_order(src, &corder) < 0 || H5Pset_link_creation_order(p, corder) < 0 ||
	    H5Pget_link_phase_change(src, &max_compact, &min_dense) < 0 ||
	    H5Pset_link_phase_change(p, max_compact, min_dense) < 0 ||
	    H5Pget_est_link_info(src, &est_num, &est_len) < 0 || H5Pset_est_link_info(p, est_num, est_len) < 0 ||
	    H5Pget_local_heap_size_hint(src, &heap_hint) < 0 || H5Pset_local_heap_size_hint(p, heap_hint) < 0 ||
	    H5Pget_attr_creation_order(src, &acorder) < 0 || H5Pset_attr_creation_order(p, acorder) < 0 ||
	    H5Pget_attr_phase_change(src, &amax, &amin) < 0 || H5Pset_attr_phase_change(p, amax, amin) < 0) {
		if (p >= 0) H5Pclose(p);
		return -1;
	}
	return p;
}

// vh5_copy_group creates the group at path in dst with the creation properties and
// attributes of the one in src (the root: its attributes only).
int vh5_copy_group(hid_t src, hid_t dst, const char *path) {
	if (strcmp(path, "/") != 0) {
		hid_t sg = H5Gopen2(src, path, H5P_DEFAULT);
		hid_t sgcpl = sg >= 0 ? H5Gget_create_plist(sg) : -1;
		hid_t gcpl = sgcpl >= 0 ? gcpl_like(sgcpl) : -1;
		hid_t g = gcpl >= 0 ? H5Gcreate2(dst, path, H5P_DEFAULT, gcpl, H5P_DEFAULT) : -1;
		// Every API call clears the error stack first: keep the failure's for the caller.
		hid_t es = g < 0 ? H5Eget_current_stack() : -1;
		if (g >= 0) H5Gclose(g);
		if (gcpl >= 0) H5Pclose(gcpl);
		if (sgcpl >= 0) H5Pclose(sgcpl);
		if (sg >= 0) H5Gclose(sg);
		if (es >= 0) H5Eset_current_stack(es);
		if (g < 0) return -1;
	}
	return vh5_attrs_copy(src, path, dst, path);
}

// vh5_copy_object_to copies the object at path, with everything below it, into dst at the
// same path (H5Ocopy).
int vh5_copy_object_to(hid_t src, hid_t dst, const char *path) {
	return H5Ocopy(src, path, dst, path, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
}

// vh5_copy_link copies the link at path from src to dst: a hard link's object (a named
// datatype, say) with H5Ocopy, a soft link as the same soft link; -2 for another kind of
// link (external, user-defined).
int vh5_copy_link(hid_t src, hid_t dst, const char *path) {
	H5L_info_t info;
	if (H5Lget_info(src, path, &info, H5P_DEFAULT) < 0) return -1;
	if (info.type == H5L_TYPE_HARD) return vh5_copy_object_to(src, dst, path);
	if (info.type != H5L_TYPE_SOFT) return -2;
	char *val = malloc(info.u.val_size + 1);
	if (!val) return -1;
	int rc = -1;
	if (H5Lget_val(src, path, val, info.u.val_size + 1, H5P_DEFAULT) >= 0) {
		val[info.u.val_size] = '\0';
		rc = H5Lcreate_soft(val, dst, path, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
	}
	free(val);
	return rc;
}

// vh5_create_dataset_like creates the dataset at path in dst with the type, extent
// (maximum dims too), creation properties (layout, chunks, filters, fill value) and
// attributes of the one in src, and returns it open; no data is copied.
hid_t vh5_create_dataset_like(hid_t src, hid_t dst, const char *path) {
	hid_t sd = H5Dopen2(src, path, H5P_DEFAULT);
	hid_t t = sd >= 0 ? H5Dget_type(sd) : -1;
	hid_t s = sd >= 0 ? H5Dget_space(sd) : -1;
	hid_t dcpl = sd >= 0 ? H5Dget_create_plist(sd) : -1;
	hid_t d = -1;
	if (t >= 0 && s >= 0 && dcpl >= 0) {
		d = H5Dcreate2(dst, path, t, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	}
	if (dcpl >= 0) H5Pclose(dcpl);
	if (s >= 0) H5Sclose(s);
	if (t >= 0) H5Tclose(t);
	if (sd >= 0) H5Dclose(sd);
	if (d >= 0 && vh5_attrs_copy(src, path, dst, path) < 0) {
		H5Dclose(d);
		return -1;
	}
	return d;
}

// vh5_copy_chunks copies the stored chunks at positions [from, from+count) of the chunk
// grid (C order over dims/chunk) from sd to dd as stored: filtered bytes and filter mask,
// never decoded. Unallocated chunks are skipped. bytes gets the bytes copied.
int vh5_copy_chunks(hid_t sd, hid_t dd, int rank, const hsize_t *dims, const hsize_t *chunk,
                    hsize_t from, hsize_t count, hsize_t *bytes) {
	hsize_t grid[H5S_MAX_RANK], off[H5S_MAX_RANK];
	for (int i = 0; i < rank; i++) {
		grid[i] = (dims[i] + chunk[i] - 1) / chunk[i];
	}
	void *buf = NULL;
	size_t cap = 0;
	int rc = 0;
	*bytes = 0;
	for (hsize_t k = from; k < from + count && rc == 0; k++) {
		hsize_t rest = k;
		for (int i = rank - 1; i >= 0; i--) {
			off[i] = (rest % grid[i]) * chunk[i];
			rest /= grid[i];
		}
		haddr_t addr;
		hsize_t size = 0;
		unsigned mask = 0;
		if (H5Dget_chunk_info_by_coord(sd, off, &mask, &addr, &size) < 0) {
			rc = -1;
			break;
		}
		if (addr == HADDR_UNDEF || size == 0) {
			continue;
		}
		if (size > cap) {
			void *nb = realloc(buf, size);
			if (!nb) {
				rc = -1;
				break;
			}
			buf = nb;
			cap = size;
		}
		uint32_t filters = 0;
		if (vh5_read_chunk_raw(sd, off, &filters, buf, cap) < 0 ||
		    H5Dwrite_chunk(dd, H5P_DEFAULT, filters, off, size, buf) < 0) {
			rc = -1;
			break;
		}
		*bytes += size;
	}
	free(buf);
	return rc;
}
