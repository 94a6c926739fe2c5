"""Writes the extra test files in extra/ (run from this directory with Debian's python3-h5py).

The reference fixtures cover versioned-hdf5's own files; these cover what vh5fs must refuse
or serve as a plain tree: unsupported data_version values and a plain (unversioned) file.
"""
import shutil

import h5py
import numpy as np

for dv in (2, 3, 5):
    path = f"extra/data_version_{dv}.h5"
    shutil.copy("fixtures/basic_1d.h5", path)
    with h5py.File(path, "r+") as f:
        f["_version_data/versions"].attrs["data_version"] = np.int64(dv)

with h5py.File("extra/plain.h5", "w") as f:
    f.attrs["title"] = "plain file"
    f["contiguous"] = np.arange(100, dtype="<i4")
    f.create_dataset("grid/gzip", data=np.arange(35.0).reshape(5, 7), chunks=(2, 3),
                     compression="gzip", compression_opts=4, shuffle=True)
    f.create_dataset("grid/big_endian", data=np.arange(12, dtype=">u2").reshape(3, 4))
    f.create_dataset("grid/sparse", shape=(10,), chunks=(4,), dtype="<f8", fillvalue=2.5)
    f.create_dataset("names", data=np.array(["a", "bb", "é"], dtype=object),
                     dtype=h5py.string_dtype())
    f["grid"].attrs["units"] = "m"
    f["versions"] = np.zeros(3, dtype="u1")  # shadowed by nothing: this file is not versioned
