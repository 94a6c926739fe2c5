"""Writes the delete goldens in fixtures/ with versioned-hdf5 itself (issue 33).

Run from this directory with Debian's python3-h5py and a versioned-hdf5 (master after
v2.4.0, data_version 4) importable; the files committed here were written by master
5389a78 on h5py 3.7 / HDF5 1.10.8, the versions the other fixtures were made with.

Each golden is a small file of a few versions (x: int64 1-D, chunks (4,), fill -1, an edge
chunk of 2; g/y: float64 2-D, chunks (4, 3), gzip level 4 + shuffle, fill 0.5, edge chunks
on both axes) and ONE call of versioned-hdf5's delete_versions on a copy of it.

Writes, per golden NAME: NAME-before.h5, NAME-after.h5, their manifests (NAME-*.json, the
format of fixtures/README.md) and NAME.delete.json: what was deleted ("delete"), the
current version before and after, and for golden_delete_then_commit the commit versioned-
hdf5 made on top of the deletion ("commit": base_version, new_version, dataset,
numpy_edits and byte_ops as in NAME.edit.json), which the after-file holds too.
"""
import hashlib
import json
import shutil
from datetime import datetime, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File, delete_versions

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
    """The fixture manifest of path (fixtures/README.md), as make_slot_order.py writes it."""
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
    """The assignment x[index] = value as pwrites on the C-order byte stream."""
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


def first(sv, attrs=True):
    x = sv.create_dataset("x", data=np.arange(10, dtype="<i8"), chunks=(4,), fillvalue=-1)
    if attrs:
        x.attrs["units"] = "m"
    sv.create_group("g").attrs["kind"] = "grid"
    sv.create_dataset("g/y", data=np.arange(30.0).reshape(6, 5), chunks=(4, 3),
                      compression="gzip", compression_opts=4, shuffle=True, fillvalue=0.5)


def chain(vf):
    # v1 -> v2 -> v3 -> v4: v3 rewrites what v2 wrote (so v2's chunks are v2's alone) and
    # the edge chunks; v4 changes one chunk of each.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        first(sv)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][4:6] = [40, 50]          # chunk 1
        sv["g/y"][0, 0] = 100.0          # chunk (0, 0)
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["x"][4:6] = [41, 51]
        sv["x"][8] = 80                  # the edge chunk
        sv["g/y"][0, 0] = 101.0
        sv["g/y"][5, 4] = 300.0          # the corner edge chunk
        sv.attrs["note"] = "third"
    with vf.stage_version("v4", timestamp=ts(4)) as sv:
        sv["x"][0] = 7
        sv["g/y"][4:6, 0:3] = 9.0        # the edge chunk (1, 0)


def branch(vf):
    # v1 -> v2, then v3a and v3b both on v2; v3b current.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        first(sv)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][4:6] = [40, 50]
        sv["g/y"][0, 0] = 100.0
    with vf.stage_version("v3a", "v2", timestamp=ts(3)) as sv:
        sv["x"][8] = 80
    with vf.stage_version("v3b", "v2", timestamp=ts(4)) as sv:
        sv["g/y"][5, 4] = 300.0
        sv["x"].attrs["units"] = "cm"


def dedup(vf):
    # Chunks shared through the hash table: v3 writes back v1's chunks (reusing v1's
    # slots), v2's chunks are v2's alone, v4's come after them; x2 holds the same bytes as x in its own data group.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        first(sv)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][0:4] = [10, 11, 12, 13]
        sv["x"][8:10] = [18, 19]
        sv["g/y"][0:4, 0:3] = 2.0
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["x"][0:4] = [0, 1, 2, 3]      # v1's slot 0 again
        sv["x"][8:10] = [8, 9]           # v1's edge slot again
        sv["g/y"][0:4, 0:3] = np.arange(30.0).reshape(6, 5)[0:4, 0:3]
        sv.create_dataset("x2", data=np.arange(10, dtype="<i8"), chunks=(4,), fillvalue=-1)
    with vf.stage_version("v4", timestamp=ts(4)) as sv:
        sv["x"][4] = 444                 # a new slot after v2's: it moves down
        sv["g/y"][4, 0] = 5.0            # the edge chunk (1, 0), likewise


