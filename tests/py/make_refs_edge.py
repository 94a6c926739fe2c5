"""Writes the files that exercise the edge cases of `vh5fs refs`.

usage: make_refs_edge.py PLAIN.h5 VERSIONED.h5

PLAIN.h5 (a plain HDF5 file):
  gzip_masked   gzip + shuffle, chunks (4, 3); chunk (1, 1) written directly with filter
                mask 0b10 (deflate skipped: stored shuffled, not compressed); unwritten
                chunks read as the fill value NaN
  fletcher      shuffle + gzip + Fletcher-32 (h5py's order: the checksum last), fill +inf
  fletcher_raw  Fletcher-32 alone; chunk 1 written with its checksum skipped (mask 0b1)
  lzf           LZF: left out
  neg_inf       float32 big-endian, fill -inf, only chunk 0 written
  scalar        a 0-d float64 (compact storage)
  contiguous    contiguous int16
  compound      a compound (|V12) dataset, chunked, gzip
  words         variable-length UTF-8 strings, 2-D
  ragged        variable-length int32 sequences: no byte form, left out
  half          float16, fill 1.5
VERSIONED.h5 (the versioned-hdf5 layout, by make_versioned.py, 10x7 float64 in (4, 3)
chunks, gzip + shuffle, 3 versions): then raw_data's slot 0 (chunk (0, 0) of every version)
is rewritten with filter mask 0b10 holding the same values.
"""
import os
import subprocess
import sys
import zlib

import h5py
import numpy as np


def shuffle(b, itemsize):
    a = np.frombuffer(b, np.uint8).reshape(-1, itemsize)
    return a.T.tobytes()


def main():
    plain, versioned = sys.argv[1], sys.argv[2]
    with h5py.File(plain, "w") as f:
        d = f.create_dataset("gzip_masked", shape=(10, 7), chunks=(4, 3), dtype="<f8",
                             compression="gzip", compression_opts=4, shuffle=True, fillvalue=np.nan)
        d[0:4, 0:3] = np.arange(12).reshape(4, 3)
        d[8:10, 6:7] = [[1.0], [2.0]]
        block = (np.arange(12, dtype="<f8").reshape(4, 3) + 100).tobytes()
        d.id.write_direct_chunk((4, 3), shuffle(block, 8), filter_mask=0b10)
        d.attrs["units"] = "K"
        d.attrs["scale"] = np.float32(0.5)
        d.attrs["missing"] = np.nan

        d = f.create_dataset("fletcher", shape=(9,), chunks=(4,), dtype="<i8", compression="gzip",
                             shuffle=True, fletcher32=True, fillvalue=np.int64(-3))
        d[0:5] = np.arange(5) * 7

        d = f.create_dataset("fletcher_raw", shape=(8,), chunks=(4,), dtype="<u2", fletcher32=True)
        d[0:4] = [1, 2, 3, 4]
        d.id.write_direct_chunk((4,), np.array([5, 6, 7, 8], "<u2").tobytes(), filter_mask=0b1)

        f.create_dataset("lzf", data=np.arange(20, dtype="<f4"), chunks=(5,), compression="lzf")

        d = f.create_dataset("neg_inf", shape=(6,), chunks=(3,), dtype=">f4", fillvalue=-np.inf)
        d[0:3] = [1, 2, 3]

        f.create_dataset("scalar", data=np.float64(2.5))
        f.create_dataset("contiguous", data=np.arange(-5, 5, dtype="<i2"))
        ct = np.dtype([("a", "<i4"), ("b", "<f8")])
        f.create_dataset("compound", data=np.array([(i, i / 2) for i in range(7)], ct), chunks=(3,), compression="gzip")

        d = f.create_dataset("words", shape=(2, 3), dtype=h5py.string_dtype("utf-8"))
        d[...] = [["ann", "bob", ""], ["zoë", "a\nb", "\"quoted\""]]

        d = f.create_dataset("ragged", shape=(2,), dtype=h5py.vlen_dtype(np.int32))
        d[0] = [1, 2, 3]
        d[1] = [4]

        d = f.create_dataset("half", shape=(5,), chunks=(2,), dtype="<f2", fillvalue=1.5)
        d[0:2] = [0.25, -2]

    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "make_versioned.py"), versioned, "--shape", "10,7",
                    "--chunks", "4,3", "--versions", "3", "--gzip"], check=True)
    with h5py.File(versioned, "r+") as f:
        raw = f["_version_data/data/raw_data"]
        block = np.ascontiguousarray(raw[0:4, 0:3]).tobytes()
        raw.id.write_direct_chunk((0, 0), shuffle(block, 8), filter_mask=0b10)
    with h5py.File(versioned, "r") as f:  # a fresh open: libhdf5's chunk cache held the old chunk
        raw = f["_version_data/data/raw_data"]
        assert raw.id.get_chunk_info_by_coord((0, 0)).filter_mask == 0b10
        assert np.array_equal(raw[0:4, 0:3], np.frombuffer(block, "<f8").reshape(4, 3))


if __name__ == "__main__":
    main()
