"""Writes the modify goldens of variable-length string datasets in fixtures/modify/ with
versioned-hdf5 itself (issue 50, item 4), in make_modify.py's format.

Run from this directory with a versioned-hdf5 importable (the files committed here were
written by master 5389a78 on h5py 3.16 / HDF5 1.14.6, default libver, so that Debian's
HDF5 1.10 reads them):
    PYTHONPATH=/root/.cache/vh5fs/py114 /usr/bin/python3 make_modify_strings.py

Manifests are make_lifecycle_strings.py's (vlen strings as "dtype": "vlen-str", the values
as text); make_modify.py writes its goldens when imported, so nothing is taken from it.
"""
import json
import shutil
import sys
from datetime import datetime, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File
from versioned_hdf5.replay import modify_metadata

from make_lifecycle_strings import jsonable, manifest


OUT = "fixtures/modify"
ONLY = sys.argv[1:]
UTF8 = h5py.string_dtype("utf-8")
ASCII = h5py.string_dtype("ascii")


def ts(day):
    return datetime(2024, 1, day, tzinfo=timezone.utc)


def golden(name, description, build, dataset, kwargs, args):
    if ONLY and name not in ONLY:
        return
    before, after = f"{OUT}/{name}-before.h5", f"{OUT}/{name}-after.h5"
    with h5py.File(before, "w") as f:
        build(VersionedHDF5File(f))
    for attempt in range(50):
        shutil.copy(before, after)
        with h5py.File(after, "r+") as f:
            modify_metadata(f, dataset, **kwargs)
        if check(after, dataset):
            break
    else:
        raise SystemExit(f"{name}: modify_metadata never left every version readable")
    manifest(before)
    manifest(after)
    call = {"description": description, "dataset": dataset,
            "kwargs": {k: jsonable(v) for k, v in kwargs.items()}, "args": args}
    with open(f"{OUT}/{name}.modify.json", "w") as w:
        json.dump(call, w, indent=1)
        w.write("\n")


def check(path, dataset):
    """Whether every version's dataset reads whole: modify_metadata on h5py 3.16 / HDF5
    1.14.6 leaves, at random, some versions' virtual datasets of strings with a fill value
    naming a global heap object that is not there (h5py: "bad heap index"); the data,
    slots and hash rows are the same each time, so the generator retries."""
    try:
        with h5py.File(path, "r") as f:
            vg = f["_version_data/versions"]
            for v in vg:
                if v != "__first_version__" and dataset in vg[v]:
                    d = vg[v][dataset]
                    d.id.get_create_plist()
                    d[()]
    except RuntimeError:
        return False
    return True


def utf8_1d(vf):
    # names: UTF-8, chunks (4,): v2 rewrites chunk 0, v3 grows it by an edge chunk, v4
    # drops it, v5 (on v3) sets chunk 0 back to v1's values.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        n = sv.create_dataset("names", data=np.array(["ann", "bob", "été", "", "zoë", "x" * 40, "g", "h", "i", "j"],
                                                     dtype=object), dtype=UTF8, chunks=(4,))
        n.attrs["units"] = "people"
        sv.create_dataset("y", data=np.arange(10), chunks=(5,))
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["names"][0:4] = np.array(["Ann", "Bob", "Été", "dan"], dtype=object)
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["names"].resize((13,))
        sv["names"][10:13] = np.array(["fay", "gus", "ünï"], dtype=object)
    with vf.stage_version("v4", timestamp=ts(4)) as sv:
        del sv["names"]
    with vf.stage_version("v5", "v3", timestamp=ts(5)) as sv:
        sv["names"][0:4] = np.array(["ann", "bob", "été", ""], dtype=object)


def ascii_2d(vf):
    # tags: ASCII bytes (7, 3), chunks (2, 2); v2 changes one element, v3 shrinks to 5 rows.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        data = np.array([[f"r{i}c{j}".encode() for j in range(3)] for i in range(7)], dtype=object)
        sv.create_dataset("tags", data=data, dtype=ASCII, chunks=(2, 2))
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["tags"][3, 1] = b"changed"
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["tags"].resize((5, 3))


def shared(vf):
    # labels: UTF-8 (12,), chunks (3,), repeated values (equal chunks within a version),
    # three versions sharing most chunks.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        sv.create_dataset("labels", data=np.array(["a", "b", "c"] * 4, dtype=object), dtype=UTF8, chunks=(3,))
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["labels"][11] = "z"
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["labels"][0] = ""


if __name__ == "__main__":
    golden("golden_modify_str_1d", "rechunk a UTF-8 string dataset (4,) -> (3,) over five versions",
           utf8_1d, "names", {"chunks": (3,)}, ["--chunks", "3"])
    golden("golden_modify_str_2d", "ASCII strings 2-D: no filters -> gzip (level 4), chunks (2, 2) -> (3, 2); a shrunk shape",
           ascii_2d, "tags", {"compression": "gzip", "chunks": (3, 2)}, ["--compression", "gzip", "--chunks", "3,2"])
    golden("golden_modify_str_shared", "UTF-8 strings with equal chunks within and between versions: (3,) -> (6,)",
           shared, "labels", {"chunks": (6,)}, ["--chunks", "6"])