def several(vf):
    # v1..v5; tmp lives in v2 only (its data group goes with v2); e is empty everywhere
    # (delete_versions leaves its data group alone); sparse s has chunks in v4 only.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        first(sv)
        sv.create_dataset("e", shape=(0, 3), chunks=(2, 3), dtype="<i4")
        sv.create_dataset("s", shape=(12,), chunks=(4,), dtype="<f8", fillvalue=7.0)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][4] = 44
        sv.create_dataset("tmp/z", data=np.arange(6, dtype="<i2"), chunks=(4,))
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        del sv["tmp"]
        sv["g/y"][0:6, 3:5] = -1.0
    with vf.stage_version("v4", timestamp=ts(4)) as sv:
        sv["x"][9] = 99
        sv["s"][4:8] = [1.0, 2.0, 3.0, 4.0]
        sv["x"].resize((13,))
    with vf.stage_version("v5", timestamp=ts(5)) as sv:
        sv["x"][0] = 5
        sv["s"][0] = 0.0


def golden(name, description, build, delete, commit=None):
    before, after = f"{OUT}/{name}-before.h5", f"{OUT}/{name}-after.h5"
    with h5py.File(before, "w") as f:
        build(VersionedHDF5File(f))
    with h5py.File(before, "r") as f:
        current_before = f["_version_data/versions"].attrs["current_version"]
    shutil.copy(before, after)
    with h5py.File(after, "r+") as f:
        delete_versions(f, delete)
    with h5py.File(after, "r") as f:
        current_after = f["_version_data/versions"].attrs["current_version"]
    out = {
        "description": description,
        "delete": delete,
        "current_before": current_before,
        "current_after": current_after,
    }
    if commit is not None:
        dataset, index, index_text, value, value_text = commit
        with h5py.File(after, "r+") as f:
            x = f["_version_data/versions"][current_after][dataset]
            shape, dtype = x.shape, x.dtype
            vf = VersionedHDF5File(f)
            with vf.stage_version("golden", current_after, timestamp=GOLDEN_TS) as sv:
                sv[dataset][index] = value
        out["commit"] = {
            "dataset": dataset,
            "base_version": current_after,
            "new_version": "golden",
            "new_version_timestamp": "2024-02-11 16:00:00.000000+0000",
            "numpy_edits": [["set", index_text, value_text]],
            "byte_ops": byte_ops(shape, dtype, index, value),
        }
    manifest(before)
    manifest(after)
    with open(f"{OUT}/{name}.delete.json", "w") as w:
        json.dump(out, w, indent=1)
        w.write("\n")


golden("golden_delete_middle", "a version in the middle of a chain", chain, ["v2"])
golden("golden_delete_current", "the current version: current_version moves to its parent",
       chain, ["v4"])
golden("golden_delete_branch", "a branch point: v3a and v3b both have v2 as prev_version",
       branch, ["v2"])
golden("golden_delete_dedup", "the first version, whose chunks later versions share through "
       "the hash table, and the one between", dedup, ["v1", "v2"])
golden("golden_delete_several", "several versions at once, the current one among them; a "
       "data group no kept version has goes", several, ["v2", "v4", "v5"])
golden("golden_delete_then_commit", "a version deleted, then versioned-hdf5 commits on top "
       "of the new current version: dedup against the rebuilt hash table, appends at its "
       "largest_index", chain, ["v2", "v3"],
       commit=("x", np.s_[0:6], "[0:6]", np.array([0, 1, 2, 3, 40, 50]), "[0, 1, 2, 3, 40, 50]"))
