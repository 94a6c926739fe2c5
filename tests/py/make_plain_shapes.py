"""Writes plain_shapes.h5 (and its external raw-data file ext.bin) into the directory given:
one plain (unversioned) dataset of each dataspace and layout h5py can write.

    /usr/bin/python3 make_plain_shapes.py DIR
"""
import os
import sys

import h5py
import numpy as np

os.chdir(sys.argv[1])  # external storage names ext.bin relative to the writer's directory
with h5py.File("plain_shapes.h5", "w") as f:
    f["scalar_f8"] = 2.5
    f.create_dataset("scalar_i4be", data=np.array(-7, dtype=">i4"))
    f.create_dataset("scalar_bytes", data=np.bytes_(b"hi!"))
    f["scalar_str"] = "héllo"  # a variable-length string: served as one JSON line
    f.create_dataset("scalar_compound", data=np.array((1, 2.0), dtype=[("a", "<u2"), ("b", "<f4")]))
    f.create_dataset("null", data=h5py.Empty("<f8"))
    f.create_dataset("zero_length", shape=(0,), dtype="<i2")
    f.create_dataset("zero_rows_chunked", shape=(0, 3), maxshape=(None, 3), chunks=(4, 3), dtype="<f4")
    f.create_dataset("contiguous", data=np.arange(12, dtype="<f8").reshape(3, 4))
    # Compact layout: the data lives in the object header. h5py's high-level API has no
    # switch for it; the low-level one does.
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    d = h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_U16BE, h5py.h5s.create_simple((2, 3)), dcpl)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(6, dtype=">u2").reshape(2, 3))
    f.create_dataset("external", shape=(4,), dtype="<i4", external=[("ext.bin", 0, 16)])
    f["external"][:] = np.arange(4)
