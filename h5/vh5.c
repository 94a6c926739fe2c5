#include <errno.h>
#include <unistd.h>
#include <string.h>
#include <lzf.h>
#include "vh5.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

// ---- libhdf5 1.10 through 2.x (see vh5.h) ------------------------------------------------

#if H5_VERSION_GE(1, 12, 0)
static int obj_info_fill(hid_t loc, const H5O_info2_t *info, unsigned fields, vh5_obj_info *out) {
	out->type = (int)info->type;
	out->num_attrs = info->num_attrs;
	out->addr = HADDR_UNDEF;
	if ((fields & H5O_INFO_BASIC) && H5VLnative_token_to_addr(loc, info->token, &out->addr) < 0) {
		return -1;
	}
	return 0;
}

int vh5_obj_info_by_name(hid_t loc, const char *path, unsigned fields, vh5_obj_info *out) {
	H5O_info2_t info;
	if (H5Oget_info_by_name3(loc, path, &info, fields, H5P_DEFAULT) < 0) return -1;
	return obj_info_fill(loc, &info, fields, out);
}

int vh5_obj_info_of(hid_t obj, unsigned fields, vh5_obj_info *out) {
	H5O_info2_t info;
	if (H5Oget_info3(obj, &info, fields) < 0) return -1;
	return obj_info_fill(obj, &info, fields, out);
}

int vh5_reclaim(hid_t t, hid_t s, void *buf) {
	return H5Treclaim(t, s, H5P_DEFAULT, buf) < 0 ? -1 : 0;
}
#else
static void obj_info_fill(const H5O_info_t *info, vh5_obj_info *out) {
	out->type = (int)info->type;
	out->num_attrs = info->num_attrs;
	out->addr = info->addr;
}

int vh5_obj_info_by_name(hid_t loc, const char *path, unsigned fields, vh5_obj_info *out) {
	H5O_info_t info;
	if (H5Oget_info_by_name2(loc, path, &info, fields, H5P_DEFAULT) < 0) return -1;
	obj_info_fill(&info, out);
	return 0;
}

int vh5_obj_info_of(hid_t obj, unsigned fields, vh5_obj_info *out) {
	H5O_info_t info;
	if (H5Oget_info2(obj, &info, fields) < 0) return -1;
	obj_info_fill(&info, out);
	return 0;
}

int vh5_reclaim(hid_t t, hid_t s, void *buf) {
	return H5Dvlen_reclaim(t, s, H5P_DEFAULT, buf) < 0 ? -1 : 0;
}
#endif

int vh5_read_chunk_raw(hid_t dset, const hsize_t *offset, uint32_t *mask, void *buf, size_t cap) {
#if H5_VERSION_GE(2, 0, 0)
	return H5Dread_chunk2(dset, H5P_DEFAULT, offset, mask, buf, &cap) < 0 ? -1 : 0;
#else
	(void)cap;
	return H5Dread_chunk(dset, H5P_DEFAULT, offset, mask, buf) < 0 ? -1 : 0;
#endif
}

#define VH5_STR_(x) #x
#define VH5_STR(x) VH5_STR_(x)

const char *vh5_header_version(void) {
	return VH5_STR(H5_VERS_MAJOR) "." VH5_STR(H5_VERS_MINOR) "." VH5_STR(H5_VERS_RELEASE);
}

// ---- errors ----------------------------------------------------------------------------

typedef struct {
	char *out;
	size_t cap, len;
	unsigned count;
} vh5_errbuf;

static herr_t vh5_walk(unsigned n, const H5E_error2_t *e, void *data) {
	vh5_errbuf *b = data;
	(void)n;
	if (b->len + 8 >= b->cap || e->desc == NULL || e->desc[0] == '\0') {
		return 0;
	}
	int w = snprintf(b->out + b->len, b->cap - b->len, "%s%s: %s", b->count ? "; " : "",
	                 e->func_name ? e->func_name : "?", e->desc);
	if (w > 0) {
		b->len += (size_t)w;
		if (b->len >= b->cap) {
			b->len = b->cap - 1;
		}
	}
	b->count++;
	return 0;
}

void vh5_error_message(char *out, size_t cap) {
	vh5_errbuf b = {out, cap, 0, 0};
	out[0] = '\0';
	H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, vh5_walk, &b);
	H5Eclear2(H5E_DEFAULT);
}

// ---- LZF filter (id 32000, as h5py registers it) ------------------------------------------

static herr_t vh5_lzf_set_local(hid_t dcpl, hid_t type, hid_t space) {
	unsigned flags;
	size_t nelements = 8;
	unsigned values[8] = {0};
	if (H5Pget_filter_by_id2(dcpl, VH5_LZF_FILTER, &flags, &nelements, values, 0, NULL, NULL) < 0) {
		return -1;
	}
	if (nelements < 3) {
		nelements = 3;
	}
	values[0] = 4;      // filter revision, as h5py writes it
	values[1] = 0x0105; // liblzf API version h5py reports
	hsize_t chunk[32];
	int ndims = H5Pget_chunk(dcpl, 32, chunk);
	if (ndims < 0) {
		return -1;
	}
	size_t bytes = H5Tget_size(type);
	if (bytes == 0) {
		return -1;
	}
	for (int i = 0; i < ndims; i++) {
		bytes *= chunk[i];
	}
	values[2] = (unsigned)bytes;
	(void)space;
	return H5Pmodify_filter(dcpl, VH5_LZF_FILTER, flags, nelements, values);
}

static size_t vh5_lzf_filter(unsigned flags, size_t cd_nelmts, const unsigned cd_values[],
                             size_t nbytes, size_t *buf_size, void **buf) {
	if (flags & H5Z_FLAG_REVERSE) {
		size_t outsize = (cd_nelmts >= 3 && cd_values[2] != 0) ? cd_values[2] : *buf_size;
		for (;;) {
			void *out = H5allocate_memory(outsize, 0);
			if (out == NULL) {
				return 0;
			}
			unsigned status = lzf_decompress(*buf, (unsigned)nbytes, out, (unsigned)outsize);
			if (status != 0) {
				H5free_memory(*buf);
				*buf = out;
				*buf_size = outsize;
				return status;
			}
			H5free_memory(out);
			if (errno != E2BIG || outsize > ((size_t)1 << 31)) {
				return 0; // corrupt data
			}
			outsize *= 2;
		}
	}
	// Compress; if the output would not be smaller, fail so the optional filter is skipped.
	size_t outsize = nbytes;
	void *out = H5allocate_memory(outsize, 0);
	if (out == NULL) {
		return 0;
	}
	unsigned status = lzf_compress(*buf, (unsigned)nbytes, out, (unsigned)outsize);
	if (status == 0) {
		H5free_memory(out);
		return 0;
	}
	H5free_memory(*buf);
	*buf = out;
	*buf_size = outsize;
	return status;
}

