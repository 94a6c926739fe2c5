"""Writes one small HDF5 file per superblock version, for swmr's superblock tests.

usage: /usr/bin/python3 make_superblocks.py DIR

v0.h5: the default file creation properties (what versioned-hdf5 writes).
v1.h5: a non-default indexed storage B-tree K, which only a version 1 superblock records.
v2.h5: the 1.8 file format as both bounds (libver v108).
v3.h5: libver="latest" (1.10 and later).
Each holds one small dataset, so its end-of-file address is past the superblock. expect.txt
holds the end-of-file address libhdf5 reports for each (its file size when closed).
"""
import os
import sys

import ctypes

import h5py
import numpy as np


def libhdf5():
    """The libhdf5 that h5py loaded (h5py does not wrap H5Pset_istore_k)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "/libhdf5" in path and ".so" in path and "_hl" not in path and "cpp" not in path:
                return ctypes.CDLL(path)
    raise SystemExit("libhdf5 not found among the loaded libraries")


def fill(f):
    f.create_dataset("x", data=np.arange(10, dtype="<i4"))


def main(out):
    sizes = {}
    path = os.path.join(out, "v0.h5")
    with h5py.File(path, "w") as f:
        fill(f)
    sizes["v0.h5"] = os.path.getsize(path)

    path = os.path.join(out, "v1.h5")
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    lib = libhdf5()
    lib.H5Pset_istore_k.argtypes = [ctypes.c_int64, ctypes.c_uint]
    if lib.H5Pset_istore_k(fcpl.id, 64) < 0:
        raise SystemExit("H5Pset_istore_k failed")
    fid = h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl)
    with h5py.File(fid) as f:
        fill(f)
    sizes["v1.h5"] = os.path.getsize(path)

    for name, libver in (("v2.h5", ("v108", "v108")), ("v3.h5", "latest")):
        path = os.path.join(out, name)
        with h5py.File(path, "w", libver=libver) as f:
            fill(f)
        sizes[name] = os.path.getsize(path)

    with open(os.path.join(out, "expect.txt"), "w") as f:
        for name, size in sorted(sizes.items()):
            f.write(f"{name} {size}\n")


if __name__ == "__main__":
    main(sys.argv[1])
