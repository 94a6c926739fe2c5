"""Writes an HDF5 file with libver="latest" (data layout message version 4) holding one
dataset per chunk index type, for h5meta's tests.

usage: /usr/bin/python3 make_latest.py OUT.h5 [--small]

--small leaves out the datasets with thousands of chunks (for fuzzing seeds).
"""
import sys

import h5py
import numpy as np


def big(f):
    """Datasets with thousands of chunks: paged fixed arrays, extensible arrays with super
    blocks and paged data blocks."""
    d = f.create_dataset("fixed_paged", shape=(5000,), chunks=(1,), dtype="<i2")
    d[::3] = 7
    d = f.create_dataset("fixed_sparse", shape=(10000,), chunks=(1,), dtype="<i1")
    d[5000:5003] = 1
    d = f.create_dataset("ext", shape=(3000, 4), maxshape=(None, 4), chunks=(1, 4), dtype="<f8")
    d[::2] = 1.5
    d[2999] = 2
    d = f.create_dataset("ext_big", shape=(20000,), maxshape=(None,), chunks=(1,), dtype="<i1")
    d[::7] = 1
    d[15000:15010] = 2
    d = f.create_dataset("ext_big_gz", shape=(9000,), maxshape=(None,), chunks=(1,), dtype="<i8", compression="gzip")
    d[::5] = 3
    d = f.create_dataset("ext_sparse", shape=(30000,), maxshape=(None,), chunks=(1,), dtype="<i1")
    d[29990:] = 1
    d[7000] = 1


def main():
    small = "--small" in sys.argv[2:]
    with h5py.File(sys.argv[1], "w", libver="latest") as f:
        f.create_dataset("single", data=np.arange(12.0).reshape(4, 3), chunks=(4, 3))
        f.create_dataset("single_gz", data=np.arange(12.0).reshape(4, 3), chunks=(4, 3), compression="gzip")
        f.create_dataset("single_empty", shape=(4, 3), chunks=(4, 3))
        d = f.create_dataset("fixed", shape=(100, 7), chunks=(8, 3), dtype="<i4")
        d[:50] = 1
        d = f.create_dataset("fixed_gz", shape=(100, 7), chunks=(8, 3), dtype="<i4", compression="gzip", shuffle=True)
        d[20:] = np.arange(80 * 7).reshape(80, 7)
        d = f.create_dataset("fixed_resizable", shape=(10,), maxshape=(20,), chunks=(2,), dtype="<i1")
        d[:] = 1
        d = f.create_dataset("ext_small", shape=(5, 4), maxshape=(None, 4), chunks=(2, 4), dtype="<f8")
        d[:] = 3
        d = f.create_dataset("ext_gz", shape=(700,), maxshape=(None,), chunks=(2,), dtype="<f8", compression="gzip")
        d[1::3] = np.arange(1, 700, 3)
        d = f.create_dataset("ext_dim1", shape=(4, 10), maxshape=(4, None), chunks=(2, 3), dtype="<i1")
        d[:] = 1
        f.create_dataset("ext_empty", shape=(0,), maxshape=(None,), chunks=(2,), dtype="<f8")
        if not small:
            big(f)
        d = f.create_dataset("bt2", shape=(10, 10), maxshape=(None, None), chunks=(3, 3), dtype="<f4")
        d[:] = 1
        # Implicit index: early allocation, no filters.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((2, 2))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        sp = h5py.h5s.create_simple((5, 4))
        h5py.h5d.create(f.id, b"implicit", h5py.h5t.NATIVE_INT32, sp, dcpl=dcpl)
        layout = h5py.VirtualLayout(shape=(12,), dtype="<f8")
        src = h5py.VirtualSource(".", "/single", shape=(4, 3))
        layout[0:3] = src[0, :]
        layout[6:9] = src[2, :]
        f.create_virtual_dataset("vds", layout, fillvalue=-1)
        f.create_dataset("contig", data=np.arange(5))


if __name__ == "__main__":
    main()