static const H5Z_class2_t vh5_lzf_class = {
	H5Z_CLASS_T_VERS, (H5Z_filter_t)VH5_LZF_FILTER, 1, 1, "lzf", NULL, vh5_lzf_set_local, vh5_lzf_filter,
};

// vh5_quiet silences HDF5's automatic error printing on the calling thread: in a
// thread-safe libhdf5 the setting belongs to each thread's error stack, and Go runs HDF5
// calls on whichever OS thread the goroutine holding the lock is on.
static __thread int vh5_quiet_done;

void vh5_quiet(void) {
	if (!vh5_quiet_done && H5Eset_auto2(H5E_DEFAULT, NULL, NULL) >= 0) {
		vh5_quiet_done = 1;
	}
}

int vh5_init(void) {
	if (H5open() < 0) {
		return -1;
	}
	if (H5Eset_auto2(H5E_DEFAULT, NULL, NULL) < 0) {
		return -1;
	}
	if (H5Zfilter_avail(VH5_LZF_FILTER) <= 0) {
		if (H5Zregister(&vh5_lzf_class) < 0) {
			return -1;
		}
	}
	return 0;
}

// ---- types -------------------------------------------------------------------------------

int vh5_describe_type(hid_t type, vh5_type_info *out) {
	memset(out, 0, sizeof(*out));
	H5T_class_t cls = H5Tget_class(type);
	if (cls == H5T_NO_CLASS) {
		return -1;
	}
	out->cls = cls;
	out->size = H5Tget_size(type);
	switch (cls) {
	case H5T_INTEGER:
	case H5T_FLOAT:
	case H5T_BITFIELD:
		out->order = H5Tget_order(type);
		if (cls == H5T_INTEGER) {
			out->sign = H5Tget_sign(type);
		}
		break;
	case H5T_STRING:
		out->is_vlen_str = H5Tis_variable_str(type) > 0;
		out->cset = H5Tget_cset(type);
		break;
	case H5T_ENUM: {
		hid_t base = H5Tget_super(type);
		if (base < 0) {
			return -1;
		}
		out->order = H5Tget_order(base);
		out->sign = H5Tget_sign(base);
		H5Tclose(base);
		if (out->size == 1 && H5Tget_nmembers(type) == 2) {
			char *m0 = H5Tget_member_name(type, 0), *m1 = H5Tget_member_name(type, 1);
			signed char v0 = -1, v1 = -1;
			H5Tget_member_value(type, 0, &v0);
			H5Tget_member_value(type, 1, &v1);
			out->is_bool = m0 && m1 && strcmp(m0, "FALSE") == 0 && strcmp(m1, "TRUE") == 0 && v0 == 0 && v1 == 1;
			H5free_memory(m0);
			H5free_memory(m1);
		}
		break;
	}
	case H5T_COMPOUND:
		if (H5Tget_nmembers(type) == 2) {
			char *m0 = H5Tget_member_name(type, 0), *m1 = H5Tget_member_name(type, 1);
			hid_t t0 = H5Tget_member_type(type, 0), t1 = H5Tget_member_type(type, 1);
			if (m0 && m1 && t0 >= 0 && t1 >= 0 && strcmp(m0, "r") == 0 && strcmp(m1, "i") == 0 &&
			    H5Tget_class(t0) == H5T_FLOAT && H5Tequal(t0, t1) > 0 &&
			    H5Tget_member_offset(type, 1) == H5Tget_size(t0) && out->size == 2 * H5Tget_size(t0)) {
				out->is_complex = 1;
				out->complex_order = H5Tget_order(t0);
			}
			H5free_memory(m0);
			H5free_memory(m1);
			if (t0 >= 0) H5Tclose(t0);
			if (t1 >= 0) H5Tclose(t1);
		}
		break;
	case H5T_OPAQUE: {
		char *tag = H5Tget_tag(type);
		if (tag) {
			strncpy(out->tag, tag, sizeof(out->tag) - 1);
			H5free_memory(tag);
		}
		break;
	}
	default:
		break;
	}
	return 0;
}

// ---- datasets ----------------------------------------------------------------------------

int vh5_dataset_info_get(hid_t dset, vh5_dataset_info *out) {
	memset(out, 0, sizeof(*out));
	int rc = -1;
	hid_t space = H5Dget_space(dset);
	hid_t dcpl = -1;
	if (space < 0) {
		return -1;
	}
	int rank = H5Sget_simple_extent_ndims(space);
	if (rank < 0 || rank > 32) {
		goto done;
	}
	out->rank = rank;
	if (H5Sget_simple_extent_dims(space, out->dims, out->maxdims) < 0) {
		goto done;
	}
	out->space_class = H5Sget_simple_extent_type(space);
	if (out->space_class < 0) {
		goto done;
	}
	dcpl = H5Dget_create_plist(dset);
	if (dcpl < 0) {
		goto done;
	}
	out->layout = H5Pget_layout(dcpl);
	if (out->layout < 0) {
		goto done;
	}
	if (out->layout == H5D_CHUNKED && H5Pget_chunk(dcpl, 32, out->chunk) < 0) {
		goto done;
	}
	out->nfilters = H5Pget_nfilters(dcpl);
	if (out->nfilters < 0) {
		goto done;
	}
	H5D_fill_value_t fv;
	if (H5Pfill_value_defined(dcpl, &fv) < 0) {
		goto done;
	}
	out->fill_defined = fv;
	if (out->layout == H5D_VIRTUAL && H5Pget_virtual_count(dcpl, &out->virtual_count) < 0) {
		goto done;
	}
	out->external_count = H5Pget_external_count(dcpl);
	if (out->external_count < 0) {
		goto done;
	}
	rc = 0;
done:
	if (dcpl >= 0) H5Pclose(dcpl);
	H5Sclose(space);
	return rc;
}

int vh5_filter_get(hid_t dset, int idx, int *id, unsigned *flags, unsigned *cd, size_t *ncd, char *name, size_t name_cap) {
	hid_t dcpl = H5Dget_create_plist(dset);
	if (dcpl < 0) {
		return -1;
	}
	unsigned config;
	H5Z_filter_t f = H5Pget_filter2(dcpl, (unsigned)idx, flags, ncd, cd, name_cap, name, &config);
	H5Pclose(dcpl);
	if (f < 0) {
		return -1;
	}
	*id = (int)f;
	return 0;
}

