#!/usr/bin/python3
"""Round-trip a versioned-hdf5 file through versioned-hdf5 on HDF5 1.14: read what is
expected, commit one version on top, read that back.

usage: latest_roundtrip.py FILE [MANIFEST [VERSION]] [--expect JSON] [--current NAME]
                           [--name NAME] [--no-commit] [--any-hdf5]

  MANIFEST  a manifest in the format of tests/testdata/fixtures/README.md: every version it
            names must read as it says (tree, group and dataset attributes, dtype, shape,
            chunks, fill value, sha256 / values, prev_version, timestamp).
  VERSION   the manifest version the current version must read as (default: the
            manifest's current_version). The current version may have another name (one
            vh5fs committed with the same content); then its prev_version and timestamp are
            not compared.
  --expect  what the current version must hold instead, e.g. one vh5fs committed that the
            manifest does not know: a JSON file (or the JSON text itself, starting with "{")
            that is either a manifest version ({"name", "datasets": {...}, ...}) or just its
            datasets object ({"a/b": {"dtype", "shape", "sha256" or "values", ...}}).
            Every key given is checked; missing keys are not.
  --current the name the current version must have (default: --expect's "name" if any,
            else the manifest's current_version unless VERSION is given).

Then, unless --no-commit, it commits version NAME (default "roundtrip") with versioned-hdf5's
stage_version on top of the current version: the last element of the first numeric dataset
(sorted by path; integer or float, not empty) is changed (ints + 1, floats + 1.5), and the
first 1-D variable-length string dataset, if any, gets one element appended
("roundtrip-\u00e9t\u00e9"). It reopens the file and checks that NAME is current, has the base
as prev_version, reads as the base with those edits (through HDF5's virtual datasets, mode
"r", and through versioned-hdf5's own chunk reads, mode "r+"), and that every version checked
before still reads the same.

It prints one JSON line: {"ok", "file", "hdf5", "h5py", "versioned_hdf5", "checked":
[versions], "current", "committed", "edits", "errors"} and exits 1 on any mismatch (2 on a
usage error). It changes FILE: give it a copy.

Needs versioned-hdf5 on an h5py built against HDF5 1.14 (tests/testdata/make_latest.py
says which); it refuses any other HDF5 unless --any-hdf5. Go tests run it only when
VH5FS_PY114 names the PYTHONPATH of that h5py + versioned-hdf5 + ndindex, as:

    VH5FS_PY114=/root/.cache/vh5fs/py114
    PYTHONPATH=$VH5FS_PY114 LD_LIBRARY_PATH=/root/.cache/vh5fs/hdf5-1.14.6/lib \\
        /usr/bin/python3 tests/py/latest_roundtrip.py COPY.h5 tests/testdata/latest/numeric-latest.json

(LD_LIBRARY_PATH: the directory of the libhdf5.so.310 that h5py was linked against; the
private build has an rpath to it, so it is only needed for builds without one.)
"""
import argparse
import base64
import hashlib
import json
import sys

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File

errors = []
out = {}


def fail(msg):
    errors.append(msg)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def is_vlen_str(dtype):
    return dtype.kind == "O" and h5py.check_string_dtype(dtype) is not None


def jsonable(x):
    """As the fixture generators write values (fixtures/README.md)."""
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


def norm(x):
    """A JSON value with bytes_b64 decoded and right-stripped of NULs (fixed-length strings
    read back without their padding), so that either spelling compares equal."""
    if isinstance(x, dict) and set(x) == {"bytes_b64"}:
        return ("bytes", base64.b64decode(x["bytes_b64"]).rstrip(b"\0"))
    if isinstance(x, list):
        return [norm(v) for v in x]
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, (int, float)):
        return float(x) if isinstance(x, float) else x
    return x


