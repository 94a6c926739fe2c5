"""Writes the modify goldens in fixtures/modify/ with versioned-hdf5 itself (issue 33).

Run from this directory with Debian's python3-h5py and a versioned-hdf5 (master after
v2.4.0, data_version 4) importable; the files committed here were written by master
5389a78 on h5py 3.7 / HDF5 1.10.8, the versions the other fixtures were made with.

Each golden is a file whose dataset has several versions (chunks shared between them,
shapes that change, versions without it), then ONE call of versioned-hdf5's
modify_metadata, which rewrites the dataset of every version: a new raw_data and
hash_table (every chunk of every version, in version-name order and grid order within a
version, deduplicated), new virtual datasets. vh5fs modify must give the same.

versioned-hdf5 drops the user attributes of the dataset in every version it rewrites;
vh5fs keeps them (the before-file's attributes, raw_data and chunks aside, are the
expected ones).

Writes, per golden NAME (every one, or those named on the command line): NAME-before.h5, NAME-after.h5, their manifests (NAME-*.json, the
format of fixtures/README.md) and NAME.modify.json: the dataset, the call's keyword
arguments (kwargs) and the same call as `vh5fs modify` arguments (args).
"""
import hashlib
import json
import shutil
import sys
from datetime import datetime, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File
from versioned_hdf5.replay import modify_metadata

OUT = "fixtures/modify"
ONLY = sys.argv[1:]  # golden names to write (all when none given)


def ts(day, hour=0):
    return datetime(2024, 1, day, hour, tzinfo=timezone.utc)


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


def golden(name, description, build, dataset, kwargs, args):
    if ONLY and name not in ONLY:
        return
    before, after = f"{OUT}/{name}-before.h5", f"{OUT}/{name}-after.h5"
    with h5py.File(before, "w") as f:
        build(VersionedHDF5File(f))
    shutil.copy(before, after)
    with h5py.File(after, "r+") as f:
        modify_metadata(f, dataset, **kwargs)
    manifest(before)
    manifest(after)
    call = {
        "description": description,
        "dataset": dataset,
        "kwargs": {k: jsonable(v) for k, v in kwargs.items()},
        "args": args,
    }
    with open(f"{OUT}/{name}.modify.json", "w") as w:
        json.dump(call, w, indent=1)
        w.write("\n")


def one_d(vf):
    # x: float64, chunks (4,): v1 writes 0..19; v2 rewrites chunk 0 (chunks 1-4 shared);
    # v3 grows x to 26 (a changed shape, new edge chunk); v4 drops x; v5, on v3, sets one
    # element back to what v1 held (chunks equal to v1's again) and another to the fill.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        x = sv.create_dataset("x", data=np.arange(20.0), chunks=(4,), fillvalue=-1.0)
        x.attrs["units"] = "m"
        sv.create_dataset("y", data=np.arange(10), chunks=(5,))
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["x"][0:4] = [100.0, 101.0, 102.0, 103.0]
        sv["x"].attrs["note"] = 2
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["x"].resize((26,))
        sv["x"][22:26] = 7.0
    with vf.stage_version("v4", timestamp=ts(4)) as sv:
        del sv["x"]
    with vf.stage_version("v5", "v3", timestamp=ts(5)) as sv:
        sv["x"][0:4] = [0.0, 1.0, 2.0, 3.0]
        sv["x"][9] = -1.0


def two_d(vf):
    # z: float64 (12, 10), chunks (4, 5): v2 rewrites a band, v3 shrinks to 9 rows, v4
    # grows to 14 rows (the new rows read as the fill).
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        z = sv.create_dataset("g/z", data=np.arange(120.0).reshape(12, 10), chunks=(4, 5), fillvalue=0.5)
        z.attrs["scale"] = [1, 2]
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["g/z"][4:8, 2:9] = -2.0
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["g/z"].resize((9, 10))
    with vf.stage_version("v4", timestamp=ts(4)) as sv:
        sv["g/z"].resize((14, 10))
        sv["g/z"][13, 0] = 9.0


def plain_2d(vf):
    # w: int32 (10, 6), chunks (4, 4), no filters; v2 changes one element, v3 the shape.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        sv.create_dataset("w", data=np.arange(60, dtype="<i4").reshape(10, 6), chunks=(4, 4))
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["w"][5, 5] = 1000
    with vf.stage_version("v3", timestamp=ts(3)) as sv:
        sv["w"].resize((7, 6))


def gzip_1d(vf):
    # s: int64, chunks (8,), gzip level 6 + shuffle.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        sv.create_dataset("s", data=np.arange(50, dtype="<i8") * 3, chunks=(8,),
                          compression="gzip", compression_opts=6, shuffle=True)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["s"][10:12] = 0


def floats(vf):
    # f: float64, chunks (5,), fill 0 (the default); holds zeros, and an unwritten chunk.
    with vf.stage_version("v1", timestamp=ts(1)) as sv:
        f = sv.create_dataset("f", shape=(17,), dtype="<f8", chunks=(5,))
        f[0:10] = np.linspace(0.0, 1.0, 10)
    with vf.stage_version("v2", timestamp=ts(2)) as sv:
        sv["f"][12] = 1e30
        sv["f"][1] = 0.0


golden("golden_modify_rechunk_1d", "rechunk a 1-D dataset (4,) -> (6,) over five versions",
       one_d, "x", {"chunks": (6,)}, ["--chunks", "6"])
golden("golden_modify_rechunk_2d", "rechunk a nested 2-D dataset (4, 5) -> (5, 3); shapes change",
       two_d, "g/z", {"chunks": (5, 3)}, ["--chunks", "5,3"])
golden("golden_modify_gzip", "no filters -> gzip (level 4) + shuffle",
       plain_2d, "w", {"compression": "gzip", "shuffle": True}, ["--compression", "gzip", "--shuffle"])
golden("golden_modify_nogzip", "gzip + shuffle -> no filters, rechunked (8,) -> (16,)",
       gzip_1d, "s", {"compression": None, "shuffle": False, "chunks": (16,)},
       ["--compression", "none", "--no-shuffle", "--chunks", "16"])
golden("golden_modify_dtype", "<f8 -> <f4",
       floats, "f", {"dtype": "<f4"}, ["--dtype", "<f4"])
golden("golden_modify_fill", "fill value 0 -> -1: stored zeros become -1",
       floats, "f", {"fillvalue": -1.0}, ["--fillvalue", "-1"])
golden("golden_modify_lzf", "gzip + shuffle -> LZF, shuffle kept",
       gzip_1d, "s", {"compression": "lzf", "compression_opts": None}, ["--compression", "lzf"])