int vh5_fill_value(hid_t dset, void *out) {
	hid_t dcpl = H5Dget_create_plist(dset);
	if (dcpl < 0) {
		return -1;
	}
	hid_t type = H5Dget_type(dset);
	if (type < 0) {
		H5Pclose(dcpl);
		return -1;
	}
	herr_t rc = H5Pget_fill_value(dcpl, type, out);
	H5Tclose(type);
	H5Pclose(dcpl);
	return rc < 0 ? -1 : 0;
}

// selection_box reads a selection that must be one regular block (or "all").
static int selection_box(hid_t space, int rank, hsize_t *start, hsize_t *extent) {
	H5S_sel_type t = H5Sget_select_type(space);
	if (t == H5S_SEL_ALL) {
		hsize_t dims[32];
		if (H5Sget_simple_extent_dims(space, dims, NULL) != rank) {
			return -1;
		}
		for (int i = 0; i < rank; i++) {
			start[i] = 0;
			extent[i] = dims[i];
		}
		return 0;
	}
	if (t != H5S_SEL_HYPERSLABS || H5Sis_regular_hyperslab(space) <= 0) {
		return -2;
	}
	hsize_t st[32], stride[32], count[32], block[32];
	if (H5Sget_regular_hyperslab(space, st, stride, count, block) < 0) {
		return -1;
	}
	for (int i = 0; i < rank; i++) {
		start[i] = st[i];
		if (count[i] == 1) {
			extent[i] = block[i];
		} else if (block[i] == 1 && stride[i] == 1) {
			extent[i] = count[i];
		} else if (stride[i] == block[i]) {
			extent[i] = count[i] * block[i];
		} else {
			return -2; // strided selection: not a versioned-hdf5 mapping
		}
	}
	return 0;
}

int vh5_mappings(hid_t dset, int rank, size_t n, hsize_t *vstart, hsize_t *vcount,
                 hsize_t *sstart, hsize_t *scount, char *names, size_t namecap, char *files, size_t filecap) {
	hid_t dcpl = H5Dget_create_plist(dset);
	if (dcpl < 0) {
		return -1;
	}
	int rc = 0;
	size_t npos = 0, fpos = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		hid_t vs = H5Pget_virtual_vspace(dcpl, i);
		hid_t ss = H5Pget_virtual_srcspace(dcpl, i);
		if (vs < 0 || ss < 0) {
			rc = -1;
		} else if (H5Sget_simple_extent_ndims(ss) != rank) {
			rc = -2;
		} else {
			rc = selection_box(vs, rank, vstart + i * rank, vcount + i * rank);
			if (rc == 0) {
				rc = selection_box(ss, rank, sstart + i * rank, scount + i * rank);
			}
		}
		if (vs >= 0) H5Sclose(vs);
		if (ss >= 0) H5Sclose(ss);
		if (rc != 0) {
			break;
		}
		ssize_t l = H5Pget_virtual_dsetname(dcpl, i, names + npos, namecap - npos);
		if (l < 0 || npos + (size_t)l + 1 > namecap) {
			rc = -3;
			break;
		}
		npos += (size_t)l + 1;
		l = H5Pget_virtual_filename(dcpl, i, files + fpos, filecap - fpos);
		if (l < 0 || fpos + (size_t)l + 1 > filecap) {
			rc = -3;
			break;
		}
		fpos += (size_t)l + 1;
	}
	H5Pclose(dcpl);
	return rc;
}

int vh5_read_box(hid_t dset, int rank, const hsize_t *start, const hsize_t *count,
                 const hsize_t *memdims, const hsize_t *memstart, void *mem) {
	int rc = -1;
	hid_t type = H5Dget_type(dset);
	hid_t fspace = H5Dget_space(dset);
	hid_t mspace = -1;
	if (type < 0 || fspace < 0) {
		goto done;
	}
	if (rank == 0) {
		// A scalar dataspace has no hyperslabs: its one element is the whole selection.
		if (H5Dread(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, mem) < 0) {
			goto done;
		}
		rc = 0;
		goto done;
	}
	mspace = H5Screate_simple(rank, memdims, NULL);
	if (mspace < 0) {
		goto done;
	}
	if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0) {
		goto done;
	}
	if (H5Sselect_hyperslab(mspace, H5S_SELECT_SET, memstart, NULL, count, NULL) < 0) {
		goto done;
	}
	if (H5Dread(dset, type, mspace, fspace, H5P_DEFAULT, mem) < 0) {
		goto done;
	}
	rc = 0;
done:
	if (mspace >= 0) H5Sclose(mspace);
	if (fspace >= 0) H5Sclose(fspace);
	if (type >= 0) H5Tclose(type);
	return rc;
}

// strings_io reads (write 0) or writes n C strings, in C order, of the box start/count of a
// variable-length string dataset, in the dataset's own character set: libhdf5 converts no
// string between ASCII and UTF-8. A failure's HDF5 error stack is kept for the caller.
static int strings_io(hid_t dset, int rank, const hsize_t *start, const hsize_t *count, void *buf, size_t n, int write) {
	int rc = -1;
	hid_t ftype = H5Dget_type(dset);
	hid_t mtype = H5Tcopy(H5T_C_S1);
	hid_t fspace = H5Dget_space(dset);
	hid_t mspace = -1;
	H5T_cset_t cset = ftype >= 0 ? H5Tget_cset(ftype) : H5T_CSET_ERROR;
	if (ftype < 0 || mtype < 0 || fspace < 0 || cset < 0 || H5Tset_size(mtype, H5T_VARIABLE) < 0 ||
	    H5Tset_cset(mtype, cset) < 0) {
		goto done;
	}
	hsize_t total = n;
	mspace = H5Screate_simple(1, &total, NULL);
	if (mspace < 0) {
		goto done;
	}
	if (rank > 0 && H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0) {
		goto done;
	}
	if (!write) {
		memset(buf, 0, n * sizeof(char *));
	}
	if ((write ? H5Dwrite(dset, mtype, mspace, fspace, H5P_DEFAULT, buf)
	           : H5Dread(dset, mtype, mspace, fspace, H5P_DEFAULT, buf)) < 0) {
		goto done;
	}
	rc = 0;
done:;
	hid_t es = rc < 0 ? H5Eget_current_stack() : -1;
	if (mspace >= 0) H5Sclose(mspace);
	if (fspace >= 0) H5Sclose(fspace);
	if (mtype >= 0) H5Tclose(mtype);
	if (ftype >= 0) H5Tclose(ftype);
	if (es >= 0) H5Eset_current_stack(es);
	return rc;
}

