"""Writes the HDF5 1.14 fixtures in latest/ with versioned-hdf5 itself.

The other fixtures were written by HDF5 1.10.8 (Debian 12's h5py 3.7); these are what
current HDF5 writes. The files committed here were written by versioned-hdf5 master
5389a78 (data_version 4) with ndindex 1.10.1, on h5py 3.16.0 built against HDF5 1.14.6,
with Debian 12's numpy 1.24.2 and Python 3.11.

Run from this directory, with that h5py and versioned-hdf5 first on the path (they are
not part of this repository; build them yourself) and HDF5 1.14's tools in HDF5_114_BIN:

    PYTHONPATH=/root/.cache/vh5fs/py114 \\
    HDF5_114_BIN=/root/.cache/vh5fs/hdf5-1.14.6/bin \\
    /usr/bin/python3 make_latest.py [NAME...]

(LD_LIBRARY_PATH=/root/.cache/vh5fs/hdf5-1.14.6/lib too if your h5py has no rpath to its
HDF5.) NAME is a scenario or repack-basic_1d / repack-grid_2d_gzip; all when none given.

Each scenario is written twice, by the same versioned-hdf5 calls: NAME-default.h5 from
h5py.File(path, "w") (HDF5's default format bounds: the earliest format that can hold
each object: superblock 0, version 1 object headers, symbol-table groups, v1 B-tree chunk
indexes) and NAME-latest.h5 from h5py.File(path, "w", libver="latest") (superblock 3,
version 2 object headers, link-message groups, extensible-array chunk indexes for raw_data
and hash_table, version 2 dataspaces, and version 3 hyperslab selections in the virtual
datasets' mappings, which HDF5 1.10 cannot read: "bad version number for hyperslab
selection"; atomic datatypes keep datatype message version 1 even there, HDF5 only
upgrades compound, array and enum types). Beside each, the manifest NAME-*.json in the
format of fixtures/README.md, read back through versioned-hdf5.

    numeric       g/x int64 (10,), chunks (4,), fill -1; g/y float64 (20, 10), chunks
                  (8, 10), gzip 4 + shuffle, fill 0.5; an attribute on the group g.
                  v1 creates; v2 edits elements of both and adds the attribute units to
                  g/x; v3 grows both on axis 0 (the new elements read as the fill, but for
                  a row or element written) and adds g/z int32 (6,), chunks (3,); v4
                  shrinks both (to 7 and 13 rows) and deletes g/z.
    strings       codes |S8 (5,), chunks (2,); names variable-length UTF-8 (6,), chunks
                  (4,); vals float64 (5,), chunks (4,). s1 creates; s2 edits one element
                  of each; s3 grows names to 8 (writes both new elements) and codes to 7
                  (writes the last one: element 5 reads as the fill b"").
    manyversions  counts int32 (512,), chunks (16,): v00 creates it (0..511); v01..v39 each
                  set one element (37 * i mod 512) to -i: 40 versions.

and, with HDF5 1.14's `h5repack -L` (latest format), repack-basic_1d.h5 and
repack-grid_2d_gzip.h5 from fixtures/basic_1d.h5 and grid_2d_gzip.h5 (the manifests are
theirs, "file" aside). h5repack keeps every version's dataset a virtual dataset; this
script checks that, and that versioned-hdf5 reads the copy as the original's manifest says.

Every file written is read back with versioned-hdf5 (mode "r": HDF5's virtual datasets;
and mode "r+" on a copy: versioned-hdf5's own chunk reads through raw_data) and compared,
version by version, with what the script wrote and with its manifest.
"""
import base64
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File

OUT = "latest"
FIXTURES = "fixtures"
BIN = os.environ.get("HDF5_114_BIN", "/root/.cache/vh5fs/hdf5-1.14.6/bin")
ONLY = sys.argv[1:]  # scenario names to write (all when none given)

if h5py.version.hdf5_version_tuple[:2] < (1, 14):
    sys.exit(f"make_latest.py: h5py {h5py.__version__} runs on HDF5 {h5py.version.hdf5_version}; "
             "put an h5py built against HDF5 1.14 first on PYTHONPATH")


