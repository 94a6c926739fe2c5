// Copying a file's objects into another file (copy.go).
#ifndef VH5_COPY_H
#define VH5_COPY_H

#include "hdf5.h"

hid_t vh5_create_like(hid_t src, const char *path);
int vh5_copy_group(hid_t src, hid_t dst, const char *path);
int vh5_copy_object_to(hid_t src, hid_t dst, const char *path);
int vh5_copy_link(hid_t src, hid_t dst, const char *path);
hid_t vh5_create_dataset_like(hid_t src, hid_t dst, const char *path);
int vh5_copy_chunks(hid_t sd, hid_t dd, int rank, const hsize_t *dims, const hsize_t *chunk,
                    hsize_t from, hsize_t count, hsize_t *bytes);

#endif
