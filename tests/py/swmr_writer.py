#!/usr/bin/python3
"""A SWMR writer for vh5fs's live-mount tests (tests/live_test.go).

usage: swmr_writer.py FILE create|append STEPS [SLEEP_S]

create: makes FILE (libver="latest") with three chunked datasets, switches to SWMR mode,
prints "ready" and waits for a line on stdin; append: opens an existing FILE with "r+",
switches to SWMR mode and does the same. Then, STEPS times: grows every dataset, writes the
new elements, flushes, and prints "flush STEP TIME A_BYTES B_BYTES C_ROWS C_COLS" (TIME =
time.time() after the flush returned). Closes the file and prints "closed".

Every element is a known function of its position (the test checks them):
  /a      float64, 1-D, one unlimited dim, gzip, chunks (64,)     a[i]   = i + 1
  /g/b    int32, 2-D (n, 7), one unlimited dim, chunks (16, 7)   b[i,j] = 1000*i + j + 1
  /c      float64, 2-D, two unlimited dims (v2 B-tree), chunks (8, 8), fill -1; grows
          3 rows and (up to 64 columns) 2 columns a step         c[i,j] = 10000*i + j + 1
"""
import sys
import time

import h5py
import numpy as np

A_STEP, B_STEP, C_ROWS, C_COLS, C_MAX_COLS = 37, 5, 3, 2, 64


def a_vals(lo, hi):
    return np.arange(lo, hi, dtype="<f8") + 1


def b_vals(lo, hi):
    i = np.arange(lo, hi, dtype="<i4")[:, None]
    return (1000 * i + np.arange(7, dtype="<i4")[None, :] + 1).astype("<i4")


def c_vals(r0, r1, c0, c1):
    i = np.arange(r0, r1, dtype="<f8")[:, None]
    return 10000 * i + np.arange(c0, c1, dtype="<f8")[None, :] + 1


def main():
    path, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    if mode == "create":
        f = h5py.File(path, "w", libver="latest")
        f.create_dataset("a", shape=(0,), maxshape=(None,), chunks=(64,), dtype="<f8",
                         compression="gzip")
        g = f.create_group("g")
        g.create_dataset("b", shape=(0, 7), maxshape=(None, 7), chunks=(16, 7), dtype="<i4")
        f.create_dataset("c", shape=(0, 0), maxshape=(None, None), chunks=(8, 8), dtype="<f8",
                         fillvalue=-1.0)
    else:
        f = h5py.File(path, "r+", libver="latest")
    f.swmr_mode = True
    a, b, c = f["a"], f["g/b"], f["c"]
    print("ready", flush=True)
    sys.stdin.readline()
    for step in range(steps):
        n = a.shape[0]
        a.resize((n + A_STEP,))
        a[n:] = a_vals(n, n + A_STEP)
        a.flush()
        n = b.shape[0]
        b.resize((n + B_STEP, 7))
        b[n:] = b_vals(n, n + B_STEP)
        b.flush()
        r, k = c.shape
        dk = C_COLS if k < C_MAX_COLS else 0
        c.resize((r + C_ROWS, k + dk))
        if r > 0 and dk:
            c[:r, k:] = c_vals(0, r, k, k + dk)
        c[r:, :] = c_vals(r, r + C_ROWS, 0, k + dk)
        c.flush()
        print("flush %d %.6f %d %d %d %d" % (step, time.time(), a.shape[0] * 8, b.shape[0] * 28,
                                             c.shape[0], c.shape[1]), flush=True)
        if pause:
            time.sleep(pause)
    f.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
