"""Prints, as JSON, what libhdf5 (through h5py) says about the datasets of an HDF5 file, for
h5meta's tests: object header address, layout, VDS mappings and chunk index.

usage: /usr/bin/python3 expect.py FILE.h5 [--no-chunks] [--no-mappings] [--addrs]

--addrs prints only "path" and "addr" of every dataset, without opening them (opening a VDS
with 100k mappings takes libhdf5 seconds), and the same of every group under "groups".

Output: {"datasets": [{"path", "addr", "layout" ("virtual"|"chunked"|"contiguous"|"compact"),
"shape", "mappings": [{"vstart", "vcount", "src_file", "src_dataset", "src_start",
"src_count"} | {"unsupported": reason}], "chunks": [{"offset", "addr", "size", "filter_mask"}]}]}
"""
import json
import sys

import h5py


def block(space):
    """(start, extent) of a selection that is one regular block, else None."""
    t = space.get_select_type()
    if t == h5py.h5s.SEL_ALL:
        return [0] * space.get_simple_extent_ndims(), list(space.shape)
    if t != h5py.h5s.SEL_HYPERSLABS or not space.is_regular_hyperslab():
        return None
    start, stride, count, blk = space.get_regular_hyperslab()
    ext = []
    for s, st, c, b in zip(start, stride, count, blk):
        if c == 1 or st == b:
            ext.append(c * b)
        elif b == 1 and st == 1:
            ext.append(c)
        else:
            return None
    return list(start), ext


def main():
    path = sys.argv[1]
    opts = set(sys.argv[2:])
    out = []
    with h5py.File(path, "r") as f:
        if "--addrs" in opts:
            names = []
            f.id.links.visit(names.append)
            groups = [{"path": "/", "addr": h5py.h5o.get_info(f.id).addr}]
            for n in sorted(names):
                info = h5py.h5o.get_info(f.id, n, lapl=None)
                e = {"path": "/" + n.decode(), "addr": info.addr}
                if info.type == h5py.h5o.TYPE_DATASET:
                    out.append(e)
                elif info.type == h5py.h5o.TYPE_GROUP:
                    groups.append(e)
            json.dump({"datasets": out, "groups": groups}, sys.stdout)
            return
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in sorted(names):
            ds = f[n]
            addr = h5py.h5o.get_info(ds.id).addr
            lay = ds.id.get_create_plist().get_layout()
            e = {"path": "/" + n, "addr": addr, "shape": list(ds.shape)}
            if lay == h5py.h5d.VIRTUAL:
                e["layout"] = "virtual"
                if "--no-mappings" not in opts:
                    ms = []
                    for m in ds.virtual_sources():
                        v, s = block(m.vspace), block(m.src_space)
                        if v is None or s is None:
                            ms.append({"unsupported": "irregular"})
                            continue
                        ms.append({"vstart": v[0], "vcount": v[1], "src_file": m.file_name,
                                   "src_dataset": m.dset_name, "src_start": s[0], "src_count": s[1]})
                    e["mappings"] = ms
            elif lay == h5py.h5d.CHUNKED:
                e["layout"] = "chunked"
                if "--no-chunks" not in opts:
                    cs = []
                    for i in range(ds.id.get_num_chunks()):
                        c = ds.id.get_chunk_info(i)
                        cs.append({"offset": list(c.chunk_offset), "addr": c.byte_offset,
                                   "size": c.size, "filter_mask": c.filter_mask})
                    e["chunks"] = cs
            elif lay == h5py.h5d.CONTIGUOUS:
                e["layout"] = "contiguous"
            else:
                e["layout"] = "compact"
            out.append(e)
    json.dump({"datasets": out}, sys.stdout)


if __name__ == "__main__":
    main()
