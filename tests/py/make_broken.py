"""Writes a corpus of broken versioned-hdf5 files, derived from the reference fixtures.

usage: make_broken.py FIXTURES_DIR OUT_DIR

Each case is OUT_DIR/<case>.h5, a copy of a fixture with one small, deterministic edit:
truncations, flipped bytes in metadata (located through h5py's object header addresses and
by parsing the structures they point at), attributes of the wrong type, virtual-dataset
mappings out of range or misaligned, a hash table shorter than its slots, a missing
raw_data, a current_version naming no version, a version whose dataset link dangles, a
global heap torn as libhdf5 would loop on.
Prints the case names, one a line. tests/broken_test.go says what each must produce.
"""

import os
import shutil
import struct
import sys

import h5py
import numpy as np

FIX, OUT = sys.argv[1], sys.argv[2]
CASES = []


def case(name, fixture):
    """Copies fixture to OUT/name.h5 (writable) and returns the copy's path."""
    dst = os.path.join(OUT, name + ".h5")
    shutil.copyfile(os.path.join(FIX, fixture), dst)
    os.chmod(dst, 0o644)
    CASES.append(name)
    return dst


def patch(path, off, data):
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)


def read(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        return f.read(n)


def truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


def addr(path, obj):
    with h5py.File(path, "r") as f:
        return h5py.h5o.get_info(f[obj].id).addr


def messages(path, ohdr):
    """(type, data offset, size) of the messages of a version 1 object header, following
    continuation blocks."""
    b = read(path, ohdr, 16)
    assert b[0] == 1, "version 1 object header expected"
    nmsgs, size = struct.unpack_from("<H", b, 2)[0], struct.unpack_from("<I", b, 8)[0]
    out, blocks = [], [(ohdr + 16, size)]
    while blocks and len(out) < nmsgs:
        p, n = blocks.pop(0)
        end = p + n
        while p + 8 <= end and len(out) < nmsgs:
            typ, size = struct.unpack("<HH", read(path, p, 4))
            out.append((typ, p + 8, size))
            if typ == 0x10:  # continuation
                blocks.append(struct.unpack("<QQ", read(path, p + 8, 16)))
            p += 8 + size
    return out


def vds_heap(path, ds):
    """The global heap collection address, object index and object of a VDS's mapping list."""
    for typ, off, n in messages(path, addr(path, ds)):
        if typ == 8:  # data layout
            ver, cls = read(path, off, 2)
            assert ver == 4 and cls == 3, "virtual layout expected"
            gaddr, idx = struct.unpack("<QI", read(path, off + 2, 12))
            break
    else:
        raise SystemExit(ds + ": no layout message")
    assert read(path, gaddr, 4) == b"GCOL"
    size = struct.unpack("<Q", read(path, gaddr + 8, 8))[0]
    p = gaddr + 16
    while p < gaddr + size:
        i, n = struct.unpack_from("<H", read(path, p, 2))[0], struct.unpack("<Q", read(path, p + 8, 8))[0]
        if i == idx:
            return gaddr, idx, p + 16, n
        p += 16 + ((n + 7) & ~7)
    raise SystemExit(ds + ": heap object not found")


def attr_heap(path, obj, name):
    """The global heap collection holding the scalar variable-length string attribute name
    of obj (version 1 attribute messages)."""
    for typ, off, n in messages(path, addr(path, obj)):
        if typ != 12:  # attribute
            continue
        b = read(path, off, n)
        assert b[0] == 1, "version 1 attribute message expected"
        nl, tl, sl = struct.unpack_from("<HHH", b, 2)
        pad = lambda x: (x + 7) & ~7
        if b[8:8 + nl].rstrip(b"\0") != name.encode():
            continue
        _, gaddr, _ = struct.unpack_from("<IQI", b, 8 + pad(nl) + pad(tl) + pad(sl))
        assert read(path, gaddr, 4) == b"GCOL"
        return gaddr
    raise SystemExit("%s: no attribute %s" % (obj, name))


def tear_heap(path, gaddr):
    """Gives the free space that ends the global heap collection at gaddr a size of 0, as a
    torn write can: libhdf5 1.10 then loops forever when it loads the collection."""
    size = struct.unpack("<Q", read(path, gaddr + 8, 8))[0]
    p = gaddr + 16
    while p + 16 <= gaddr + size:
        i, n = struct.unpack_from("<H", read(path, p, 2))[0], struct.unpack("<Q", read(path, p + 8, 8))[0]
        if i == 0:
            patch(path, p + 8, struct.pack("<Q", 0))
            return
        p += 16 + ((n + 7) & ~7)
    raise SystemExit("global heap collection at %d has no free space" % gaddr)


def chunk_btree(path, ds):
    """Address of the version 1 B-tree (chunk index) of a chunked dataset."""
    for typ, off, n in messages(path, addr(path, ds)):
        if typ == 8:
            ver, cls = read(path, off, 2)
            assert ver == 3 and cls == 2, "chunked layout version 3 expected"
            return struct.unpack("<Q", read(path, off + 3, 8))[0]
    raise SystemExit(ds + ": no layout message")


def group_heap(path, grp):
    """(B-tree address, local heap address) of an old-style group's symbol table message."""
    for typ, off, n in messages(path, addr(path, grp)):
        if typ == 0x11:
            return struct.unpack("<QQ", read(path, off, 16))
    raise SystemExit(grp + ": no symbol table message")


def replace_vds(path, ds, sources):
    """Recreates the VDS ds with the given (virtual slice, raw_data slice) mappings,
    keeping its shape, dtype, fill value and attributes."""
    with h5py.File(path, "r+") as f:
        old = f[ds]
        attrs = dict(old.attrs)
        raw = f[attrs["raw_data"]]
        shape, dtype, fill = old.shape, old.dtype, old.fillvalue
        del f[ds]
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype, maxshape=shape)
        vs = h5py.VirtualSource(".", raw.name, shape=(512,) + raw.shape[1:], maxshape=raw.maxshape, dtype=dtype)
        for vsl, ssl in sources:
            layout[vsl] = vs[ssl]
        new = f.create_virtual_dataset(ds, layout, fillvalue=fill)
        for k, v in attrs.items():
            new.attrs[k] = v