int vh5_read_strings(hid_t dset, int rank, const hsize_t *start, const hsize_t *count, char **out, size_t n) {
	return strings_io(dset, rank, start, count, out, n, 0);
}

// vh5_write_strings writes n C strings (C order) into the box start/count of a
// variable-length string dataset, in the dataset's own character set.
int vh5_write_strings(hid_t dset, int rank, const hsize_t *start, const hsize_t *count, const char **in, size_t n) {
	return strings_io(dset, rank, start, count, (void *)in, n, 1);
}

void vh5_free_strings(char **s, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (s[i]) H5free_memory(s[i]);
	}
}

// ---- attributes --------------------------------------------------------------------------

// Attribute access goes by (location, object path): it reads the object header without
// opening the object, which for a virtual dataset would mean parsing all its mappings.
int vh5_attr_count(hid_t loc, const char *path) {
	vh5_obj_info info;
	if (vh5_obj_info_by_name(loc, path, H5O_INFO_NUM_ATTRS, &info) < 0) {
		return -1;
	}
	return (int)info.num_attrs;
}

int vh5_attr_name(hid_t loc, const char *path, int idx, char *out, size_t cap) {
	ssize_t n = H5Aget_name_by_idx(loc, path, H5_INDEX_NAME, H5_ITER_INC, (hsize_t)idx, out, cap, H5P_DEFAULT);
	return n < 0 ? -1 : (int)n;
}

int vh5_attr_exists(hid_t loc, const char *path, const char *name) {
	return (int)H5Aexists_by_name(loc, path, name, H5P_DEFAULT);
}

// vh5_attr_read reads attribute name of obj. Integers come back as native int64/uint64,
// floats as native double, strings as C strings in *strs, everything else in the file's own
// type. data/strs are malloc'ed; the caller frees them.
int vh5_attr_read(hid_t loc, const char *path, const char *name, vh5_type_info *ti, int *rank, hsize_t *dims, void **data, size_t *nbytes, char ***strs, size_t *nstrs) {
	int rc = -1;
	hid_t attr = H5Aopen_by_name(loc, path, name, H5P_DEFAULT, H5P_DEFAULT);
	hid_t type = -1, space = -1, mtype = -1;
	*data = NULL;
	*strs = NULL;
	if (attr < 0) {
		return -1;
	}
	type = H5Aget_type(attr);
	space = H5Aget_space(attr);
	if (type < 0 || space < 0 || vh5_describe_type(type, ti) < 0) {
		goto done;
	}
	int r = H5Sget_simple_extent_ndims(space);
	if (r < 0 || r > 32) {
		goto done;
	}
	*rank = r;
	hssize_t n = H5Sget_simple_extent_npoints(space);
	if (n < 0) {
		goto done;
	}
	if (H5Sget_simple_extent_type(space) == H5S_NULL) {
		n = 0;
	} else if (r > 0 && H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
		goto done;
	}
	if (ti->cls == H5T_STRING) {
		char **s = calloc((size_t)n + 1, sizeof(char *));
		if (!s) goto done;
		*strs = s;
		*nstrs = (size_t)n;
		if (n == 0) { rc = 0; goto done; }
		if (ti->is_vlen_str) {
			mtype = H5Tcopy(H5T_C_S1);
			H5Tset_size(mtype, H5T_VARIABLE);
			H5Tset_cset(mtype, ti->cset);
			if (H5Aread(attr, mtype, s) < 0) goto done;
			for (hssize_t i = 0; i < n; i++) {  // move into malloc'ed copies
				char *c = strdup(s[i] ? s[i] : "");
				if (s[i]) H5free_memory(s[i]);
				s[i] = c;
			}
		} else {
			size_t sz = ti->size;
			char *buf = malloc(sz * (size_t)n);
			if (!buf) goto done;
			if (H5Aread(attr, type, buf) < 0) { free(buf); goto done; }
			for (hssize_t i = 0; i < n; i++) {
				s[i] = strndup(buf + i * sz, sz);
			}
			free(buf);
		}
		rc = 0;
		goto done;
	}
	if (ti->cls == H5T_VLEN || ti->cls == H5T_REFERENCE) {
		rc = -4; // no byte form to hand out
		goto done;
	}
	size_t esz = ti->size;
	if (ti->cls == H5T_INTEGER) {
		mtype = H5Tcopy(ti->sign == H5T_SGN_NONE ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64);
		esz = 8;
	} else if (ti->cls == H5T_FLOAT) {
		mtype = H5Tcopy(H5T_NATIVE_DOUBLE);
		esz = 8;
	} else {
		mtype = H5Tcopy(type);
	}
	if (mtype < 0) goto done;
	*nbytes = esz * (size_t)n;
	*data = malloc(*nbytes ? *nbytes : 1);
	if (!*data) goto done;
	if (n > 0 && H5Aread(attr, mtype, *data) < 0) {
		goto done;
	}
	rc = 0;
done:
	if (mtype >= 0) H5Tclose(mtype);
	if (space >= 0) H5Sclose(space);
	if (type >= 0) H5Tclose(type);
	H5Aclose(attr);
	return rc;
}

// ---- objects -----------------------------------------------------------------------------

// vh5_kind returns the H5O_type_t of the object at path (each component is checked with
// H5Lexists first, so a missing path is -2 rather than an error), or -1 on error.
int vh5_kind(hid_t loc, const char *path) {
	char buf[4096];
	size_t n = strlen(path);
	if (n >= sizeof(buf)) {
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] == '/' || buf[i] == '\0') {
			char c = buf[i];
			buf[i] = '\0';
			if (i > 1 || buf[0] != '/') {
				htri_t e = H5Lexists(loc, buf, H5P_DEFAULT);
				if (e < 0) return -1;
				if (e == 0) return -2;
			}
			buf[i] = c;
		}
	}
	vh5_obj_info info;
	if (vh5_obj_info_by_name(loc, path, H5O_INFO_BASIC, &info) < 0) {
		return -1;
	}
	return info.type;
}

