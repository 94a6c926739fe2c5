"""xarray over `vh5fs refs` references against h5py, for fill values that are data (issue 31).

usage: xarray_refs.py make OUT.h5
       xarray_refs.py check --open EXPR FILE REFS.json [PREFIX]

make writes a plain HDF5 file whose datasets hold their fill value as real data, beside
chunks never written (which read as the fill value): "temp" int32 with fill 0 (the issue's
case), "zeros" float64 with fill 0, "minus" int64 with fill -1, "bytes" uint8 with fill 255,
"nan" float32 with fill NaN (and real NaNs), all chunked (4, 3) over (10, 7) with chunk (1, 1)
left unwritten; the root has a "timestamp" attribute, as a version's root has.

check evaluates EXPR (the README's xr.open_dataset call; "r5.json" in it stands for REFS)
and requires every dataset under PREFIX (a version's group, or "/" for a plain file) to read
through xarray with h5py's dtype and values (NaN where h5py has NaN); it also requires that
zarr reads the unwritten chunk as the fill value, and reports what a plain
xr.open_dataset(..., engine="zarr") without mask_and_scale=False does to each dataset, as
"plain: NAME DTYPE equal|masked N". Prints "xarray ok: N datasets equal to h5py's".
"""
import argparse
import math
import os
import sys

import h5py
import numpy as np
import xarray as xr
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refs_store import RefStore  # noqa: E402

SHAPE, CHUNKS = (10, 7), (4, 3)


def make(out):
    n = np.arange(SHAPE[0] * SHAPE[1]).reshape(SHAPE)
    cases = {
        "temp": ("<i4", 0, n % 3),
        "zeros": ("<f8", 0.0, (n % 4) * 0.5),
        "minus": ("<i8", -1, n % 5 - 2),
        "bytes": ("|u1", 255, (n * 37) % 256),
        "nan": ("<f4", float("nan"), np.where(n % 6 == 0, np.nan, n / 4)),
    }
    with h5py.File(out, "w") as f:
        f.attrs["timestamp"] = "2025-01-01 00:00:00.000000+0000"
        for name, (dtype, fill, values) in cases.items():
            ds = f.create_dataset(name, shape=SHAPE, chunks=CHUNKS, dtype=dtype, fillvalue=fill)
            values = values.astype(dtype)
            # Write every chunk but (1, 1): rows 4-7, columns 3-5 stay unwritten.
            ds[:4] = values[:4]
            ds[8:] = values[8:]
            ds[4:8, :3] = values[4:8, :3]
            ds[4:8, 6:] = values[4:8, 6:]
            if ds.id.get_num_chunks() != math.prod(-(-s // c) for s, c in zip(SHAPE, CHUNKS)) - 1:
                sys.exit(f"{name}: {ds.id.get_num_chunks()} chunks written")
            ds.attrs["units"] = "1"


def datasets(group, prefix=""):
    for name in sorted(group):
        obj = group[name]
        if isinstance(obj, h5py.Group):
            yield from datasets(obj, prefix + name + "/")
        elif isinstance(obj, h5py.Dataset):
            yield prefix + name, obj


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def check(expr, path, refs, prefix):
    env = {"xr": xr, "RefStore": RefStore}
    ds = eval(expr.replace('"r5.json"', repr(refs)), env)  # the README's call, as written
    plain = xr.open_dataset(RefStore(refs), engine="zarr", consolidated=False)
    root = zarr.open_group(RefStore(refs), mode="r")
    bad, n = [], 0
    with h5py.File(path, "r") as f:
        for rel, d in datasets(f[prefix]):
            if prefix == "/" and rel.startswith("_version_data"):
                continue
            want = d[()]
            got = ds[rel].values if rel in ds else None
            if got is None or not same(got, want):
                bad.append(f"{rel}: xarray read {None if got is None else got.dtype} "
                           f"{got if got is None else got.ravel()[:8]}, h5py {want.dtype} {want.ravel()[:8]}")
            p = plain[rel].values
            masked = int(np.count_nonzero(np.isnan(p))) - int(np.count_nonzero(np.isnan(want))) if p.dtype.kind == "f" else 0
            print(f"plain: {rel} {p.dtype} {'equal' if same(p, want) else 'masked %d' % masked}")
            if d.chunks and d.id.get_num_chunks() < math.prod(-(-s // c) for s, c in zip(d.shape, d.chunks)):
                z = root[rel][4:8, 3:6]
                fill = np.full(z.shape, d.fillvalue, dtype=d.dtype)
                if not same(z, fill) or not same(z, want[4:8, 3:6]):
                    bad.append(f"{rel}: zarr reads the unwritten chunk as {z.ravel()[:4]}, not the fill value {d.fillvalue}")
            n += 1
    if ds.attrs.get("timestamp") is None:
        bad.append(f"root attributes: {ds.attrs}")
    for b in bad:
        print("MISMATCH", b)
    if bad:
        sys.exit(f"{len(bad)} mismatches")
    print(f"xarray ok: {n} datasets equal to h5py's")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["check"])
    ap.add_argument("--open", required=True, help="the README's xr.open_dataset(...) call")
    ap.add_argument("file")
    ap.add_argument("refs")
    ap.add_argument("prefix", nargs="?", default="/")
    a = ap.parse_args()
    check(a.open, a.file, a.refs, a.prefix)


if __name__ == "__main__":
    main()
