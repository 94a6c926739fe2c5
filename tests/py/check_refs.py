"""Reads a file through the Zarr references `vh5fs refs` made of it and compares every
dataset, byte for byte, with h5py's read of the same file.

usage: check_refs.py (--version NAME | --all | --plain) [--manifest] FILE REFS.json [FILE REFS.json ...]

--version NAME: REFS describes version NAME at its root; --all: every version under
versions/NAME/ (and nothing else); --plain: REFS describes the file's plain tree. For a
versioned file h5py reads each version's virtual dataset; --manifest also checks each
dataset against the sha256 (or the values) versioned-hdf5 recorded in FILE's manifest
(FILE.json beside it, where there is one). Datasets the
references leave out are printed as "left out: VERSION/PATH" (or "left out: /PATH");
anything else that differs exits non-zero. Each file ends with a summary line.
"""
import argparse
import hashlib
import json
import os
import sys

import h5py
import numpy as np
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refs_store import RefStore  # noqa: E402

VERSIONS = "_version_data/versions"


def zarr_name(name):
    """Whether zarr can address a group or dataset of this name (see normalize_storage_path)."""
    return name not in (".", "..") and "\\" not in name


def datasets(group, prefix=""):
    """(relative path, h5py dataset) of every dataset under group, sorted, skipping
    _version_data at a file's root; (relative path, None) for a name zarr cannot address."""
    for name in sorted(group):
        if group.name == "/" and name == "_version_data":
            continue
        if not zarr_name(name):
            yield prefix + name, None
            continue
        obj = group.get(name)
        if isinstance(obj, h5py.Group):
            yield from datasets(obj, prefix + name + "/")
        elif isinstance(obj, h5py.Dataset):
            yield prefix + name, obj


def h5_bytes(ds):
    """The C-order bytes of ds, or its strings for variable-length strings."""
    if h5py.check_string_dtype(ds.dtype) is not None and ds.dtype.kind == "O":
        return [s.decode("utf-8") if isinstance(s, bytes) else s for s in ds[()].ravel().tolist()] if ds.size else []
    return np.ascontiguousarray(ds[()]).tobytes()


def zarr_bytes(arr):
    data = arr[...]
    if arr.dtype.kind == "O":
        return list(np.asarray(data).ravel()) if arr.size else []
    return np.ascontiguousarray(data).tobytes()


def check_group(f, h5group, zgroup, label, manifest_ds, counts, fail):
    for rel, ds in datasets(h5group):
        if ds is None or rel not in zgroup:
            print(f"left out: {label}{rel}")
            counts["left_out"] += 1
            continue
        arr = zgroup[rel]
        where = f"{label}{rel}"
        if tuple(arr.shape) != tuple(ds.shape):
            fail(f"{where}: zarr shape {arr.shape}, h5py {ds.shape}")
        want, got = h5_bytes(ds), zarr_bytes(arr)
        if isinstance(want, bytes) and arr.dtype.itemsize != ds.dtype.itemsize:
            fail(f"{where}: zarr itemsize {arr.dtype.itemsize}, h5py {ds.dtype.itemsize}")
        if want != got:
            fail(f"{where}: zarr's read differs from h5py's ({len(got)} vs {len(want)} {'bytes' if isinstance(want, bytes) else 'items'})")
        dims = arr.attrs.get("_ARRAY_DIMENSIONS")
        if not isinstance(dims, list) or len(dims) != ds.ndim:
            fail(f"{where}: _ARRAY_DIMENSIONS {dims!r} for {ds.ndim} dimensions")
        m = (manifest_ds or {}).get(rel)
        if m is not None:
            if isinstance(got, bytes):
                if "sha256" in m and hashlib.sha256(got).hexdigest() != m["sha256"]:
                    fail(f"{where}: sha256 differs from versioned-hdf5's")
            elif "values" in m and got != m["values"]:
                fail(f"{where}: values differ from versioned-hdf5's: {got!r} vs {m['values']!r}")
            counts["manifest"] += 1
        counts["datasets"] += 1
        counts["bytes"] += len(got) if isinstance(got, bytes) else sum(len(s) for s in got)


def check(path, refs, mode, version, manifest_path):
    """Checks one file against its references; returns (counts, problems)."""
    root = zarr.open_group(RefStore(refs), mode="r")
    manifest = {}
    if manifest_path:
        with open(manifest_path) as fh:
            manifest = {v["name"]: v["datasets"] for v in json.load(fh)["versions"]}
    counts = {"versions": 0, "datasets": 0, "bytes": 0, "left_out": 0, "manifest": 0}
    problems = []

    def fail(msg):
        problems.append(msg)
        print("MISMATCH", path, msg)

    with h5py.File(path, "r") as f:
        if mode == "plain":
            check_group(f, f, root, "/", None, counts, fail)
            return counts, problems
        if mode == "all":
            names = sorted(n for n in f[VERSIONS] if n != "__first_version__" and zarr_name(n)
                           and f[VERSIONS][n].attrs.get("committed", True))
            listed = sorted(root["versions"].group_keys())
            if listed != names:
                fail(f"versions in the references {listed} != committed versions {names}")
            if root.attrs.get("current_version") != f[VERSIONS].attrs["current_version"]:
                fail(f"current_version {root.attrs.get('current_version')!r}")
        else:
            names = [version]
        for name in names:
            zg = root["versions"][name] if mode == "all" else root
            if zg.attrs.get("timestamp") != f[VERSIONS][name].attrs.get("timestamp"):
                fail(f"{name}: timestamp {zg.attrs.get('timestamp')!r} in .zattrs")
            check_group(f, f[VERSIONS][name], zg, name + "/", manifest.get(name), counts, fail)
            counts["versions"] += 1
    return counts, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pairs", nargs="+", metavar="FILE REFS.json")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--version")
    mode.add_argument("--all", action="store_true")
    mode.add_argument("--plain", action="store_true")
    ap.add_argument("--manifest", action="store_true", help="check against FILE's manifest (FILE.json) where there is one")
    args = ap.parse_args()
    if len(args.pairs) % 2:
        ap.error("needs FILE REFS.json pairs")
    mode = "plain" if args.plain else "all" if args.all else "version"
    bad = 0
    for path, refs in zip(args.pairs[::2], args.pairs[1::2]):
        m = path[:-3] + ".json" if path.endswith(".h5") else None
        m = m if args.manifest and m and os.path.exists(m) else None
        counts, problems = check(path, refs, mode, args.version, m)
        bad += len(problems)
        print(f"refs ok: {os.path.basename(path)}: " if not problems else f"refs FAILED: {os.path.basename(path)}: ", end="")
        print(f"{counts['versions']} versions, {counts['datasets']} datasets, {counts['bytes']} bytes equal to h5py's, "
              f"{counts['manifest']} checked against the manifest, {counts['left_out']} left out")
    if bad:
        sys.exit(f"{bad} mismatches")


if __name__ == "__main__":
    main()
