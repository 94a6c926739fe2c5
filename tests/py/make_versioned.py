"""Writes a versioned-hdf5 file by hand, following the on-disk format, for tests and
benchmarks that need sizes the reference fixtures do not have.

usage: make_versioned.py OUT.h5 --shape R[,C] --chunks R[,C] [--gzip|--lzf] [--versions N]
           [--dtype DTYPE [--modulo M] [--fillvalue JSON]] [--history N [--log-everywhere]]

Dataset "data" (float64) holds element (i, j) = i * C + j (its C-order index) in the first
version "v0"; version vK (K >= 1) rewrites chunk K-1 (mod the number of chunks) with -K.
Every chunk is stored once in raw_data with a correct hash-table row, and each version is a
virtual dataset with one mapping per chunk, as versioned-hdf5 writes it.

--dtype makes "data" of another numpy dtype; an element's value is then derived from its
C-order index n (and -K for vK's chunk): numeric types hold n % M (n when M is 0, the
default) converted to the dtype; fixed-length strings "|SW" hold n % 10**W as W decimal
digits; compound types hold (n * (2k + 1)) % M in field k. --fillvalue is the dataset's fill
value as JSON: a number, a string (its latin-1 bytes) or a list (a compound's fields).
"""
import argparse
import hashlib
import itertools
import json
import math
from datetime import datetime, timedelta, timezone

import h5py
import numpy as np


def stamp(t):
    return t.strftime("%Y-%m-%d %H:%M:%S.%f%z")


