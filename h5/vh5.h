// Small C helpers for package h5: things gonum.org/v1/hdf5 does not cover, each done in
// one call so that Go crosses into C (and holds the HDF5 lock) as briefly as possible.
#ifndef VH5_H
#define VH5_H

#include <stdint.h>
#include <stdlib.h>
#include "hdf5.h"

#define VH5_LZF_FILTER 32000

// ---- libhdf5 1.10 through 2.x --------------------------------------------------------------
// vh5fs builds against the API its headers give, with no -DH5_USE_1xx_API switch: the calls
// whose signatures or structs changed between releases go through these, picked by the
// headers' version (H5_VERSION_GE), and nothing else in the C names a versioned call.

// vh5_obj_info is what vh5fs reads of an object's header: H5O_info_t up to 1.10, whose
// address 1.12 replaced with a VOL token (H5O_info2_t).
typedef struct {
	int type;           // H5O_type_t
	hsize_t num_attrs;  // with H5O_INFO_NUM_ATTRS
	haddr_t addr;       // with H5O_INFO_BASIC
} vh5_obj_info;

int vh5_obj_info_by_name(hid_t loc, const char *path, unsigned fields, vh5_obj_info *out);
int vh5_obj_info_of(hid_t obj, unsigned fields, vh5_obj_info *out);

// vh5_read_chunk_raw reads one stored chunk as it is (its filtered bytes and filter mask)
// into buf of cap bytes: H5Dread_chunk, which 2.0 gave the buffer's size (H5Dread_chunk2).
int vh5_read_chunk_raw(hid_t dset, const hsize_t *offset, uint32_t *mask, void *buf, size_t cap);

// vh5_reclaim frees the variable-length parts of buf, elements of type t in space s:
// H5Dvlen_reclaim up to 1.10, H5Treclaim from 1.12.
int vh5_reclaim(hid_t t, hid_t s, void *buf);

// vh5_header_version is the version of the headers vh5fs was compiled against ("1.14.6").
const char *vh5_header_version(void);

// vh5_init silences HDF5's automatic error printing and registers the LZF filter.
int vh5_init(void);

// vh5_quiet silences HDF5's automatic error printing on the calling thread (once per thread).
void vh5_quiet(void);

// vh5_error_message writes the current thread's HDF5 error stack, outermost first, into out.
void vh5_error_message(char *out, size_t cap);

// vh5_type_info describes a datatype in a flat struct.
typedef struct {
	int cls;          // H5T_class_t
	size_t size;      // bytes per element in the file
	int order;        // H5T_order_t (integers, floats)
	int sign;         // H5T_sign_t (integers)
	int is_vlen_str;  // variable-length string
	int cset;         // H5T_cset_t for strings
	int is_bool;      // h5py bool enum (int8 FALSE=0, TRUE=1)
	int is_complex;   // compound {r, i} of two equal floats
	int complex_order;
	char tag[64];     // opaque tag (h5py stores "NUMPY:<M8[ns]" style tags)
} vh5_type_info;

int vh5_describe_type(hid_t type, vh5_type_info *out);

// vh5_dataset_info reads shape, layout, chunk dims, filters and fill value of a dataset.
typedef struct {
	int rank;
	hsize_t dims[32];
	hsize_t maxdims[32];
	int layout;         // H5D_layout_t
	hsize_t chunk[32];
	int nfilters;
	int fill_defined;   // H5D_fill_value_t
	size_t virtual_count;
	int space_class;    // H5S_class_t: H5S_SCALAR, H5S_SIMPLE or H5S_NULL
	int external_count; // files of external storage (H5Pset_external), 0 if none
} vh5_dataset_info;

int vh5_dataset_info_get(hid_t dset, vh5_dataset_info *out);
int vh5_filter_get(hid_t dset, int idx, int *id, unsigned *flags, unsigned *cd, size_t *ncd, char *name, size_t name_cap);
int vh5_fill_value(hid_t dset, void *out);

// vh5_mappings fills, for each of n mappings, rank starts and extents of the virtual and
// source selections, and the source dataset name (into names, NUL-separated, namecap total).
int vh5_mappings(hid_t dset, int rank, size_t n, hsize_t *vstart, hsize_t *vcount,
                 hsize_t *sstart, hsize_t *scount, char *names, size_t namecap, char *files, size_t filecap);

// vh5_read_box reads the file hyperslab start/count of dset into mem, a buffer of rank dims
// memdims, at memstart, in the dataset's own file type (no conversion). Rank 0 reads the
// one element of a scalar dataset.
int vh5_read_box(hid_t dset, int rank, const hsize_t *start, const hsize_t *count,
                 const hsize_t *memdims, const hsize_t *memstart, void *mem);

// vh5_read_strings reads a box of a variable-length string dataset as C strings (caller
// frees with vh5_free_strings).
int vh5_read_strings(hid_t dset, int rank, const hsize_t *start, const hsize_t *count, char **out, size_t n);
// vh5_write_strings writes n C strings (C order) into a box of a variable-length string
// dataset, in the dataset's character set.
int vh5_write_strings(hid_t dset, int rank, const hsize_t *start, const hsize_t *count, const char **in, size_t n);
void vh5_free_strings(char **s, size_t n);