// vh5_link_is_hard reports whether the link at path is a hard link (1), another kind (0).
int vh5_link_is_hard(hid_t loc, const char *path) {
	H5L_info_t info;
	if (H5Lget_info(loc, path, &info, H5P_DEFAULT) < 0) {
		return -1;
	}
	return info.type == H5L_TYPE_HARD ? 1 : 0;
}

// ---- chunk addresses ---------------------------------------------------------------------

// vh5_chunk_info looks up n chunks by their logical coordinates (n*rank values in coords;
// each must be a multiple of the chunk dims). For each: file address (HADDR_UNDEF when not
// allocated), stored size and filter mask. By-coordinate lookups go through the chunk
// index, unlike 1.10's by-position query, which walks the index on every call.
int vh5_chunk_info(hid_t dset, int rank, size_t n, const hsize_t *coords, haddr_t *addr, hsize_t *size, unsigned *mask) {
	for (size_t i = 0; i < n; i++) {
		addr[i] = HADDR_UNDEF;
		size[i] = 0;
		mask[i] = 0;
		if (H5Dget_chunk_info_by_coord(dset, coords + i * rank, &mask[i], &addr[i], &size[i]) < 0) {
			return -1;
		}
	}
	return 0;
}

// ---- writing -----------------------------------------------------------------------------