def ts(i):
    return datetime(2025, 1, 1, tzinfo=timezone.utc) + timedelta(hours=i)


def is_vlen_str(dtype):
    return dtype.kind == "O" and h5py.check_string_dtype(dtype) is not None


def jsonable(x):
    if isinstance(x, np.ndarray):
        return [jsonable(v) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bytes):
        return {"bytes_b64": base64.b64encode(x).decode()}
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, complex):
        return [jsonable(x.real), jsonable(x.imag)]
    if isinstance(x, float) and x != x:
        return "NaN"
    return x


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def digest(data):
    return hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()


def dataset_entry(obj):
    """A manifest's dataset entry, from a dataset of a version versioned-hdf5 opened."""
    data = obj[()]
    d = {
        "shape": list(obj.shape),
        "chunks": [int(c) for c in obj.attrs["chunks"]],
        "fillvalue": jsonable(obj.fillvalue),
        "attrs": {k: jsonable(obj.attrs[k]) for k in sorted(obj.attrs)},
    }
    if is_vlen_str(obj.dtype):
        d["dtype"] = "vlen-str"
        d["sha256"] = None
        d["values"] = [text(v) for v in data.ravel()]
        if isinstance(obj.fillvalue, str):
            d["fillvalue"] = jsonable(obj.fillvalue.encode())
        return d
    d["dtype"] = data.dtype.str
    d["nbytes"] = int(data.nbytes)
    d["sha256"] = digest(data)
    if data.size <= 64:
        d["values"] = jsonable(data.ravel())
    return d


def read_manifest(path):
    """The fixture manifest of path (fixtures/README.md), read with versioned-hdf5."""
    out = {"file": os.path.basename(path)}
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        vg = f["_version_data/versions"]
        out["current_version"] = vf.current_version
        out["data_version"] = int(vf.data_version_identifier)
        versions = []
        for name in sorted(vf.versions):
            g = vf[name]
            v = {
                "name": name,
                "prev_version": g.attrs["prev_version"],
                "timestamp": g.attrs["timestamp"],
                "attrs": {k: jsonable(g.attrs[k]) for k in sorted(g.attrs)
                          if k not in ("prev_version", "committed", "timestamp")},
                "groups": {},
                "datasets": {},
            }
            assert vg[name].attrs["timestamp"] == v["timestamp"]

            def visit(p, obj):
                if isinstance(obj, h5py.Group):
                    v["groups"][p] = {k: jsonable(obj.attrs[k]) for k in sorted(obj.attrs)}
                else:
                    v["datasets"][p] = dataset_entry(obj)

            g.visititems(visit)
            versions.append(v)
        out["versions"] = versions
    return out


def write_manifest(m, path):
    with open(path[:-3] + ".json", "w") as w:
        json.dump(m, w, indent=1, sort_keys=True)
        w.write("\n")


