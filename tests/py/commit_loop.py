"""Commits through a read-write vh5fs mount until killed.

usage: commit_loop.py MOUNTPOINT SEED

Each step rewrites a random band of current/data (int64 view of the float64 bytes), fsyncs
(one commit) and prints "VERSION SHA256" — the version the commit made and the sha256 of the
whole dataset it must hold — so a test can check, after killing the mount, that every
version reported stayed intact.
"""
import hashlib
import os
import sys

import numpy as np

mnt, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
path = os.path.join(mnt, "current", "data")
model = np.fromfile(path, dtype="<i8")
while True:
    n = int(rng.integers(1, 20000))
    start = int(rng.integers(0, len(model) - n))
    band = rng.integers(0, 2**60, size=n, dtype="<i8")
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, band.tobytes(), start * 8)
    os.fsync(fd)
    os.close(fd)
    model[start:start + n] = band
    version = os.readlink(os.path.join(mnt, "current")).split("/")[-1]
    print(version, hashlib.sha256(model.tobytes()).hexdigest(), flush=True)