// Attributes.
int vh5_attr_count(hid_t loc, const char *path);
int vh5_attr_name(hid_t loc, const char *path, int idx, char *out, size_t cap);
int vh5_attr_exists(hid_t loc, const char *path, const char *name);
int vh5_attr_read(hid_t loc, const char *path, const char *name, vh5_type_info *ti, int *rank, hsize_t *dims, void **data, size_t *nbytes, char ***strs, size_t *nstrs);


int vh5_kind(hid_t loc, const char *path);
int vh5_link_is_hard(hid_t loc, const char *path);

int vh5_chunk_info(hid_t dset, int rank, size_t n, const hsize_t *coords, haddr_t *addr, hsize_t *size, unsigned *mask);

int vh5_attr_write_vstr(hid_t loc, const char *path, const char *name, const char *value);
int vh5_attr_write_i64(hid_t loc, const char *path, const char *name, const int64_t *v, int n);
int vh5_attr_write_bool(hid_t loc, const char *path, const char *name, int value);
int vh5_attrs_copy(hid_t sloc, const char *src, hid_t loc, const char *dst);
int vh5_set_extent(hid_t dset, int rank, const hsize_t *dims);
int vh5_write_box(hid_t dset, int rank, const hsize_t *start, const hsize_t *count,
                  const hsize_t *memdims, const hsize_t *memstart, const void *mem);
int vh5_copy_object(hid_t file, const char *src, const char *dst);
int vh5_create_group(hid_t file, const char *path);
int vh5_create_virtual(hid_t file, const char *path, hid_t typesrc, int rank, const hsize_t *dims,
                       const void *fill, const char *srcname, const hsize_t *srcdims, size_t n,
                       const hsize_t *vstart, const hsize_t *count, const hsize_t *sstart, int virt,
                       haddr_t *addr);

// New data groups and attributes, as h5py makes them (see vh5.c).
hid_t vh5_numpy_type(int kind, int be, size_t size);
int vh5_create_data_group(hid_t file, const char *path, int kind, int be, size_t size, int rank,
                          const hsize_t *chunk, const int64_t *chunk64, const void *fill, int gzip,
                          int shuffle, int lzf, int utf8);
int vh5_attr_write_value(hid_t loc, const char *path, const char *name, const char *tmp, int kind,
                         int rank, const hsize_t *dims, const void *buf);
int vh5_attr_delete(hid_t loc, const char *path, const char *name);

void vh5_release_memory(void);

int vh5_object_addr(hid_t obj, haddr_t *addr);

int vh5_object_addr_by_name(hid_t loc, const char *path, haddr_t *addr);

// vh5j_*.c: the redo-journal file driver for read-write opens (the crash contract at the top
// of vh5j_sync.c).
typedef struct vh5j_sync vh5j_sync;
enum {  // a sync's steps, in order
	VH5J_TAIL = 1,
	VH5J_FSYNC,
	VH5J_JOURNAL,
	VH5J_JSYNC,
	VH5J_DIRSYNC,  // the commit point
	VH5J_GUARD,    // only in a guarded sync
	VH5J_APPLY,    // the body
	VH5J_BSYNC,    // only with a publish part
	VH5J_PUBLISH,  // only with a publish part
	VH5J_ASYNC,
	VH5J_UNGUARD,  // only in a guarded sync
	VH5J_REMOVE,
	VH5J_DONE,
};
enum {  // vh5j_recover's outcomes
	VH5J_NONE = 0,
	VH5J_INCOMPLETE,
	VH5J_REPLAYED,
	VH5J_APPLIED,
	VH5J_CHANGED,
	VH5J_LEGACY,
	VH5J_ROLLED_BACK,
};
hid_t vh5j_open(const char *path, int rw);
int vh5j_set_fapl(hid_t fapl);
int vh5j_pending(const char *path);
int vh5j_recover(const char *path, int legacy);
int vh5j_discard(const char *path);
vh5j_sync *vh5j_sync_begin_file(hid_t file);
int vh5j_step(vh5j_sync *s);
int vh5j_committed(const vh5j_sync *s);
int vh5j_step_next(const vh5j_sync *s);
void vh5j_sync_end(vh5j_sync *s);
void vh5j_sync_free(vh5j_sync *s);
void vh5j_set_fault(vh5j_sync *s, int step, int crash);
int vh5j_fsync(hid_t file);
int vh5j_dup_fd(hid_t file);
int vh5j_fd(hid_t file);
int vh5j_failed(hid_t file);
int vh5j_abandon(hid_t file);
int vh5j_cancel(hid_t file);
int vh5j_mark_publish(hid_t file);
int vh5j_guard(hid_t file);
int vh5j_kill_at(hid_t file, unsigned long n);
int vh5j_set_hold_budget(hid_t file, size_t budget, size_t piece);
uint64_t vh5j_spilled(hid_t file, size_t *held);
void vh5j_set_recover_piece(size_t piece);
haddr_t vh5j_eoa(hid_t file);
int vh5j_read(hid_t file, haddr_t addr, size_t n, void *buf);
int vh5j_write(hid_t file, haddr_t addr, size_t n, const void *buf);
int vh5j_unheld(hid_t file, haddr_t addr, size_t n);
int vh5j_hold(hid_t file, haddr_t addr, size_t n, const void *buf, size_t *at);
int vh5j_retract(hid_t file, size_t at, haddr_t addr, size_t n);
int vh5j_reserve(hid_t file, hsize_t n, haddr_t *addr);
#endif
