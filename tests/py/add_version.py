#!/usr/bin/python3
"""Commit a new version to a versioned-hdf5 file the way versioned-hdf5 lays it out, from
another process, while vh5fs has the file mounted with -o live (tests/live_test.go).

usage: add_version.py FILE NAME

The new version NAME is a copy of the current version (h5py Group.copy, i.e. H5Ocopy: the
virtual datasets keep their mappings into raw_data, attributes are copied), with
prev_version set to the current version and a new timestamp; then current_version moves to
NAME. Opened "r+" with h5py's default file locking: it fails if the mount held a lock.
"""
import datetime
import sys

import h5py


def main():
    path, name = sys.argv[1], sys.argv[2]
    with h5py.File(path, "r+") as f:
        vg = f["_version_data/versions"]
        cur = vg.attrs["current_version"]
        if isinstance(cur, bytes):
            cur = cur.decode()
        vg.copy(vg[cur], name)
        new = vg[name]
        new.attrs["prev_version"] = cur
        now = datetime.datetime.now(datetime.timezone.utc)
        new.attrs["timestamp"] = now.strftime("%Y-%m-%d %H:%M:%S.%f+0000")
        new.attrs["committed"] = True
        vg.attrs["current_version"] = name
    print("committed", name, "on", cur)


if __name__ == "__main__":
    main()
