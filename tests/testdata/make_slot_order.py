"""Writes the slot-order goldens in fixtures/ with versioned-hdf5 itself (issue 31).

Run from this directory with Debian's python3-h5py and a versioned-hdf5 (master after
v2.4.0, data_version 4) importable; the files committed here were written by master
5389a78 on h5py 3.7 / HDF5 1.10.8, the versions the other fixtures were made with.

Each golden is a dataset whose chunks lie in raw_data out of grid order (an earlier
version rewrote a chunk, whose slot then lies after the others'), then ONE assignment
that changes several of its chunks. versioned-hdf5 appends the new chunks in the order
its StagedChangesArray stages them: chunks the assignment covers in part before chunks it
covers whole, and within each group those on the fill slab (in grid order) before those
loaded from raw_data, sorted by their slot. vh5fs must append them in the same order.

Writes, per golden NAME: NAME-before.h5, NAME-after.h5, their manifests (NAME-*.json, the
format of fixtures/README.md) and NAME.edit.json (the assignment as numpy_edits and as
pwrites on the dataset's C-order byte stream, byte_ops).
"""
import hashlib
import json
import shutil
from datetime import datetime, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File

OUT = "fixtures"


def ts(day, hour=0):
    return datetime(2024, 1, day, hour, tzinfo=timezone.utc)


GOLDEN_TS = datetime(2024, 2, 11, 16, tzinfo=timezone.utc)


def jsonable(x):
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and x != x:
        return "NaN"
    return x


def manifest(path):
    """The fixture manifest of path (fixtures/README.md)."""
    out = {"file": path.split("/")[-1]}
    with h5py.File(path, "r") as f:
        vg = f["_version_data/versions"]
        out["current_version"] = vg.attrs["current_version"]
        out["data_version"] = int(vg.attrs["data_version"])
        versions = []
        for name in sorted(vg):
            if name == "__first_version__":
                continue
            g = vg[name]
            v = {
                "name": name,
                "prev_version": g.attrs["prev_version"],
                "timestamp": g.attrs["timestamp"],
                "attrs": {k: jsonable(g.attrs[k]) for k in sorted(g.attrs)
                          if k not in ("prev_version", "committed", "timestamp")},
                "groups": {},
                "datasets": {},
            }

            def visit(p, obj):
                if isinstance(obj, h5py.Group):
                    v["groups"][p] = {k: jsonable(obj.attrs[k]) for k in sorted(obj.attrs)}
                    return
                data = obj[()]
                d = {
                    "dtype": data.dtype.str,
                    "shape": list(obj.shape),
                    "chunks": [int(c) for c in obj.attrs["chunks"]],
                    "fillvalue": jsonable(obj.fillvalue),
                    "attrs": {k: jsonable(obj.attrs[k]) for k in sorted(obj.attrs)},
                    "nbytes": int(data.nbytes),
                    "sha256": hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest(),
                }
                if data.size <= 64:
                    d["values"] = jsonable(data.ravel())
                v["datasets"][p] = d

            g.visititems(visit)
            versions.append(v)
        out["versions"] = versions
    with open(path[:-3] + ".json", "w") as w:
        json.dump(out, w, indent=1, sort_keys=True)
        w.write("\n")


def byte_ops(shape, dtype, index, value):
    """The assignment x[index] = value as pwrites: one per contiguous run of the
    selection in the C-order byte stream, in stream order."""
    mask = np.zeros(shape, dtype=bool)
    mask[index] = True
    new = np.zeros(shape, dtype=dtype)
    new[index] = value
    flat, data = mask.ravel(), new.ravel()
    ops, i, n = [], 0, flat.size
    while i < n:
        if not flat[i]:
            i += 1
            continue
        j = i
        while j < n and flat[j]:
            j += 1
        ops.append({"op": "pwrite", "offset": i * data.itemsize, "hex": data[i:j].tobytes().hex()})
        i = j
    return ops


def golden(name, description, build, index, index_text, value, value_text):
    before, after = f"{OUT}/{name}-before.h5", f"{OUT}/{name}-after.h5"
    with h5py.File(before, "w") as f:
        base = build(VersionedHDF5File(f))
    with h5py.File(before, "r") as f:
        x = f["_version_data/versions"][base]["x"]
        shape, dtype = x.shape, x.dtype
    shutil.copy(before, after)
    with h5py.File(after, "r+") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("golden", base, timestamp=GOLDEN_TS) as sv:
            sv["x"][index] = value  # ONE assignment
    manifest(before)
    manifest(after)
    edit = {
        "description": description,
        "dataset": "x",
        "base_version": base,
        "new_version": "golden",
        "new_version_timestamp": "2024-02-11 16:00:00.000000+0000",
        "numpy_edits": [["set", index_text, value_text]],
        "byte_ops": byte_ops(shape, dtype, index, value),
    }
    with open(f"{OUT}/{name}.edit.json", "w") as w:
        json.dump(edit, w, indent=1)
        w.write("\n")


def two_chunks(vf):
    # x: (30, 4) float64, chunks (15, 4): chunk 0 in slot 0, chunk 1 in slot 1; v2 rewrites
    # chunk 0, which moves to slot 2, after chunk 1's.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        sv.create_dataset("x", data=np.arange(120.0).reshape(30, 4), chunks=(15, 4), fillvalue=-1.0)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][0:15] = np.arange(60.0).reshape(15, 4) + 1000
    return "v2"


def fill_and_whole(vf):
    # x: (40, 4) float64, chunks (10, 2), fill -1: a sparse dataset whose chunk row 3 is
    # never written (unmapped, on the fill slab). v1 writes rows 0:30 (slots 0..5 in grid
    # order), v2 rewrites chunk (1, 0) (slot 6), v3 chunk (0, 0) (slot 7).
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        x = sv.create_dataset("x", shape=(40, 4), chunks=(10, 2), dtype="<f8", fillvalue=-1.0)
        x[0:30] = np.arange(120.0).reshape(30, 4)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][10:20, 0:2] = np.arange(20.0).reshape(10, 2) + 500
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["x"][0:10, 0:2] = np.arange(20.0).reshape(10, 2) + 700
    return "v3"


golden(
    "golden_slot_order",
    "one assignment changing part of two chunks whose slots are out of grid order",
    two_chunks, np.s_[10:20, 3], "[10:20, 3]", 1.5, "1.5",
)
golden(
    "golden_slot_order_whole",
    "one assignment covering one chunk in part and three whole, one of them unmapped (fill), "
    "the others in slots out of grid order",
    fill_and_whole, np.s_[5:40, 0:2], "[5:40, 0:2]",
    np.arange(70.0).reshape(35, 2) + 0.5, "arange(70.0).reshape(35, 2) + 0.5",
)
