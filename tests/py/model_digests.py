"""Reads every committed version of a versioned-hdf5 file with h5py, as versioned-hdf5
reads it (the version's dataset under _version_data/versions/<name>/), and prints one JSON
object per line: {"current": NAME} first, then for each version and dataset
{"version", "prev", "path", "dtype", "shape", "sha256"} — the SHA-256 of the C-order bytes.
Unlike version_digests.py it covers fixed-length string and compound datasets.

usage: model_digests.py FILE.h5
"""
import hashlib
import json
import sys

import h5py
import numpy as np


def walk(group, prefix=""):
    for name, obj in group.items():
        if isinstance(obj, h5py.Group):
            yield from walk(obj, prefix + name + "/")
        else:
            yield prefix + name, obj


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


with h5py.File(sys.argv[1], "r") as f:
    vs = f["_version_data/versions"]
    print(json.dumps({"current": text(vs.attrs["current_version"])}))
    for v, g in vs.items():
        if v == "__first_version__" or not g.attrs.get("committed", True):
            continue
        for p, ds in walk(g):
            if h5py.check_vlen_dtype(ds.dtype) is not None:
                continue
            a = np.ascontiguousarray(ds[()])
            print(json.dumps({
                "version": v,
                "prev": text(g.attrs["prev_version"]),
                "path": p,
                "dtype": ds.dtype.str,
                "shape": list(ds.shape),
                "sha256": hashlib.sha256(a.tobytes()).hexdigest(),
            }))
