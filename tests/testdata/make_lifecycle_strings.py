"""Writes the delete goldens of variable-length string datasets in fixtures/ with
versioned-hdf5 itself (issue 50, item 3), in the form of make_lifecycle.py's.

Run from this directory with a versioned-hdf5 importable (the files committed here were
written by master 5389a78 on h5py 3.16 / HDF5 1.14.6, default libver, so that Debian's
HDF5 1.10 reads them):

    PYTHONPATH=/root/.cache/vh5fs/py114 /usr/bin/python3 make_lifecycle_strings.py

Each golden is a small file of a few versions holding `names` (variable-length UTF-8,
chunks (4,), an edge chunk), `tags` (variable-length ASCII bytes, 2-D, chunks (2, 2)) and
`x` (int64, chunks (4,)) beside them, and ONE call of delete_versions on a copy of it.
Writes, per golden NAME: NAME-before.h5, NAME-after.h5, their manifests (vlen strings as
fixtures/README.md describes: "dtype": "vlen-str", the values as text) and NAME.delete.json.
"""
import hashlib
import json
import shutil
from datetime import datetime, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File, delete_versions

OUT = "fixtures"
UTF8 = h5py.string_dtype("utf-8")
ASCII = h5py.string_dtype("ascii")


def ts(day):
    return datetime(2024, 3, day, tzinfo=timezone.utc)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def jsonable(x):
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, np.generic):
        x = x.item()
    return x


def manifest(path):
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
            v = {"name": name, "prev_version": g.attrs["prev_version"], "timestamp": g.attrs["timestamp"],
                 "attrs": {}, "groups": {}, "datasets": {}}

            def visit(p, obj):
                if isinstance(obj, h5py.Group):
                    v["groups"][p] = {k: jsonable(obj.attrs[k]) for k in sorted(obj.attrs)}
                    return
                data = obj[()]
                d = {"shape": list(obj.shape), "chunks": [int(c) for c in obj.attrs["chunks"]],
                     "attrs": {k: jsonable(obj.attrs[k]) for k in sorted(obj.attrs)}}
                if h5py.check_string_dtype(obj.dtype) and obj.dtype.kind == "O":
                    d.update(dtype="vlen-str", sha256=None, fillvalue={"bytes_b64": ""},
                             values=[text(x) for x in data.ravel()])
                else:
                    d.update(dtype=data.dtype.str, fillvalue=jsonable(obj.fillvalue), nbytes=int(data.nbytes),
                             sha256=hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest())
                    if data.size <= 64:
                        d["values"] = jsonable(data.ravel())
                v["datasets"][p] = d

            g.visititems(visit)
            versions.append(v)
        out["versions"] = versions
    with open(path[:-3] + ".json", "w") as w:
        json.dump(out, w, indent=1, sort_keys=True)
        w.write("\n")


def chain(vf):
    # s1 -> s2 -> s3 -> s4: s2 rewrites s1's first chunk of names (s1's alone then), s3
    # grows names by an edge chunk and changes tags, s4 changes one chunk of each.
    with vf.stage_version("s1", timestamp=ts(1)) as sv:
        sv.create_dataset("names", data=np.array(["ann", "bob", "été", "", "zoë", "x" * 40], dtype=object),
                          dtype=UTF8, chunks=(4,))
        sv.create_dataset("tags", data=np.array([[b"a", b"bb"], [b"ccc", b""], [b"dd", b"e"]], dtype=object),
                          dtype=ASCII, chunks=(2, 2))
        sv.create_dataset("x", data=np.arange(10, dtype="<i8"), chunks=(4,), fillvalue=-1)
    with vf.stage_version("s2", timestamp=ts(2)) as sv:
        sv["names"][0:4] = np.array(["Ann", "Bob", "Été", "dan"], dtype=object)
        sv["x"][0] = 100
    with vf.stage_version("s3", timestamp=ts(3)) as sv:
        sv["names"].resize((9,))
        sv["names"][6:9] = np.array(["fay", "gus", "ünï"], dtype=object)
        sv["tags"][2, 0] = b"zz"
    with vf.stage_version("s4", timestamp=ts(4)) as sv:
        sv["names"][8] = "hal"
        sv["tags"][0, 1] = b"yy"
        sv["x"][9] = 99


def only_strings(vf):
    # s1 -> s2 -> s3 where s2 is the only version holding tmp (a string dataset that goes)
    # and the first chunks of names are s2's alone: the chunks after them move down. x,
    # never changed, is what a test can hold open for writing.
    with vf.stage_version("s1", timestamp=ts(1)) as sv:
        sv.create_dataset("names", data=np.array([f"n{i}" for i in range(10)], dtype=object),
                          dtype=UTF8, chunks=(4,))
        sv.create_dataset("x", data=np.arange(3, dtype="<i8"), chunks=(4,))
    with vf.stage_version("s2", timestamp=ts(2)) as sv:
        sv["names"][0] = "changed in s2"
        sv.create_dataset("tmp", data=np.array(["t0", "t1"], dtype=object), dtype=UTF8, chunks=(4,))
    with vf.stage_version("s3", timestamp=ts(3)) as sv:
        del sv["tmp"]
        sv["names"][0] = "again in s3"
        sv["names"][9] = "last"


def golden(name, description, build, delete):
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
    manifest(before)
    manifest(after)
    out = {"description": description, "delete": delete, "current_before": current_before,
           "current_after": current_after}
    with open(f"{OUT}/{name}.delete.json", "w") as w:
        json.dump(out, w, indent=1)
        w.write("\n")


if __name__ == "__main__":  # make_string_writes.py imports manifest
    golden("golden_delete_strings_middle", "variable-length strings (UTF-8 and ASCII, 1-D and 2-D) beside int64: "
           "a version whose string chunks are its own; later string chunks move down", chain, ["s2"])
    golden("golden_delete_strings_several", "the first and the current version of string datasets at once", chain,
           ["s1", "s4"])
    golden("golden_delete_strings_only", "a string dataset only the deleted version holds goes; the kept string "
           "chunks move down", only_strings, ["s2"])