// attr_replace (re)creates attribute name of the object at path (relative to loc) by path:
// the object itself is never opened (opening a virtual dataset decodes all its mappings).
// On a group, one of the same type and extent is written in place: a sync then changes its
// bytes alone, not the layout of the group's header, which a crash could leave half
// changed. (libhdf5 1.10 writes an attribute opened by path only once its object is open,
// and opening a virtual dataset costs what attr_replace avoids.)
static int attr_replace(hid_t loc, const char *path, const char *name, hid_t type, hid_t space, const void *buf) {
	htri_t e = H5Aexists_by_name(loc, path, name, H5P_DEFAULT);
	vh5_obj_info info;
	if (e > 0 && vh5_obj_info_by_name(loc, path, H5O_INFO_BASIC, &info) >= 0 && info.type == H5O_TYPE_GROUP) {
		hid_t o = H5Oopen(loc, path, H5P_DEFAULT);
		hid_t a = o >= 0 ? H5Aopen(o, name, H5P_DEFAULT) : -1;
		hid_t t = a >= 0 ? H5Aget_type(a) : -1;
		hid_t s = a >= 0 ? H5Aget_space(a) : -1;
		int same = t >= 0 && s >= 0 && H5Tequal(t, type) > 0 && H5Sextent_equal(s, space) > 0;
		herr_t rc = same ? H5Awrite(a, type, buf) : 0;
		if (s >= 0) H5Sclose(s);
		if (t >= 0) H5Tclose(t);
		if (a >= 0) H5Aclose(a);
		if (o >= 0) H5Oclose(o);
		if (a < 0 || rc < 0) return -1;
		if (same) return 0;
	}
	if (e < 0 || (e > 0 && H5Adelete_by_name(loc, path, name, H5P_DEFAULT) < 0)) {
		return -1;
	}
	hid_t a = H5Acreate_by_name(loc, path, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (a < 0) {
		return -1;
	}
	herr_t rc = H5Awrite(a, type, buf);
	H5Aclose(a);
	return rc < 0 ? -1 : 0;
}

// vh5_attr_write_vstr writes a scalar variable-length UTF-8 string attribute (h5py's
// encoding of str attributes).
int vh5_attr_write_vstr(hid_t loc, const char *path, const char *name, const char *value) {
	hid_t t = H5Tcopy(H5T_C_S1);
	hid_t s = H5Screate(H5S_SCALAR);
	int rc = -1;
	if (t >= 0 && s >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
	    H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0) {
		rc = attr_replace(loc, path, name, t, s, &value);
	}
	if (s >= 0) H5Sclose(s);
	if (t >= 0) H5Tclose(t);
	return rc;
}

// vh5_attr_write_i64 writes a little-endian int64 attribute: scalar when n < 0, else 1-D of n.
int vh5_attr_write_i64(hid_t loc, const char *path, const char *name, const int64_t *v, int n) {
	hsize_t dims = n < 0 ? 1 : (hsize_t)n;
	hid_t s = n < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dims, NULL);
	if (s < 0) return -1;
	hid_t t = H5Tcopy(H5T_STD_I64LE);
	int rc = t < 0 ? -1 : 0;
	if (rc == 0) {
		// Write through a native memory type so the value converts on big-endian hosts.
		htri_t e = H5Aexists_by_name(loc, path, name, H5P_DEFAULT);
		if (e < 0 || (e > 0 && H5Adelete_by_name(loc, path, name, H5P_DEFAULT) < 0)) {
			rc = -1;
		} else {
			hid_t a = H5Acreate_by_name(loc, path, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
			rc = (a < 0 || H5Awrite(a, H5T_NATIVE_INT64, v) < 0) ? -1 : 0;
			if (a >= 0) H5Aclose(a);
		}
		H5Tclose(t);
	}
	H5Sclose(s);
	return rc;
}

// vh5_attr_write_bool writes h5py's bool: an enum of int8 with FALSE=0, TRUE=1.
int vh5_attr_write_bool(hid_t loc, const char *path, const char *name, int value) {
	hid_t t = H5Tenum_create(H5T_STD_I8LE);
	hid_t s = H5Screate(H5S_SCALAR);
	int rc = -1;
	signed char f = 0, tr = 1, v = value ? 1 : 0;
	if (t >= 0 && s >= 0 && H5Tenum_insert(t, "FALSE", &f) >= 0 && H5Tenum_insert(t, "TRUE", &tr) >= 0) {
		rc = attr_replace(loc, path, name, t, s, &v);
	}
	if (s >= 0) H5Sclose(s);
	if (t >= 0) H5Tclose(t);
	return rc;
}

// vh5_attrs_copy copies every attribute of the object at src (relative to sloc) onto the
// object at dst (relative to loc, in the same file or another), replacing same-named
// ones, without opening either object.
int vh5_attrs_copy(hid_t sloc, const char *src, hid_t loc, const char *dst) {
	vh5_obj_info info;
	if (vh5_obj_info_by_name(sloc, src, H5O_INFO_NUM_ATTRS, &info) < 0) {
		return -1;
	}
	for (hsize_t i = 0; i < info.num_attrs; i++) {
		hid_t a = H5Aopen_by_idx(sloc, src, H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT);
		hid_t t = a >= 0 ? H5Aget_type(a) : -1;
		hid_t s = a >= 0 ? H5Aget_space(a) : -1;
		ssize_t nlen = a >= 0 ? H5Aget_name(a, 0, NULL) : -1;
		char *name = nlen >= 0 ? malloc((size_t)nlen + 1) : NULL;
		void *buf = NULL;
		int rc = -1;
		if (t >= 0 && s >= 0 && name && H5Aget_name(a, (size_t)nlen + 1, name) >= 0) {
			hssize_t n = H5Sget_simple_extent_npoints(s);
			size_t sz = H5Tget_size(t);
			buf = calloc(n > 0 ? (size_t)n : 1, sz ? sz : 1);
			if (buf && (n == 0 || H5Aread(a, t, buf) >= 0)) {
				rc = attr_replace(loc, dst, name, t, s, buf);
				if (n > 0 && (H5Tdetect_class(t, H5T_VLEN) > 0 ||
				              (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0))) {
					vh5_reclaim(t, s, buf);
				}
			}
		}
		free(buf);
		free(name);
		if (s >= 0) H5Sclose(s);
		if (t >= 0) H5Tclose(t);
		if (a >= 0) H5Aclose(a);
		if (rc < 0) {
			return -1;
		}
	}
	return 0;
}

int vh5_set_extent(hid_t dset, int rank, const hsize_t *dims) {
	(void)rank;
	return H5Dset_extent(dset, dims) < 0 ? -1 : 0;
}

int vh5_write_box(hid_t dset, int rank, const hsize_t *start, const hsize_t *count,
                  const hsize_t *memdims, const hsize_t *memstart, const void *mem) {
	int rc = -1;
	hid_t type = H5Dget_type(dset);
	hid_t fspace = H5Dget_space(dset);
	hid_t mspace = H5Screate_simple(rank, memdims, NULL);
	if (type >= 0 && fspace >= 0 && mspace >= 0 &&
	    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
	    H5Sselect_hyperslab(mspace, H5S_SELECT_SET, memstart, NULL, count, NULL) >= 0 &&
	    H5Dwrite(dset, type, mspace, fspace, H5P_DEFAULT, mem) >= 0) {
		rc = 0;
	}
	if (mspace >= 0) H5Sclose(mspace);
	if (fspace >= 0) H5Sclose(fspace);
	if (type >= 0) H5Tclose(type);
	return rc;
}

int vh5_copy_object(hid_t file, const char *src, const char *dst) {
	return H5Ocopy(file, src, file, dst, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
}

int vh5_create_group(hid_t file, const char *path) {
	hid_t g = H5Gcreate2(file, path, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0) return -1;
	H5Gclose(g);
	return 0;
}

// vh5_create_virtual creates the dataset at path with the element type of typesrc (a
// dataset), shape dims (maxdims = dims) and, if fill is not NULL, that fill value, and sets
// *addr to its object header's address. With n > 0 it is a virtual dataset with one mapping
// per block: virtual [vstart, +count) from source dataset srcname in this file (".") at
// [sstart, +count) of a source space srcdims. With n == 0 it is a virtual dataset without
// mappings if virt is set (the caller writes the mapping list), else a contiguous dataset
// whose storage is never allocated: it reads as fill, the most portable form of "no
// mappings".
int vh5_create_virtual(hid_t file, const char *path, hid_t typesrc, int rank, const hsize_t *dims,
                       const void *fill, const char *srcname, const hsize_t *srcdims, size_t n,
                       const hsize_t *vstart, const hsize_t *count, const hsize_t *sstart, int virt,
                       haddr_t *addr) {
	int rc = -1;
	hid_t type = H5Dget_type(typesrc);
	hid_t space = H5Screate_simple(rank, dims, NULL);
	hid_t src = H5Screate_simple(rank, srcdims, NULL);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	hid_t d = -1;
	if (type < 0 || space < 0 || src < 0 || dcpl < 0) goto done;
	if (fill && H5Pset_fill_value(dcpl, type, fill) < 0) goto done;
	if (n == 0 && virt) {
		if (H5Pset_layout(dcpl, H5D_VIRTUAL) < 0) goto done;
	} else if (n == 0) {
		if (H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 || H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE) < 0) goto done;
	}
	// Creating the dataset copies every mapping's selections several times: libhdf5's free
	// lists, unbounded, hand the copies' blocks back instead of malloc and free (a quarter
	// of the time at 10k mappings); vh5_release_memory empties them.
	if (n > 0) H5set_free_list_limits(-1, -1, -1, -1, -1, -1);
	for (size_t i = 0; i < n; i++) {
		if (H5Sselect_hyperslab(space, H5S_SELECT_SET, vstart + i * rank, NULL, count + i * rank, NULL) < 0) goto done;
		if (H5Sselect_hyperslab(src, H5S_SELECT_SET, sstart + i * rank, NULL, count + i * rank, NULL) < 0) goto done;
		if (H5Pset_virtual(dcpl, space, ".", srcname, src) < 0) goto done;
	}
	if (H5Sselect_all(space) < 0) goto done;
	d = H5Dcreate2(file, path, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (d < 0 || vh5_object_addr(d, addr) < 0) goto done;
	rc = 0;
done:
	// Closing it evicts its object header from libhdf5's cache (the file is opened with
	// evict-on-close): the caller may then change the header on disk.
	if (d >= 0 && H5Dclose(d) < 0) rc = -1;
	if (dcpl >= 0) H5Pclose(dcpl);
	if (src >= 0) H5Sclose(src);
	if (space >= 0) H5Sclose(space);
	if (type >= 0) H5Tclose(type);
	return rc;
}

// vh5_release_memory empties libhdf5's free lists and hands the pages malloc then holds
// free back to the system (glibc only).
void vh5_release_memory(void) {
	H5garbage_collect();
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

// vh5_object_addr returns the file address of an object's header.
int vh5_object_addr(hid_t obj, haddr_t *addr) {
	vh5_obj_info info;
	if (vh5_obj_info_of(obj, H5O_INFO_BASIC, &info) < 0) {
		return -1;
	}
	*addr = info.addr;
	return 0;
}

int vh5_object_addr_by_name(hid_t loc, const char *path, haddr_t *addr) {
	vh5_obj_info info;
	if (vh5_obj_info_by_name(loc, path, H5O_INFO_BASIC, &info) < 0) {
		return -1;
	}
	*addr = info.addr;
	return 0;
}

// ---- new data groups and attributes, as h5py makes them ------------------------------------

// vh5_numpy_type returns the HDF5 type h5py makes for a numpy dtype of kind 'i', 'u', 'f',
// 'c' (compound {r, i} of two floats), 'b' (enum of int8 FALSE=0, TRUE=1) or 'S' (fixed
// null-padded ASCII, no encoding tag), of size bytes, big-endian if be (1-byte types are
// little-endian, as h5py makes them). The caller closes it.
hid_t vh5_numpy_type(int kind, int be, size_t size) {
	switch (kind) {
	case 'i':
	case 'u': {
		int u = kind == 'u';
		be = be && size > 1;
		switch (size) {
		case 1: return H5Tcopy(u ? H5T_STD_U8LE : H5T_STD_I8LE);
		case 2: return H5Tcopy(u ? (be ? H5T_STD_U16BE : H5T_STD_U16LE) : (be ? H5T_STD_I16BE : H5T_STD_I16LE));
		case 4: return H5Tcopy(u ? (be ? H5T_STD_U32BE : H5T_STD_U32LE) : (be ? H5T_STD_I32BE : H5T_STD_I32LE));
		case 8: return H5Tcopy(u ? (be ? H5T_STD_U64BE : H5T_STD_U64LE) : (be ? H5T_STD_I64BE : H5T_STD_I64LE));
		}
		return -1;
	}
	case 'f':
		if (size == 4) return H5Tcopy(be ? H5T_IEEE_F32BE : H5T_IEEE_F32LE);
		if (size == 8) return H5Tcopy(be ? H5T_IEEE_F64BE : H5T_IEEE_F64LE);
		return -1;
	case 'c': {
		hid_t part = vh5_numpy_type('f', be, size / 2);
		if (part < 0) return -1;
		hid_t t = H5Tcreate(H5T_COMPOUND, size);
		if (t >= 0 && (H5Tinsert(t, "r", 0, part) < 0 || H5Tinsert(t, "i", size / 2, part) < 0)) {
			H5Tclose(t);
			t = -1;
		}
		H5Tclose(part);
		return t;
	}
	case 'b': {
		hid_t t = H5Tenum_create(H5T_STD_I8LE);
		signed char f = 0, tr = 1;
		if (t >= 0 && (H5Tenum_insert(t, "FALSE", &f) < 0 || H5Tenum_insert(t, "TRUE", &tr) < 0)) {
			H5Tclose(t);
			t = -1;
		}
		return t;
	}
	case 'S': {
		hid_t t = H5Tcopy(H5T_C_S1);
		if (t >= 0 && (H5Tset_size(t, size) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
		               H5Tset_cset(t, H5T_CSET_ASCII) < 0)) {
			H5Tclose(t);
			t = -1;
		}
		return t;
	}
	case 'O':
	case 'a': {
		// h5py's string_dtype("utf-8") ('O') or ("ascii") ('a'): variable length, NUL-terminated.
		hid_t t = H5Tcopy(H5T_C_S1);
		if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 ||
		               H5Tset_cset(t, kind == 'O' ? H5T_CSET_UTF8 : H5T_CSET_ASCII) < 0)) {
			H5Tclose(t);
			t = -1;
		}
		return t;
	}
	}
	return -1;
}

// chunked_dcpl is h5py's creation property list for a chunked dataset: fill time ALLOC
// (h5py sets it on every chunked dataset), no modification times (h5py's track_times=False
// default), and the filters in h5py's order: shuffle, then deflate or LZF (optional, no
// client data: the filter's set_local fills it in).
static hid_t chunked_dcpl(int rank, const hsize_t *chunk, int gzip, int shuffle, int lzf) {
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (dcpl < 0) return -1;
	if (H5Pset_chunk(dcpl, rank, chunk) < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC) < 0 ||
	    (shuffle && H5Pset_shuffle(dcpl) < 0) || (gzip >= 0 && H5Pset_deflate(dcpl, (unsigned)gzip) < 0) ||
	    (lzf && H5Pset_filter(dcpl, VH5_LZF_FILTER, H5Z_FLAG_OPTIONAL, 0, NULL) < 0) ||
	    H5Pset_obj_track_times(dcpl, 0) < 0) {
		H5Pclose(dcpl);
		return -1;
	}
	return dcpl;
}

