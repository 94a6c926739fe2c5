"""Reads a version through its Zarr references with Dask on a LocalCluster of worker
processes, and with xarray, and compares with h5py's read of the version's virtual dataset.

usage: dask_refs.py FILE REFS.json VERSION DATASET [--workers N] [--bench REPS]

REFS describes VERSION at its root (`vh5fs refs FILE VERSION`). Checks: the Dask array's
bytes equal h5py's, its sum equals numpy's of h5py's read, every worker read chunks; xarray
opens the references and its variable equals h5py's. Prints "dask ok: ..." and
"xarray ok: ...".

--bench REPS: instead, times REPS runs each of h5py reading the version's virtual dataset
and summing it, and Dask reading the references and summing on the workers (task blocks of
about 32 MiB), and prints one JSON line {"h5py_s": [...], "dask_s": [...], "bytes": N}.
"""
import argparse
import json
import os
import sys
import time

import dask.array as da
import h5py
import numpy as np
import xarray as xr
import zarr
from distributed import Client, LocalCluster, wait

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refs_store import RefStore  # noqa: E402


def dask_array(refs, dataset, block_bytes=None):
    arr = zarr.open_group(RefStore(refs), mode="r")[dataset]
    if block_bytes is None:
        return arr, da.from_zarr(arr)
    row = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
    rows = max(arr.chunks[0], block_bytes // max(row, 1) // arr.chunks[0] * arr.chunks[0])
    return arr, da.from_zarr(arr, chunks=(rows,) + tuple(arr.shape[1:]))


def h5_read(file, version, dataset):
    with h5py.File(file, "r") as f:
        return f[f"_version_data/versions/{version}/{dataset}"][()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("refs")
    ap.add_argument("version")
    ap.add_argument("dataset")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--bench", type=int, default=0)
    a = ap.parse_args()

    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(a.workers)
        if a.bench:
            _, x = dask_array(a.refs, a.dataset, 32 << 20)
            out = {"h5py_s": [], "dask_s": [], "bytes": int(x.nbytes)}
            for _ in range(a.bench):
                t = time.perf_counter()
                s1 = h5_read(a.file, a.version, a.dataset).sum()
                out["h5py_s"].append(time.perf_counter() - t)
                t = time.perf_counter()
                s2 = x.sum().compute()
                out["dask_s"].append(time.perf_counter() - t)
                if s1 != s2:
                    sys.exit(f"sums differ: h5py {s1}, dask {s2}")
            print(json.dumps(out))
            return

        want = h5_read(a.file, a.version, a.dataset)
        arr, x = dask_array(a.refs, a.dataset)
        # Persist so that every chunk is read on a worker, then see which workers hold them.
        x = x.persist()
        wait(x)
        holders = {w for ws in client.who_has(x).values() for w in ws}
        got = x.compute()
        if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != np.ascontiguousarray(want).tobytes():
            sys.exit(f"dask: the read differs from h5py's ({got.dtype} {got.shape} vs {want.dtype} {want.shape})")
        total = x.sum().compute()
        if total != want.sum():
            sys.exit(f"dask: sum {total} != numpy's {want.sum()}")
        nblocks = int(np.prod(x.numblocks))
        if nblocks >= a.workers and len(holders) < a.workers:
            sys.exit(f"dask: {nblocks} blocks read by {len(holders)} of {a.workers} workers")
        print(f"dask ok: {a.workers} worker processes, {len(holders)} read {nblocks} blocks of zarr chunks {arr.chunks}, "
              f"{got.nbytes} bytes equal to h5py's, sum {total}")

    # As the README opens them: HDF5's fill value is data, not a missing-value mark (issue 31).
    ds = xr.open_zarr(RefStore(a.refs), consolidated=False, mask_and_scale=False)
    v = ds[a.dataset]
    if v.shape != want.shape or v.values.tobytes() != np.ascontiguousarray(want).tobytes():
        sys.exit("xarray: the variable differs from h5py's read")
    if ds.attrs.get("timestamp") is None:
        sys.exit(f"xarray: the version's attributes are missing: {ds.attrs}")
    print(f"xarray ok: {dict(ds.sizes)} {v.dtype} timestamp {ds.attrs['timestamp']}")


if __name__ == "__main__":
    main()