def superblock_eof(path, eof):
    """Sets the end-of-file address of a version 0 superblock."""
    assert read(path, 8, 1) == b"\x00"
    patch(path, 40, struct.pack("<Q", eof))


def main():
    os.makedirs(OUT, exist_ok=True)

    # Truncated files: libhdf5 finds the end-of-file address beyond the file's length.
    truncate(case("trunc_superblock", "basic_1d.h5"), 40)
    p = case("trunc_metadata", "basic_1d.h5")
    truncate(p, addr(p, "_version_data/versions/v2/x") + 20)  # inside an object header
    p = case("trunc_chunks", "basic_1d.h5")
    with h5py.File(p, "r") as f:
        ci = f["_version_data/x/raw_data"].id.get_chunk_info(2)
    truncate(p, ci.byte_offset + ci.size // 2)  # inside the third chunk of raw_data
    # The end of the file cut off in the middle of raw_data's last stored chunk, the
    # superblock's end-of-file address made to match (libhdf5 then opens it): the chunks
    # at and past the cut are gone, everything before it is intact.
    p = case("trunc_chunks_eof", "grid_2d_gzip.h5")
    with h5py.File(p, "r") as f:
        raw = f["_version_data/temp/raw_data"].id
        last = max((raw.get_chunk_info(i) for i in range(raw.get_num_chunks())), key=lambda c: c.byte_offset)
    assert last.chunk_offset == (328, 0), last
    cut = last.byte_offset + last.size // 2
    truncate(p, cut)
    superblock_eof(p, cut)

    # Flipped bytes in metadata.
    p = case("ohdr_version", "basic_1d.h5")  # v2/x's object header version byte
    a = addr(p, "_version_data/versions/v2/x")
    patch(p, a, bytes([read(p, a, 1)[0] ^ 0x7E]))
    p = case("versions_btree", "basic_1d.h5")  # the versions group's B-tree signature
    bt, _ = group_heap(p, "_version_data/versions")
    assert read(p, bt, 4) == b"TREE"
    patch(p, bt, b"TRE\x00")
    p = case("version_local_heap", "basic_1d.h5")  # v2's local heap (its link names)
    _, lh = group_heap(p, "_version_data/versions/v2")
    assert read(p, lh, 4) == b"HEAP"
    patch(p, lh + 1, b"\xff")
    p = case("chunk_btree", "basic_1d.h5")  # raw_data's chunk index signature
    bt = chunk_btree(p, "_version_data/x/raw_data")
    assert read(p, bt, 4) == b"TREE"
    patch(p, bt + 2, b"\x00")
    # The file address of raw_data's chunk at row 8 (slot 2) in the chunk B-tree, pointed
    # past the end of the file.
    p = case("chunk_address", "basic_1d.h5")
    bt = chunk_btree(p, "_version_data/x/raw_data")
    with h5py.File(p, "r") as f:
        ci = f["_version_data/x/raw_data"].id.get_chunk_info(2)
    assert ci.chunk_offset == (8,)
    node = read(p, bt, 4096)
    where = node.find(struct.pack("<Q", ci.byte_offset))
    assert where > 0 and node.find(struct.pack("<Q", ci.byte_offset), where + 1) < 0
    patch(p, bt + where, struct.pack("<Q", 1 << 40))
    # v2/x's mapping list in the global heap, its second mapping's source moved from slot 3
    # to slot 2 (start 12 -> 8, end 15 -> 11: still one whole slot). libhdf5 refuses the
    # list (its checksum no longer matches), so must anything reading it from the bytes.
    p = case("gheap_mapping", "basic_1d.h5")
    _, _, obj, n = vds_heap(p, "_version_data/versions/v2/x")
    body = read(p, obj, n)
    pos = 1 + 8  # encoding version, number of entries
    for entry in range(2):
        for _ in range(2):  # source file and dataset names
            pos = body.index(b"\0", pos) + 1
        src = pos
        for _ in range(2):  # source, virtual selection: type, version, reserved, length, body
            typ, ver, _, length = struct.unpack_from("<IIII", body, pos)
            assert typ == 2 and ver == 1, (typ, ver)  # hyperslab, version 1
            pos += 16 + length
    rank, nblocks, start, end = struct.unpack_from("<IIII", body, src + 16)
    assert (rank, nblocks, start, end) == (1, 1, 12, 15), (rank, nblocks, start, end)
    patch(p, obj + src + 24, struct.pack("<II", 8, 11))
    p = case("gheap_signature", "grid_2d_gzip.h5")  # r2's own global heap collection
    gaddr, _, _, _ = vds_heap(p, "_version_data/versions/r2/temp")
    for other in ("r1", "r3", "r4", "r5"):
        assert vds_heap(p, "_version_data/versions/%s/temp" % other)[0] != gaddr
    patch(p, gaddr, b"GCOX")
    p = case("gheap_torn", "basic_1d.h5")  # the collection of v3's attribute strings
    tear_heap(p, attr_heap(p, "_version_data/versions/v3", "timestamp"))

    # Attributes of the wrong type.
    with h5py.File(case("current_version_int", "basic_1d.h5"), "r+") as f:
        f["_version_data/versions"].attrs["current_version"] = np.int64(4)
    with h5py.File(case("committed_string", "basic_1d.h5"), "r+") as f:
        f["_version_data/versions/v2"].attrs["committed"] = "True"
    with h5py.File(case("data_version_string", "basic_1d.h5"), "r+") as f:
        f["_version_data/versions"].attrs["data_version"] = "4"
    with h5py.File(case("timestamp_int", "basic_1d.h5"), "r+") as f:
        f["_version_data/versions/v3"].attrs["timestamp"] = np.int64(20240101)

    # Virtual-dataset mappings. v2/x of basic_1d has shape (10,), chunks (4,) and raw_data
    # of 24 rows; its chunk 1 is remapped.
    ds = "_version_data/versions/v2/x"
    with h5py.File(os.path.join(FIX, "basic_1d.h5"), "r") as f:
        srcs = {m.vspace.get_select_bounds()[0][0]: m.src_space.get_select_bounds()[0][0] for m in f[ds].virtual_sources()}
    assert sorted(srcs) == [0, 4, 8], srcs
    keep = [(slice(v, min(v + 4, 10)), slice(s, s + min(4, 10 - v))) for v, s in sorted(srcs.items()) if v != 4]
    replace_vds(case("vds_out_of_range", "basic_1d.h5"), ds, keep + [(slice(4, 8), slice(400, 404))])
    replace_vds(case("vds_source_misaligned", "basic_1d.h5"), ds, keep + [(slice(4, 8), slice(srcs[4] + 2, srcs[4] + 6))])
    replace_vds(case("vds_virtual_misaligned", "basic_1d.h5"), ds, keep + [(slice(5, 8), slice(srcs[4], srcs[4] + 3))])

    # A hash table shorter than its slots.
    with h5py.File(case("hash_table_short", "grid_2d_gzip.h5"), "r+") as f:
        f["_version_data/temp/hash_table"].resize((10,))

    # raw_data missing for one dataset of a file with several.
    with h5py.File(case("raw_data_missing", "nested.h5"), "r+") as f:
        del f["_version_data/top/raw_data"]

    # current_version naming a version that does not exist.
    with h5py.File(case("current_version_missing", "basic_1d.h5"), "r+") as f:
        f["_version_data/versions"].attrs["current_version"] = "v9"

    # A version group whose dataset is gone: its link dangles (a soft link to nothing).
    with h5py.File(case("version_dataset_dangling", "basic_1d.h5"), "r+") as f:
        del f[ds]
        f[ds] = h5py.SoftLink("/_version_data/versions/v2/gone")

    print("\n".join(CASES))


main()
