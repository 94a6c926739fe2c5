"""Writes the string-write goldens in fixtures/ with versioned-hdf5 itself (issue 50,
item 1), in the golden-edit form of fixtures/README.md.

Run from this directory with a versioned-hdf5 importable (master 5389a78 on h5py 3.16 /
HDF5 1.14.6, default libver, so that Debian's HDF5 1.10 reads them):

    PYTHONPATH=/root/.cache/vh5fs/py114 /usr/bin/python3 make_string_writes.py [OUTDIR]

Each golden is a file of a few versions of a variable-length string dataset, then ONE
stage_version that gives it new values as a write of its file does: resized to the new
element count when that differs, then assigned whole (ds[:] = values). byte_ops are the
new JSON-lines text (one JSON string per element, C order): a truncate to 0 and one
pwrite, or an append (a pwrite at the old end).
"""
import json
import shutil
import sys
from datetime import datetime, timezone

import h5py
import numpy as np
from versioned_hdf5 import VersionedHDF5File

from make_lifecycle_strings import manifest, text

OUT = sys.argv[1] if len(sys.argv) > 1 else "fixtures"
UTF8 = h5py.string_dtype("utf-8")
ASCII = h5py.string_dtype("ascii")
GOLDEN_TS = datetime(2024, 2, 11, 16, tzinfo=timezone.utc)


def ts(day):
    return datetime(2024, 3, day, tzinfo=timezone.utc)


def lines(values):
    """The file's text form (versions.TextForm): one JSON string per line."""
    return "".join(json.dumps(text(v), ensure_ascii=False) + "\n" for v in np.ravel(values)).encode()


def golden(name, description, dtype, chunks, history, new, append=False):
    before, after = f"{OUT}/{name}-before.h5", f"{OUT}/{name}-after.h5"
    with h5py.File(before, "w") as f:
        vf = VersionedHDF5File(f)
        for i, vals in enumerate(history):
            with vf.stage_version(f"v{i + 1}", timestamp=ts(i + 1)) as sv:
                arr = np.array(vals, dtype=object)
                if i == 0:
                    sv.create_dataset("s", data=arr, dtype=dtype, chunks=chunks, maxshape=(None,) + arr.shape[1:])
                else:
                    sv["s"].resize(arr.shape)
                    sv["s"][...] = arr
    shutil.copyfile(before, after)
    old = np.array(history[-1], dtype=object)
    arr = np.array(new, dtype=object)
    with h5py.File(after, "r+") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("golden", timestamp=GOLDEN_TS) as sv:
            ds = sv["s"]
            if ds.shape != arr.shape:
                ds.resize(arr.shape)
            ds[...] = arr
    manifest(before)
    manifest(after)
    if append:
        ops = [{"op": "pwrite", "offset": len(lines(old)), "hex": lines(arr[len(old):]).hex()}]
    else:
        ops = [{"op": "truncate", "size": 0}, {"op": "pwrite", "offset": 0, "hex": lines(arr).hex()}]
    edit = {
        "description": description,
        "dataset": "s",
        "base_version": f"v{len(history)}",
        "new_version": "golden",
        "new_version_timestamp": GOLDEN_TS.strftime("%Y-%m-%d %H:%M:%S.%f%z"),
        "numpy_edits": [["set", "[...]", json.dumps([text(v) for v in arr.ravel()], ensure_ascii=False)]],
        "byte_ops": ops,
    }
    with open(f"{OUT}/{name}.edit.json", "w") as w:
        json.dump(edit, w, indent=1, ensure_ascii=False)
        w.write("\n")


NAMES = ["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "eta", "θ", "iota", "kappa"]

golden("golden_strings_change", "two elements of a 1-D UTF-8 dataset changed", UTF8, (4,),
       [NAMES, NAMES[:6] + ["ETA"] + NAMES[7:]],
       ["alpha", "β2", "gamma", "delta", "épsilon", "zeta", "ETA", "θ", "ι✓", "kappa"])
golden("golden_strings_append", "three elements appended: axis 0 grows, the edge chunk is rewritten", UTF8, (4,),
       [NAMES], NAMES + ["lambda", "μ", ""], append=True)
golden("golden_strings_shrink", "truncated to 5 elements: the new edge chunk is stored anew", UTF8, (4,),
       [NAMES], NAMES[:5])
golden("golden_strings_ascii", "an ASCII dataset: one element changed", ASCII, (3,),
       [[b"AAPL", b"MSFT", b"GOOG", b"AMZN", b"META"]], ["AAPL", "MSFT", "NVDA", "AMZN", "META"])
golden("golden_strings_dedup", "chunk 1 rewritten with chunk 0's strings: it maps chunk 0's slot", UTF8, (4,),
       [NAMES[:8]], NAMES[:4] + NAMES[:4])
golden("golden_strings_2d", "a 2-D dataset (rows of 2) grown by a row: chunks of 2x2 hashed by their trimmed boxes", UTF8, (2, 2),
       [[["a", "b"], ["c", "d"], ["e", "f"]]], [["a", "b"], ["c", "D"], ["e", "f"], ["g", "h"]])


def stage_golden(name):
    """One version that creates string datasets beside a changed one, as a stage makes it:
    tickers (ASCII, chunks 2), grid (UTF-8, 2-D, chunks 2x2) created, s replaced whole."""
    before, after = f"{OUT}/{name}-before.h5", f"{OUT}/{name}-after.h5"
    with h5py.File(before, "w") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("v1", timestamp=ts(1)) as sv:
            sv.create_dataset("s", data=np.array(NAMES, dtype=object), dtype=UTF8, chunks=(4,))
    shutil.copyfile(before, after)
    with h5py.File(after, "r+") as f:
        vf = VersionedHDF5File(f)
        with vf.stage_version("golden", timestamp=GOLDEN_TS) as sv:
            sv.create_dataset("tickers", data=np.array([b"AAPL", b"MSFT", b"NVDA"], dtype=object), dtype=ASCII, chunks=(2,))
            sv.create_dataset("grid", data=np.array([["a", "b"], ["ç", "d"], ["e", ""]], dtype=object), dtype=UTF8,
                              chunks=(2, 2))
            ds = sv["s"]
            ds.resize((3,))
            ds[...] = np.array(["one", "two", "alpha"], dtype=object)
    manifest(before)
    manifest(after)


stage_golden("golden_stage_strings")
