"""Prints, for every version of a versioned-hdf5 file that h5py reads as committed, its
datasets as version_digests.py does (VERSION PREV DATASET SHA256 SHAPE), and carries on
past what it cannot read, which it prints as "unreadable WHAT: ERROR" lines: for a file
read before anything repaired it after a crash, where a test must tell a version read
wrong from one that could not be read at all. First come the heads: "head current V",
and "head branch NAME V live" (or "dangling") for each of vh5fs's branches, live when a
committed version V has the branch's timestamp."""
import hashlib
import json
import sys

import h5py
import numpy as np


def unreadable(what, e):
    if not isinstance(what, str):  # a link name torn into bytes that are not UTF-8
        what = repr(what)
    print("unreadable", what + ":", type(e).__name__, str(e).replace("\n", " "))


def walk(group, prefix=""):
    try:
        names = list(group)
    except Exception as e:  # noqa: BLE001 - a group whose links cannot be listed
        unreadable(prefix.rstrip("/") or "group", e)
        return
    for name in names:
        try:
            obj = group[name]
        except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
            unreadable(prefix + name, e)
            continue
        if isinstance(obj, h5py.Group):
            yield from walk(obj, prefix + name + "/")
        else:
            yield prefix + name, obj


try:
    f = h5py.File(sys.argv[1], "r")
    vs = f["_version_data/versions"]
    names = list(vs)
except Exception as e:  # noqa: BLE001
    unreadable("file", e)
    sys.exit(0)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


try:
    print("head current", text(vs.attrs["current_version"]))
    refs = json.loads(text(vs.attrs.get("vh5fs_refs", '{"format": 1}')))
    for name, t in sorted(refs.get("branches", {}).items()):
        g = vs.get(t["version"])
        live = (g is not None and bool(g.attrs.get("committed", True))
                and text(g.attrs["timestamp"]) == t["timestamp"])
        print("head branch", name, t["version"], "live" if live else "dangling")
except Exception as e:  # noqa: BLE001
    unreadable("heads", e)
for v in names:
    if v == "__first_version__":
        continue
    try:
        g = vs[v]
        if not g.attrs.get("committed", True):
            continue
        prev = g.attrs["prev_version"]
    except Exception as e:  # noqa: BLE001
        unreadable(v, e)
        continue
    for p, ds in walk(g, v + "/"):
        try:
            if h5py.check_string_dtype(ds.dtype) and h5py.check_vlen_dtype(ds.dtype):
                # Variable-length strings: the digest of their values as a JSON list.
                vals = [text(x) for x in np.ravel(ds[()])]
                data = json.dumps(vals, ensure_ascii=False).encode()
            elif h5py.check_string_dtype(ds.dtype):
                continue
            else:
                data = np.ascontiguousarray(ds[()]).tobytes()
        except Exception as e:  # noqa: BLE001
            unreadable(p, e)
            continue
        shape = "x".join(map(str, ds.shape))
        print(v, prev, p[len(v) + 1:], hashlib.sha256(data).hexdigest(), shape)