def suffix(shape):
    return ("(%d,)" % shape[0]) if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", required=True)
    ap.add_argument("--chunks", required=True)
    ap.add_argument("--gzip", action="store_true", help="gzip level 4 + shuffle")
    ap.add_argument("--lzf", action="store_true", help="LZF (filter 32000)")
    ap.add_argument("--versions", type=int, default=1)
    ap.add_argument("--history", type=int, default=0,
                    help="versions h0.. before v0 that hold only a one-element dataset 'log'")
    ap.add_argument("--log-everywhere", action="store_true",
                    help="the versions vK hold 'log' too (h0..'s last element) beside 'data'")
    ap.add_argument("--dtype", default="<f8", help="numpy dtype of 'data'")
    ap.add_argument("--modulo", type=int, default=0, help="values are taken modulo M (see above)")
    ap.add_argument("--fillvalue", default="0", help="fill value of 'data', JSON")
    a = ap.parse_args()
    dt = np.dtype(a.dtype)
    fv = json.loads(a.fillvalue)
    if isinstance(fv, str):
        fv = fv.encode("latin-1")
    elif isinstance(fv, list):
        fv = tuple(fv)
    fill = np.array(fv, dtype=dt)[()]

    def values(n):
        """The elements for C-order indices n (an int64 array), as described above."""
        if dt.names:
            out = np.zeros(n.shape, dtype=dt)
            for k, name in enumerate(dt.names):
                out[name] = (n * (2 * k + 1)) % a.modulo
            return out
        if dt.kind == "S":
            w = dt.itemsize
            return np.array([b"%0*d" % (w, x % 10 ** w) for x in n.flat], dtype=dt).reshape(n.shape)
        return (n % a.modulo if a.modulo else n).astype(dt)
    shape = tuple(int(x) for x in a.shape.split(","))
    chunks = tuple(int(x) for x in a.chunks.split(","))
    grid = [math.ceil(s / c) for s, c in zip(shape, chunks)]
    cells = list(itertools.product(*[range(g) for g in grid]))
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)

    with h5py.File(a.out, "w", libver=("earliest", "v110")) as f:
        vd = f.create_group("_version_data")
        versions = vd.create_group("versions")
        versions.attrs["data_version"] = np.int64(4)
        first = versions.create_group("__first_version__")
        first.attrs["timestamp"] = stamp(t0)
        grp = vd.create_group("data")
        kw = dict(compression="gzip", compression_opts=4, shuffle=True) if a.gzip else {}
        if a.lzf:
            kw = dict(compression="lzf")
        raw = grp.create_dataset("raw_data", shape=(0,) + chunks[1:], maxshape=(None,) + chunks[1:],
                                 chunks=chunks, dtype=dt, fillvalue=fill, **kw)
        raw.attrs["chunks"] = np.array(chunks, dtype=np.int64)
        hdt = np.dtype([("hash", "u1", (32,)), ("shape", "<i8", (2,))])
        ht = grp.create_dataset("hash_table", shape=(1,), maxshape=(None,), chunks=(4096,), dtype=hdt,
                                compression="lzf")
        rows = []

        def store(block):
            """Appends one chunk slot holding block (trimmed); returns its slot offset."""
            k = len(rows)
            raw.resize(((k + 1) * chunks[0],) + chunks[1:])
            raw[(slice(k * chunks[0], k * chunks[0] + block.shape[0]),) + tuple(slice(0, n) for n in block.shape[1:])] = block
            digest = hashlib.sha256(np.ascontiguousarray(block).tobytes() + suffix(block.shape).encode()).digest()
            rows.append((np.frombuffer(digest, "u1"), (k * chunks[0], k * chunks[0] + block.shape[0])))
            return k * chunks[0]

        def chunk_box(cell):
            return tuple(slice(g * c, min((g + 1) * c, s)) for g, c, s in zip(cell, chunks, shape))

        def initial(cell):
            box = chunk_box(cell)
            idx = np.zeros([b.stop - b.start for b in box], dtype=np.int64)
            for ax, b in enumerate(box):
                r = np.arange(b.start, b.stop) * strides[ax]
                idx += r.reshape([-1 if i == ax else 1 for i in range(len(box))])
            return values(idx)

        # The first version's chunks go to slots 0..n-1 in grid order, written in one go.
        big = np.full((len(cells) * chunks[0],) + chunks[1:], fill, dtype=dt)
        slots = {}
        for k, cell in enumerate(cells):
            block = initial(cell)
            big[(slice(k * chunks[0], k * chunks[0] + block.shape[0]),) + tuple(slice(0, n) for n in block.shape[1:])] = block
            digest = hashlib.sha256(np.ascontiguousarray(block).tobytes() + suffix(block.shape).encode()).digest()
            rows.append((np.frombuffer(digest, "u1"), (k * chunks[0], k * chunks[0] + block.shape[0])))
            slots[cell] = k * chunks[0]
        raw.resize(big.shape)
        raw[...] = big
        prev = "__first_version__"
        if a.history:
            lg = vd.create_group("log")
            lraw = lg.create_dataset("raw_data", shape=(a.history,), maxshape=(None,), chunks=(1,), dtype="<i8")
            lraw.attrs["chunks"] = np.array([1], dtype=np.int64)
            lraw[:] = np.arange(a.history)
            lrows = [(np.frombuffer(hashlib.sha256(np.int64(k).tobytes() + b"(1,)").digest(), "u1"), (k, k + 1))
                     for k in range(a.history)]
            lht = lg.create_dataset("hash_table", shape=(a.history,), maxshape=(None,), chunks=(4096,), dtype=hdt,
                                    compression="lzf")
            lht[:] = np.array(lrows, dtype=hdt)
            lht.attrs["largest_index"] = np.int64(a.history)
            for k in range(a.history):
                name = "h%d" % k
                g = versions.create_group(name)
                g.attrs["prev_version"] = prev
                g.attrs["committed"] = np.bool_(True)
                g.attrs["timestamp"] = stamp(t0 - timedelta(seconds=a.history - k))
                lay = h5py.VirtualLayout(shape=(1,), dtype="<i8", maxshape=(1,))
                lay[0:1] = h5py.VirtualSource(".", "/_version_data/log/raw_data", shape=(a.history,))[k:k + 1]
                ds = g.create_virtual_dataset("log", lay, fillvalue=0)
                ds.attrs["raw_data"] = "/_version_data/log/raw_data"
                ds.attrs["chunks"] = np.array([1], dtype=np.int64)
                prev = name
        for v in range(a.versions):
            if v > 0:
                cell = cells[(v - 1) % len(cells)]
                block = values(np.full(initial(cell).shape, -v, dtype=np.int64))
                slots = dict(slots)
                slots[cell] = store(block)
            name = "v%d" % v
            g = versions.create_group(name)
            g.attrs["prev_version"] = prev
            g.attrs["committed"] = np.bool_(True)
            g.attrs["timestamp"] = stamp(t0 + timedelta(seconds=v + 1))
            layout = h5py.VirtualLayout(shape=shape, dtype=dt, maxshape=shape)
            src = h5py.VirtualSource(".", "/_version_data/data/raw_data", shape=raw.shape)
            for cell in cells:
                box = chunk_box(cell)
                off = slots[cell]
                layout[box] = src[(slice(off, off + box[0].stop - box[0].start),) +
                                  tuple(slice(0, b.stop - b.start) for b in box[1:])]
            if dt.kind == "S":
                # h5py's low-level set_fill_value stores garbage for fixed-length strings;
                # its create_dataset passes them as a variable-length string, so do that.
                dcpl = layout._get_dcpl(f.filename)
                dcpl.set_fill_value(np.array(fill, dtype=h5py.string_dtype("ascii")))
                space = h5py.h5s.create_simple(shape, shape)
                tid = h5py.h5t.py_create(dt, logical=1)
                ds = h5py.Dataset(h5py.h5d.create(g.id, b"data", tid, space, dcpl=dcpl))
            else:
                ds = g.create_virtual_dataset("data", layout, fillvalue=fill)
            ds.attrs["raw_data"] = "/_version_data/data/raw_data"
            ds.attrs["chunks"] = np.array(chunks, dtype=np.int64)
            if a.history and a.log_everywhere:
                lay = h5py.VirtualLayout(shape=(1,), dtype="<i8", maxshape=(1,))
                lay[0:1] = h5py.VirtualSource(".", "/_version_data/log/raw_data", shape=(a.history,))[a.history - 1:]
                ds = g.create_virtual_dataset("log", lay, fillvalue=0)
                ds.attrs["raw_data"] = "/_version_data/log/raw_data"
                ds.attrs["chunks"] = np.array([1], dtype=np.int64)
            prev = name
        ht.resize((len(rows),))
        ht[:] = np.array(rows, dtype=hdt)
        ht.attrs["largest_index"] = np.int64(len(rows))
        versions.attrs["current_version"] = prev


if __name__ == "__main__":
    main()