def check_dataset(where, obj, want):
    data = obj[()]
    if "shape" in want and list(obj.shape) != list(want["shape"]):
        fail(f"{where}: shape {list(obj.shape)}, want {want['shape']}")
        return
    if "chunks" in want:
        got = [int(c) for c in obj.attrs["chunks"]] if "chunks" in obj.attrs else list(obj.chunks or [])
        if got != list(want["chunks"]):
            fail(f"{where}: chunks {got}, want {want['chunks']}")
    if "attrs" in want:
        got = {k: jsonable(obj.attrs[k]) for k in obj.attrs}
        if norm(got) != norm(want["attrs"]):
            fail(f"{where}: attrs {got}, want {want['attrs']}")
    vlen = is_vlen_str(obj.dtype)
    if "fillvalue" in want:
        fv = obj.fillvalue
        if vlen and isinstance(fv, str):
            fv = fv.encode()
        if norm(jsonable(fv)) != norm(want["fillvalue"]):
            fail(f"{where}: fillvalue {jsonable(fv)!r}, want {want['fillvalue']!r}")
    if "dtype" in want:
        got = "vlen-str" if vlen else data.dtype.str
        if got != want["dtype"]:
            fail(f"{where}: dtype {got}, want {want['dtype']}")
            return
    if vlen:
        if "values" in want and [text(v) for v in data.ravel()] != want["values"]:
            fail(f"{where}: values {[text(v) for v in data.ravel()]}, want {want['values']}")
        return
    if "nbytes" in want and int(data.nbytes) != want["nbytes"]:
        fail(f"{where}: nbytes {data.nbytes}, want {want['nbytes']}")
    if want.get("sha256"):
        got = hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()
        if got != want["sha256"]:
            fail(f"{where}: sha256 {got}, want {want['sha256']}")
    if "values" in want and norm(jsonable(data.ravel())) != norm(want["values"]):
        fail(f"{where}: values {jsonable(data.ravel())}, want {want['values']}")


def check_version(vf, name, want):
    """Version name of vf (opened "r") reads as the manifest version want says."""
    if name not in vf.versions:
        fail(f"{name}: no such version (have {sorted(vf.versions)})")
        return
    g = vf[name]
    for k in ("prev_version", "timestamp"):
        if k in want and g.attrs[k] != want[k]:
            fail(f"{name}: {k} {g.attrs[k]!r}, want {want[k]!r}")
    if "attrs" in want:
        got = {k: jsonable(g.attrs[k]) for k in g.attrs
               if k not in ("prev_version", "committed", "timestamp")}
        if norm(got) != norm(want["attrs"]):
            fail(f"{name}: version attrs {got}, want {want['attrs']}")
    groups, datasets = {}, {}
    g.visititems(lambda p, o: (groups if isinstance(o, h5py.Group) else datasets).__setitem__(p, o))
    if "groups" in want:
        if sorted(groups) != sorted(want["groups"]):
            fail(f"{name}: groups {sorted(groups)}, want {sorted(want['groups'])}")
        for p, attrs in want["groups"].items():
            if p in groups:
                got = {k: jsonable(groups[p].attrs[k]) for k in groups[p].attrs}
                if norm(got) != norm(attrs):
                    fail(f"{name}/{p}: group attrs {got}, want {attrs}")
    if "datasets" in want:
        if sorted(datasets) != sorted(want["datasets"]):
            fail(f"{name}: datasets {sorted(datasets)}, want {sorted(want['datasets'])}")
        for p, d in want["datasets"].items():
            if p in datasets:
                check_dataset(f"{name}/{p}", datasets[p], d)