// hash_table_type is versioned-hdf5's row: {hash: u1[32], shape: <i8[2]}, 48 bytes.
static hid_t hash_table_type(void) {
	hsize_t nh = 32, ns = 2;
	hid_t h = H5Tarray_create2(H5T_STD_U8LE, 1, &nh);
	hid_t s = H5Tarray_create2(H5T_STD_I64LE, 1, &ns);
	hid_t t = h >= 0 && s >= 0 ? H5Tcreate(H5T_COMPOUND, 48) : -1;
	if (t >= 0 && (H5Tinsert(t, "hash", 0, h) < 0 || H5Tinsert(t, "shape", 32, s) < 0)) {
		H5Tclose(t);
		t = -1;
	}
	if (h >= 0) H5Tclose(h);
	if (s >= 0) H5Tclose(s);
	return t;
}

// first_missing returns a malloc'ed copy of the shortest prefix of path that does not
// exist (NULL with *rc 0 if all do, *rc -1 on error): what creating path adds, and what a
// failed creation must remove.
static char *first_missing(hid_t file, const char *path, int *rc) {
	size_t n = strlen(path);
	char *buf = malloc(n + 1);
	*rc = -1;
	if (!buf) return NULL;
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0') continue;
		char c = buf[i];
		buf[i] = '\0';
		htri_t e = H5Lexists(file, buf, H5P_DEFAULT);
		if (e < 0) {
			free(buf);
			return NULL;
		}
		if (e == 0) {
			*rc = 0;
			return buf;
		}
		buf[i] = c;
	}
	free(buf);
	*rc = 0;
	return NULL;
}

