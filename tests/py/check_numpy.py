"""Compares a mounted vh5fs tree with h5py's own read of the same HDF5 file.

usage: check_numpy.py FILE.h5 MOUNTPOINT

For every committed version and every dataset: numpy.fromfile and numpy.memmap(mode="r")
of versions/<v>/<path> (dtype and shape from h5py) must equal h5py reading the version's
virtual dataset; variable-length strings must equal the JSON-lines text form. Prints one
line per dataset checked and exits non-zero on the first mismatch.
"""
import json
import os
import sys

import h5py
import numpy as np


def datasets(group, prefix=""):
    for name, obj in group.items():
        if isinstance(obj, h5py.Group):
            yield from datasets(obj, prefix + name + "/")
        else:
            yield prefix + name, obj


def main(path, mnt):
    checked = 0
    with h5py.File(path, "r") as f:
        versions = f["_version_data/versions"]
        for vname, vgroup in versions.items():
            if vname == "__first_version__" or not vgroup.attrs.get("committed", True):
                continue
            for dpath, ds in datasets(vgroup):
                file = os.path.join(mnt, "versions", vname, dpath)
                want = ds[()]
                if h5py.check_string_dtype(ds.dtype) and h5py.check_string_dtype(ds.dtype).length is None:
                    with open(file, encoding="utf-8") as fh:
                        got = [json.loads(line) for line in fh]
                    expect = [s.decode("utf-8") if isinstance(s, bytes) else s for s in np.ravel(want)]
                    assert got == expect, f"{file}: text {got!r} != {expect!r}"
                else:
                    dtype = ds.dtype
                    fromfile = np.fromfile(file, dtype=dtype).reshape(ds.shape)
                    assert np.array_equal(fromfile, want, equal_nan=dtype.kind in "fc"), f"{file}: fromfile differs"
                    if fromfile.size:
                        mm = np.memmap(file, dtype=dtype, mode="r", shape=ds.shape)
                        assert np.array_equal(mm, want, equal_nan=dtype.kind in "fc"), f"{file}: memmap differs"
                        del mm
                    assert os.path.getsize(file) == want.nbytes, f"{file}: size"
                print(f"ok {vname}/{dpath} {ds.dtype} {ds.shape}")
                checked += 1
    assert checked > 0, "no dataset checked"
    print(f"{checked} datasets match h5py")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