def read_all(group):
    """{path: data} of every dataset of a version group (h5py's or versioned-hdf5's)."""
    out = {}

    def visit(p, o):
        if not isinstance(o, h5py.Group):
            out[p] = o[()]

    group.visititems(visit)
    return out


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "O" or b.dtype.kind == "O":
        return [text(v) for v in a.ravel()] == [text(v) for v in b.ravel()]
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def load_json(arg):
    if arg.lstrip().startswith("{"):
        return json.loads(arg)
    with open(arg) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("manifest", nargs="?")
    ap.add_argument("version", nargs="?")
    ap.add_argument("--expect")
    ap.add_argument("--current")
    ap.add_argument("--name", default="roundtrip")
    ap.add_argument("--no-commit", action="store_true")
    ap.add_argument("--any-hdf5", action="store_true")
    a = ap.parse_args()
    if not a.manifest and not a.expect:
        ap.error("give a MANIFEST, --expect, or both")

    out.update(file=a.file, hdf5=h5py.version.hdf5_version, h5py=h5py.__version__)
    try:
        import versioned_hdf5
        out["versioned_hdf5"] = versioned_hdf5.__version__
    except Exception:  # no metadata installed
        out["versioned_hdf5"] = None
    if not a.any_hdf5 and h5py.version.hdf5_version_tuple[:2] < (1, 14):
        errors.append(f"h5py runs on HDF5 {h5py.version.hdf5_version}, not 1.14 (PYTHONPATH=$VH5FS_PY114?)")
        return out

    manifest = load_json(a.manifest) if a.manifest else None
    expect = load_json(a.expect) if a.expect else None
    if expect is not None and "datasets" not in expect:
        expect = {"datasets": expect}
    if expect is None:
        name = a.version or manifest["current_version"]
        expect = next((v for v in manifest["versions"] if v["name"] == name), None)
        if expect is None:
            ap.error(f"the manifest has no version {name!r}")
    current = None
    if a.current:
        current = a.current
    elif a.expect:
        current = expect.get("name")
    elif not a.version:
        current = manifest["current_version"]
    checked = []

    def check_all(f):
        vf = VersionedHDF5File(f)
        for v in (manifest or {}).get("versions", []):
            check_version(vf, v["name"], v)
            checked.append(v["name"])
        cur = vf.current_version
        if current and cur != current:
            fail(f"current_version {cur!r}, want {current!r}")
        want = expect
        if expect.get("name") not in (None, cur):
            want = {k: v for k, v in expect.items() if k not in ("prev_version", "timestamp")}
        check_version(vf, cur, want)
        return vf, cur

    with h5py.File(a.file, "r") as f:
        vf, base = check_all(f)
        out["current"] = base
        if "name" in expect:
            out["current_as"] = expect["name"]
        before = {v: read_all(vf[v]) for v in vf.versions}
    out["checked"] = checked
    if a.no_commit or errors:
        return out
    if a.name in before:
        fail(f"version {a.name!r} already exists")
        return out

    # Commit a.name on top of the current version.
    want = {p: np.array(d, copy=True) for p, d in before[base].items()}
    edits = []
    num = [p for p in sorted(want) if want[p].dtype.kind in "iuf" and want[p].size > 0]
    strs = [p for p in sorted(want) if want[p].dtype.kind == "O" and want[p].ndim == 1]
    with h5py.File(a.file, "r+") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version(a.name) as sv:
            if num:
                p = num[0]
                idx = np.unravel_index(want[p].size - 1, want[p].shape)
                old = want[p][idx]
                new = old + 1 if want[p].dtype.kind in "iu" else old + 1.5
                want[p][idx] = new
                sv[p][idx] = want[p][idx]
                edits.append({"dataset": p, "index": [int(i) for i in idx],
                              "old": jsonable(old), "new": jsonable(want[p][idx])})
            if strs:
                p = strs[0]
                s = "roundtrip-\u00e9t\u00e9"
                n = want[p].shape[0]
                want[p] = np.concatenate([want[p], np.array([s.encode()], dtype=object)])
                sv[p].resize((n + 1,))
                sv[p][n] = s
                edits.append({"dataset": p, "appended": s, "index": [n]})
    out["committed"] = a.name
    out["edits"] = edits
    if not edits:
        fail("no numeric or string dataset to edit in the current version")

    # Read it back: mode "r" (HDF5's virtual datasets), then mode "r+" (versioned-hdf5's
    # own reads of raw_data through the chunk mappings; nothing is committed).
    with h5py.File(a.file, "r") as f:
        vf = VersionedHDF5File(f)
        if vf.current_version != a.name:
            fail(f"after commit: current_version {vf.current_version!r}, want {a.name!r}")
        if a.name not in vf.versions:
            fail(f"after commit: no version {a.name!r}")
            return out
        if vf[a.name].attrs["prev_version"] != base:
            fail(f"{a.name}: prev_version {vf[a.name].attrs['prev_version']!r}, want {base!r}")
        for v, data in list(before.items()) + [(a.name, want)]:
            got = read_all(vf[v])
            if sorted(got) != sorted(data):
                fail(f"after commit, {v}: datasets {sorted(got)}, want {sorted(data)}")
            for p in data:
                if p in got and not same(got[p], data[p]):
                    fail(f"after commit, {v}/{p} (mode r) differs: {got[p]!r} != {data[p]!r}")
        for v in (manifest or {}).get("versions", []):
            check_version(vf, v["name"], v)
    with h5py.File(a.file, "r+") as f:
        vf = VersionedHDF5File(f)
        got = read_all(vf[a.name])
        for p in want:
            if p not in got or not same(got[p], want[p]):
                fail(f"after commit, {a.name}/{p} (mode r+) differs: {got.get(p)!r} != {want[p]!r}")
    return out


if __name__ == "__main__":
    try:
        result = main()
    except Exception as e:  # a read or commit that versioned-hdf5 refused
        result = out
        result["exception"] = f"{type(e).__name__}: {e}"
        errors.append(result["exception"])
    result["ok"] = not errors
    result["errors"] = errors
    print(json.dumps(result, sort_keys=True))
    sys.exit(0 if not errors else 1)