// vh5_create_data_group creates the data group at path (and its missing parents, as h5py's
// create_group does: one call with intermediate groups, link names in UTF-8 if utf8 else
// ASCII) with raw_data and hash_table as versioned-hdf5 creates them for a new dataset:
// raw_data of the numpy type (kind, be, size), dims (0, C1, ...), maxdims (unlimited, C1,
// ...), chunk C, fill value fill (size bytes), the filters, attribute chunks = C; hash_table
// of one zero row (unwritten: it reads as the default fill, as versioned-hdf5 leaves it),
// chunk 4096 rows, LZF, attribute largest_index = 0. A NULL fill leaves libhdf5's default
// (variable-length strings: h5py sets none). On failure whatever it created is unlinked again.
int vh5_create_data_group(hid_t file, const char *path, int kind, int be, size_t size, int rank,
                          const hsize_t *chunk, const int64_t *chunk64, const void *fill, int gzip,
                          int shuffle, int lzf, int utf8) {
	int rc = -1, mrc;
	char *added = first_missing(file, path, &mrc);
	if (mrc < 0) return -1;
	if (!added) return -2; // the group exists already
	hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
	hid_t g = -1, type = -1, space = -1, dcpl = -1, d = -1, htype = -1, hspace = -1, hdcpl = -1, hd = -1;
	hsize_t dims[32], maxdims[32];
	for (int i = 0; i < rank; i++) {
		dims[i] = i == 0 ? 0 : chunk[i];
		maxdims[i] = i == 0 ? H5S_UNLIMITED : chunk[i];
	}
	hsize_t hdims = 1, hmax = H5S_UNLIMITED, hchunk = 4096;
	int64_t zero = 0;
	if (lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0 ||
	    H5Pset_char_encoding(lcpl, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII) < 0) goto done;
	g = H5Gcreate2(file, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0) goto done;

	type = vh5_numpy_type(kind, be, size);
	space = H5Screate_simple(rank, dims, maxdims);
	dcpl = chunked_dcpl(rank, chunk, gzip, shuffle, lzf);
	if (type < 0 || space < 0 || dcpl < 0 || (fill && H5Pset_fill_value(dcpl, type, fill) < 0)) goto done;
	d = H5Dcreate2(g, "raw_data", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (d < 0 || vh5_attr_write_i64(d, ".", "chunks", chunk64, rank) < 0) goto done;

	htype = hash_table_type();
	hspace = H5Screate_simple(1, &hdims, &hmax);
	hdcpl = chunked_dcpl(1, &hchunk, -1, 0, 1);
	if (htype < 0 || hspace < 0 || hdcpl < 0) goto done;
	hd = H5Dcreate2(g, "hash_table", htype, hspace, H5P_DEFAULT, hdcpl, H5P_DEFAULT);
	if (hd < 0 || vh5_attr_write_i64(hd, ".", "largest_index", &zero, -1) < 0) goto done;
	rc = 0;
done:;
	// Every API call clears the error stack first: keep the failure's for the caller.
	hid_t es = rc < 0 ? H5Eget_current_stack() : -1;
	if (hd >= 0) H5Dclose(hd);
	if (hdcpl >= 0) H5Pclose(hdcpl);
	if (hspace >= 0) H5Sclose(hspace);
	if (htype >= 0) H5Tclose(htype);
	if (d >= 0) H5Dclose(d);
	if (dcpl >= 0) H5Pclose(dcpl);
	if (space >= 0) H5Sclose(space);
	if (type >= 0) H5Tclose(type);
	if (g >= 0) H5Gclose(g);
	if (lcpl >= 0) H5Pclose(lcpl);
	if (rc < 0 && H5Lexists(file, added, H5P_DEFAULT) > 0) {
		H5Ldelete(file, added, H5P_DEFAULT); // unlink what was added
	}
	if (es >= 0) H5Eset_current_stack(es);
	free(added);
	return rc;
}

// vh5_attr_write_value writes attribute name of the object at path as h5py writes a
// Python value: kind 'i' int64, 'f' float64, 'b' bool enum (buf: int8), 's' variable-length
// UTF-8 strings (buf: char *[]); rank 0 is a scalar. Like h5py it writes under a temporary
// name (tmp), then deletes the old attribute and renames the new one over it: a value
// that fails to write leaves the old one.
int vh5_attr_write_value(hid_t loc, const char *path, const char *name, const char *tmp, int kind,
                         int rank, const hsize_t *dims, const void *buf) {
	hid_t ftype = -1, mtype = -1, space = -1, a = -1;
	int rc = -1, made = 0;
	switch (kind) {
	case 'i':
		ftype = H5Tcopy(H5T_STD_I64LE);
		mtype = H5Tcopy(H5T_NATIVE_INT64);
		break;
	case 'f':
		ftype = H5Tcopy(H5T_IEEE_F64LE);
		mtype = H5Tcopy(H5T_NATIVE_DOUBLE);
		break;
	case 'b':
		ftype = vh5_numpy_type('b', 0, 1);
		mtype = H5Tcopy(ftype);
		break;
	case 's':
		ftype = H5Tcopy(H5T_C_S1);
		if (ftype >= 0 && (H5Tset_size(ftype, H5T_VARIABLE) < 0 || H5Tset_cset(ftype, H5T_CSET_UTF8) < 0 ||
		                   H5Tset_strpad(ftype, H5T_STR_NULLTERM) < 0)) goto done;
		mtype = H5Tcopy(ftype);
		break;
	default:
		return -1;
	}
	space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL);
	if (ftype < 0 || mtype < 0 || space < 0) goto done;
	a = H5Acreate_by_name(loc, path, tmp, ftype, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (a < 0) goto done;
	made = 1;
	if (H5Awrite(a, mtype, buf) < 0) goto done;
	H5Aclose(a);
	a = -1;
	htri_t e = H5Aexists_by_name(loc, path, name, H5P_DEFAULT);
	if (e < 0 || (e > 0 && H5Adelete_by_name(loc, path, name, H5P_DEFAULT) < 0)) goto done;
	if (H5Arename_by_name(loc, path, tmp, name, H5P_DEFAULT) < 0) goto done;
	rc = 0;
done:;
	// Every API call clears the error stack first: keep the failure's for the caller.
	hid_t es = rc < 0 ? H5Eget_current_stack() : -1;
	if (a >= 0) H5Aclose(a);
	if (rc < 0 && made) H5Adelete_by_name(loc, path, tmp, H5P_DEFAULT);
	if (space >= 0) H5Sclose(space);
	if (mtype >= 0) H5Tclose(mtype);
	if (ftype >= 0) H5Tclose(ftype);
	if (es >= 0) H5Eset_current_stack(es);
	return rc;
}

// vh5_attr_delete removes attribute name of the object at path: 0 done, 1 no such
// attribute, -1 error.
int vh5_attr_delete(hid_t loc, const char *path, const char *name) {
	htri_t e = H5Aexists_by_name(loc, path, name, H5P_DEFAULT);
	if (e < 0) return -1;
	if (e == 0) return 1;
	return H5Adelete_by_name(loc, path, name, H5P_DEFAULT) < 0 ? -1 : 0;
}
