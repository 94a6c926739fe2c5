"""Prints, for every committed version of a versioned-hdf5 file, as h5py reads it:
VERSION PREV DATASET SHA256(C-order bytes) SHAPE — one line per dataset (numeric only)."""
import hashlib
import sys

import h5py
import numpy as np


def walk(group, prefix=""):
    for name, obj in group.items():
        if isinstance(obj, h5py.Group):
            yield from walk(obj, prefix + name + "/")
        else:
            yield prefix + name, obj


with h5py.File(sys.argv[1], "r") as f:
    vs = f["_version_data/versions"]
    print("current", vs.attrs["current_version"])
    for v, g in vs.items():
        if v == "__first_version__" or not g.attrs.get("committed", True):
            continue
        for p, ds in walk(g):
            if h5py.check_string_dtype(ds.dtype):
                continue
            a = np.ascontiguousarray(ds[()])
            shape = "x".join(map(str, ds.shape))
            print(v, g.attrs["prev_version"], p, hashlib.sha256(a.tobytes()).hexdigest(), shape)
