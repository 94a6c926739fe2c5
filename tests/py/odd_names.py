#!/usr/bin/python3
"""Versioned-hdf5 files whose version, group and dataset names are odd: spaces, UTF-8,
leading dots, backslashes, newlines, 200-byte names, names longer than a file name can
be (256 bytes) and hard links named "..". For tests/names_test.go.

usage: odd_names.py make OUT.h5
       odd_names.py dump FILE.h5 > TREE.json

make writes, in the layout of tests/py/make_versioned.py (one raw_data/hash_table pair per
dataset under _version_data/<dataset path>, virtual datasets with one mapping per chunk),
the versions in VERSIONS below, each holding the datasets in DATASETS (int32, shape (6,),
chunks (4,), every element distinct across versions and datasets), plus a hard link ".."
in each version's root group and in the versions group, and a plain (unversioned) group
"plain odd" with the same odd names.

dump prints what h5py reads: {"current": NAME, "versions": [NAME...],
"trees": {"versions/NAME" | "plain odd": {"rel/path": {"hex": BYTES, "dtype": STR}}},
"groups": {tree: ["rel/group", ...]}}, every link listed, whatever its name. Names are
JSON strings (all names here are UTF-8).
"""
import hashlib
import json
import sys
from datetime import datetime, timedelta, timezone

import h5py
import numpy as np

LONG_OK = "a" * 200  # 200 bytes
LONG_OK_UTF8 = "é" * 100  # 200 bytes
LONG_255 = "é" * 127 + "e"  # 255 bytes: the longest file name
TOO_LONG = "x" * 256  # cannot be a file name

VERSIONS = ["v 1", "température", "数据", ".hidden", "back\\slash", "new\nline", LONG_OK_UTF8, TOO_LONG,
            "tab\tand ,comma"]
CURRENT = "new\nline"

DATASETS = ["with space", "température", "数据", ".hidden", "back\\slash", "new\nline", LONG_OK,
            "grp with space/inner", ".hidden group/数据", LONG_255 + "/x", "deep/.../d", TOO_LONG,
            "ok/" + TOO_LONG]

SHAPE, CHUNK = (6,), (4,)


def stamp(t):
    return t.strftime("%Y-%m-%d %H:%M:%S.%f%z")


def make(out):
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    hdt = np.dtype([("hash", "u1", (32,)), ("shape", "<i8", (2,))])
    with h5py.File(out, "w", libver=("earliest", "v110")) as f:
        vd = f.create_group("_version_data")
        vg = vd.create_group("versions")
        vg.attrs["data_version"] = np.int64(4)
        first = vg.create_group("__first_version__")
        first.attrs["timestamp"] = stamp(t0)
        raws = {}
        for di, path in enumerate(DATASETS):
            g = vd.require_group(path)
            raw = g.create_dataset("raw_data", shape=(0,), maxshape=(None,), chunks=CHUNK, dtype="<i4",
                                   fillvalue=0)
            raw.attrs["chunks"] = np.array(CHUNK, dtype=np.int64)
            ht = g.create_dataset("hash_table", shape=(0,), maxshape=(None,), chunks=(4096,), dtype=hdt)
            raws[path] = (raw, ht, [])
        prev = "__first_version__"
        for vi, name in enumerate(VERSIONS):
            g = vg.create_group(name)
            g.attrs["prev_version"] = prev
            g.attrs["committed"] = np.bool_(True)
            g.attrs["timestamp"] = stamp(t0 + timedelta(seconds=vi + 1))
            for di, path in enumerate(DATASETS):
                raw, ht, rows = raws[path]
                data = (np.arange(6) + 1000 * vi + 100000 * di).astype("<i4")
                slots = []
                for c in range(0, SHAPE[0], CHUNK[0]):
                    block = data[c:c + CHUNK[0]]
                    k = len(rows)
                    raw.resize(((k + 1) * CHUNK[0],))
                    raw[k * CHUNK[0]:k * CHUNK[0] + len(block)] = block
                    digest = hashlib.sha256(block.tobytes() + ("(%d,)" % len(block)).encode()).digest()
                    rows.append((np.frombuffer(digest, "u1"), (k * CHUNK[0], k * CHUNK[0] + len(block))))
                    slots.append((c, k * CHUNK[0], len(block)))
                layout = h5py.VirtualLayout(shape=SHAPE, dtype="<i4", maxshape=SHAPE)
                src = h5py.VirtualSource(".", "/_version_data/" + path + "/raw_data", shape=(len(rows) * CHUNK[0],))
                for c, off, n in slots:
                    layout[c:c + n] = src[off:off + n]
                parent, _, leaf = path.rpartition("/")
                dg = g.require_group(parent) if parent else g
                ds = dg.create_virtual_dataset(leaf, layout, fillvalue=0)
                ds.attrs["raw_data"] = "/_version_data/" + path + "/raw_data"
                ds.attrs["chunks"] = np.array(CHUNK, dtype=np.int64)
            # A hard link named ".." to a dataset of the version: HDF5 takes ".." literally.
            g.id.links.create_hard(b"..", g.id, b"with space")
            prev = name
        for raw, ht, rows in raws.values():
            ht.resize((len(rows),))
            ht[:] = np.array(rows, dtype=hdt)
            ht.attrs["largest_index"] = np.int64(len(rows))
        # A hard link named ".." to a version group in the versions group.
        vg.id.links.create_hard(b"..", vg.id, "v 1".encode())
        vg.attrs["current_version"] = CURRENT

        plain = f.create_group("plain odd")
        for di, path in enumerate(DATASETS):
            parent, _, leaf = path.rpartition("/")
            pg = plain.require_group(parent) if parent else plain
            pg.create_dataset(leaf, data=(np.arange(5) - 7 * di).astype(">i2"))
        plain.id.links.create_hard(b"..", plain.id, b"with space")


def walk(g, prefix, files, groups):
    for name in g:
        link = g.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            continue
        rel = prefix + name
        obj = g[name]  # libhdf5 takes ".." literally, as a link name
        if isinstance(obj, h5py.Group):
            groups.append(rel)
            walk(obj, rel + "/", files, groups)
        else:
            files[rel] = {"hex": np.ascontiguousarray(obj[()]).tobytes().hex(), "dtype": obj.dtype.str}


def dump(path):
    out = {"trees": {}, "groups": {}}
    with h5py.File(path, "r") as f:
        vg = f["_version_data/versions"]
        cur = vg.attrs["current_version"]
        out["current"] = cur.decode() if isinstance(cur, bytes) else cur
        out["versions"] = [n for n in vg if n != "__first_version__"]
        for name in out["versions"]:
            if name == "..":
                continue
            files, groups = {}, []
            walk(vg[name], "", files, groups)
            out["trees"]["versions/" + name] = files
            out["groups"]["versions/" + name] = groups
        files, groups = {}, []
        walk(f["plain odd"], "", files, groups)
        out["trees"]["plain odd"] = files
        out["groups"]["plain odd"] = groups
    json.dump(out, sys.stdout)


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "make":
        make(path)
    elif cmd == "dump":
        dump(path)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