def same(a, b):
    """Read-back data a equals expected b (vlen strings compared as text)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "O" or b.dtype.kind == "O":
        return [text(v) for v in a.ravel()] == [text(v) for v in b.ravel()]
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def check_read(path, model):
    """Every version of model (name -> {dataset: array}) reads back as written, through
    versioned-hdf5 in mode "r" and (on a copy of the file) in mode "r+"."""
    with tempfile.TemporaryDirectory() as tmp:
        copy_path = os.path.join(tmp, "copy.h5")
        shutil.copy(path, copy_path)
        for p, mode in ((path, "r"), (copy_path, "r+")):
            with h5py.File(p, mode) as f:
                vf = VersionedHDF5File(f)
                assert sorted(vf.versions) == sorted(model), (path, mode, vf.versions)
                for name, datasets in model.items():
                    g = vf[name]
                    found = []
                    g.visititems(lambda q, o: None if isinstance(o, h5py.Group) else found.append(q))
                    assert sorted(found) == sorted(datasets), (path, mode, name, found)
                    for ds, want in datasets.items():
                        got = g[ds][()]
                        assert same(got, want), (path, mode, name, ds, got, want)


def check_manifest(m, model):
    """The manifest agrees with what was written."""
    for v in m["versions"]:
        want = model[v["name"]]
        assert sorted(v["datasets"]) == sorted(want), (v["name"], v["datasets"].keys())
        for ds, d in v["datasets"].items():
            w = np.asarray(want[ds])
            assert d["shape"] == list(w.shape), (v["name"], ds)
            if d["dtype"] == "vlen-str":
                assert d["values"] == [text(x) for x in w.ravel()], (v["name"], ds)
            else:
                assert d["dtype"] == w.dtype.str and d["sha256"] == digest(w), (v["name"], ds)


def scenario(name, build):
    """Writes NAME-default.h5 and NAME-latest.h5 with build, their manifests, and checks them."""
    if ONLY and name not in ONLY:
        return
    for kind, kwargs in (("default", {}), ("latest", {"libver": "latest"})):
        path = f"{OUT}/{name}-{kind}.h5"
        model = {}
        with h5py.File(path, "w", **kwargs) as f:
            build(VersionedHDF5File(f), model)
        with h5py.File(path, "r") as f:
            superblock = f.id.get_create_plist().get_version()[0]
        print(f"{path}: {os.path.getsize(path)} bytes, superblock {superblock}, "
              f"{len(model)} versions")
        assert superblock == (3 if kwargs else 0), (path, superblock)
        check_read(path, model)
        m = read_manifest(path)
        check_manifest(m, model)
        write_manifest(m, path)


def commit(vf, model, name, i, edit, prev=None):
    """Stages version name (timestamp ts(i)) on prev (the current version when None),
    applies edit to it and to a copy of the model of its base, and commits."""
    base = prev if prev is not None else (vf.current_version if model else None)
    state = {k: v.copy() for k, v in model[base].items()} if base in model else {}
    with vf.stage_version(name, prev_version=prev, timestamp=ts(i)) as sv:
        edit(sv, state)
    model[name] = state


def numeric(vf, model):
    def v1(sv, m):
        g = sv.create_group("g")
        g.attrs["kind"] = "numeric"
        m["g/x"] = np.arange(10, dtype="<i8")
        m["g/y"] = np.linspace(0.0, 1.0, 200).reshape(20, 10)
        sv.create_dataset("g/x", data=m["g/x"], chunks=(4,), fillvalue=-1)
        sv.create_dataset("g/y", data=m["g/y"], chunks=(8, 10), compression="gzip",
                          compression_opts=4, shuffle=True, fillvalue=0.5)

    def v2(sv, m):
        m["g/x"][2] = 100
        m["g/x"][5:7] = [-5, -6]
        m["g/y"][3, 4] = -1.5
        m["g/y"][10:12, :] = 7.25
        sv["g/x"][2] = 100
        sv["g/x"][5:7] = [-5, -6]
        sv["g/y"][3, 4] = -1.5
        sv["g/y"][10:12, :] = 7.25
        sv["g/x"].attrs["units"] = "m"

    def v3(sv, m):
        x = np.full(15, -1, dtype="<i8")
        x[:10] = m["g/x"]
        x[12] = 12
        y = np.full((26, 10), 0.5)
        y[:20] = m["g/y"]
        y[24] = np.arange(10.0)
        m["g/x"], m["g/y"] = x, y
        m["g/z"] = np.arange(6, dtype="<i4")
        sv["g/x"].resize((15,))
        sv["g/x"][12] = 12
        sv["g/y"].resize((26, 10))
        sv["g/y"][24] = np.arange(10.0)
        sv.create_dataset("g/z", data=m["g/z"], chunks=(3,))

    def v4(sv, m):
        m["g/x"] = m["g/x"][:7].copy()
        m["g/y"] = m["g/y"][:13].copy()
        del m["g/z"]
        sv["g/x"].resize((7,))
        sv["g/y"].resize((13, 10))
        del sv["g/z"]

    for i, edit in enumerate((v1, v2, v3, v4)):
        commit(vf, model, f"v{i + 1}", i, edit)


def strings(vf, model):
    def s1(sv, m):
        m["codes"] = np.array([b"alpha", b"beta", b"gamma", b"", b"delta"], dtype="S8")
        m["names"] = np.array(["ann", "bob", "\u00e9t\u00e9", "", "zo\u00eb", "x" * 40], dtype=object)
        m["vals"] = np.arange(5) * 0.25
        sv.create_dataset("codes", data=m["codes"], chunks=(2,))
        sv.create_dataset("names", data=m["names"], dtype=h5py.string_dtype(), chunks=(4,))
        sv.create_dataset("vals", data=m["vals"], chunks=(4,))

    def s2(sv, m):
        m["codes"][1] = b"BETA"
        m["names"][2] = "summer"
        m["vals"][0] = 9.5
        sv["codes"][1] = b"BETA"
        sv["names"][2] = "summer"
        sv["vals"][0] = 9.5

    def s3(sv, m):
        m["names"] = np.concatenate([m["names"], np.array(["six", "seven"], dtype=object)])
        m["codes"] = np.concatenate([m["codes"], np.array([b"", b"omega"], dtype="S8")])
        sv["names"].resize((8,))
        sv["names"][6] = "six"
        sv["names"][7] = "seven"
        sv["codes"].resize((7,))
        sv["codes"][6] = b"omega"

    for i, edit in enumerate((s1, s2, s3)):
        commit(vf, model, f"s{i + 1}", i, edit)


def manyversions(vf, model):
    def create(sv, m):
        m["counts"] = np.arange(512, dtype="<i4")
        sv.create_dataset("counts", data=m["counts"], chunks=(16,))

    commit(vf, model, "v00", 0, create)
    for i in range(1, 40):
        def edit(sv, m, i=i):
            m["counts"][37 * i % 512] = -i
            sv["counts"][37 * i % 512] = -i
        commit(vf, model, f"v{i:02d}", i, edit)


def tool(name):
    path = os.path.join(BIN, name)
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    if "1.14" not in out:
        sys.exit(f"make_latest.py: {path} is not HDF5 1.14's ({out.strip()}); set HDF5_114_BIN")
    return path


def model_of(path):
    """name -> {dataset: data} of every version, read through versioned-hdf5 (mode r)."""
    out = {}
    with h5py.File(path, "r") as f:
        vf = VersionedHDF5File(f)
        for name in vf.versions:
            ds = {}
            vf[name].visititems(lambda p, o: ds.__setitem__(p, o[()]) if isinstance(o, h5py.Dataset) else None)
            out[name] = ds
    return out


def repack(fixture):
    name = f"repack-{fixture}"
    if ONLY and name not in ONLY:
        return
    src, path = f"{FIXTURES}/{fixture}.h5", f"{OUT}/{name}.h5"
    if os.path.exists(path):
        os.remove(path)
    subprocess.run([tool("h5repack"), "-L", src, path], check=True)
    with h5py.File(path, "r") as f:
        assert f.id.get_create_plist().get_version()[0] == 3, path
    # Every version's dataset is still a virtual dataset (h5repack keeps the layout when
    # no -l is given), mapping into the copy's own raw_data.
    with h5py.File(path, "r") as f:
        vg = f["_version_data/versions"]
        n = 0
        for v in vg:
            def visit(p, o, v=v):
                nonlocal n
                if isinstance(o, h5py.Dataset):
                    assert o.is_virtual, (path, v, p, "not virtual after h5repack")
                    for m in o.virtual_sources():
                        assert m.file_name == ".", (path, v, p, m.file_name)
                    n += 1
            vg[v].visititems(visit)
        print(f"{path}: {os.path.getsize(path)} bytes, {n} version datasets all virtual")
    want = read_manifest(src)
    with open(f"{FIXTURES}/{fixture}.json") as r:
        m = json.load(r)
    assert json.loads(json.dumps(want)) == m, f"{src}: manifest differs from what versioned-hdf5 reads"
    check_read(path, model_of(src))
    got = read_manifest(path)
    m = copy.deepcopy(m)
    m["file"] = os.path.basename(path)
    assert json.loads(json.dumps(got)) == m, f"{path}: does not read as {src}'s manifest"
    write_manifest(m, path)


os.makedirs(OUT, exist_ok=True)
scenario("numeric", numeric)
scenario("strings", strings)
scenario("manyversions", manyversions)
repack("basic_1d")
repack("grid_2d_gzip")
