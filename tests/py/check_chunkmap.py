"""Reads every version of a mounted file straight from the .h5 bytes using only the chunk
maps vh5fs publishes in xattrs, and compares with the mounted files.

usage: check_chunkmap.py MOUNTPOINT

For every raw dataset file under versions/: gather the byteBlocks of user.vh5fs.chunkmap
(and its pages user.vh5fs.chunkmap.N), read each block at offset/size from the HDF5 file,
decode it with this script's own filters (zlib, shuffle, LZF, none — nothing from vh5fs or
HDF5), trim edge chunks, and compare with the mounted bytes. Every chunk without a key must
be all fill. Prints a summary line; exits non-zero on the first mismatch.
"""
import base64
import itertools
import json
import math
import os
import sys
import zlib

import numpy as np


def lzf_decompress(data, out_len):
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        ctrl = data[i]
        i += 1
        if ctrl < 32:  # literal run
            out += data[i:i + ctrl + 1]
            i += ctrl + 1
            continue
        length = ctrl >> 5
        ref = len(out) - ((ctrl & 0x1F) << 8) - 1
        if length == 7:
            length += data[i]
            i += 1
        ref -= data[i]
        i += 1
        for _ in range(length + 2):
            out.append(out[ref])
            ref += 1
    assert len(out) == out_len, f"lzf: {len(out)} bytes, want {out_len}"
    return bytes(out)


def unshuffle(data, itemsize):
    n = len(data) // itemsize
    return np.frombuffer(data[:n * itemsize], np.uint8).reshape(itemsize, n).T.tobytes() + data[n * itemsize:]


def decode(raw, filters, mask, itemsize, nbytes):
    for k in reversed(range(len(filters))):
        if mask & (1 << k):
            continue
        fid = filters[k]["id"]
        if fid == 1:
            raw = zlib.decompress(raw)
        elif fid == 2:
            raw = unshuffle(raw, itemsize)
        elif fid == 32000:
            raw = lzf_decompress(raw, nbytes)
        else:
            raise SystemExit(f"filter {fid} not implemented by this checker")
    return raw


def chunkmap(path):
    doc = json.loads(os.getxattr(path, "user.vh5fs.chunkmap"))
    blocks = {}
    for p in range(doc["byteBlocks"]["pages"]):
        blocks.update(json.loads(os.getxattr(path, f"user.vh5fs.chunkmap.{p}")))
    inline = {k: v for k, v in doc["byteBlocks"].items() if k not in ("index_schema", "pages", "page_xattr")}
    assert not inline or inline == blocks, f"{path}: inline blocks differ from pages"
    return doc, blocks


def fill_value(path, dtype):
    v = json.loads(os.getxattr(path, "user.vh5fs.fillvalue"))
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bytes_b64"]).ljust(dtype.itemsize, b"\0"), dtype)[0]
    if dtype.kind == "c":
        return np.array(complex(float(v[0]), float(v[1])), dtype)
    if isinstance(v, str):  # "NaN", "Infinity", "-Infinity"
        v = float(v.replace("Infinity", "inf"))
    return np.array(v, dtype)


def same(a, b):
    if a.dtype.kind in "fc":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def main(mnt):
    nblocks = nfill = ndatasets = 0
    h5 = None
    for root, _, files in os.walk(os.path.join(mnt, "versions")):
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.getxattr(path, "user.vh5fs.format") != b"raw":
                continue
            doc, blocks = chunkmap(path)
            if h5 is None:
                h5 = open(doc["file"], "rb")
            dtype = np.dtype(doc["dtype"])
            shape = doc["shape"]["dims"]
            chunks = doc["dcpl"]["layout"]["dims"]
            filters = doc["dcpl"]["filters"]
            fill = fill_value(path, dtype)
            mounted = np.fromfile(path, dtype=dtype).reshape(shape)
            grid = [math.ceil(s / c) for s, c in zip(shape, chunks)]
            seen = set()
            for g in itertools.product(*[range(n) for n in grid]):
                key = "_".join(map(str, g))
                box = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(g, chunks, shape))
                region = mounted[box]
                if key not in blocks:
                    assert same(region, np.broadcast_to(fill, region.shape)), f"{path} chunk {key}: unmapped but not fill"
                    nfill += 1
                    continue
                seen.add(key)
                b = blocks[key]
                h5.seek(b["offset"])
                raw = h5.read(b["size"])
                nbytes = int(np.prod(chunks)) * dtype.itemsize
                data = decode(raw, filters, b.get("filter_mask", 0), dtype.itemsize, nbytes)
                chunk = np.frombuffer(data, dtype=dtype, count=int(np.prod(chunks))).reshape(chunks)
                trimmed = chunk[tuple(slice(0, r.stop - r.start) for r in box)]
                assert same(trimmed, region), f"{path} chunk {key}: block bytes differ from the mounted file"
                nblocks += 1
            assert seen == set(blocks), f"{path}: keys outside the grid: {set(blocks) - seen}"
            ndatasets += 1
    print(f"chunkmap ok: {ndatasets} datasets, {nblocks} blocks, {nfill} fill chunks")


if __name__ == "__main__":
    main(sys.argv[1])
