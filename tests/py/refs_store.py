"""A read-only Zarr store over fsspec reference JSON (what `vh5fs refs` prints).

fsspec 2022.11's ReferenceFileSystem raises KeyError out of FSMap.getitems for a chunk key
the references leave out (an unmapped chunk), where Zarr expects it to be reported missing.
This mapping reads one key at a time through fs.cat_file and raises KeyError for absent
keys, which Zarr reads as the fill value. It works with newer fsspec too, and it pickles,
so Dask workers get it with the arrays they read.
"""
import collections.abc

import fsspec


class RefStore(collections.abc.MutableMapping):
    def __init__(self, refs, **storage_options):
        self.fs = fsspec.filesystem("reference", fo=refs, **storage_options)

    def __getitem__(self, key):
        try:
            return self.fs.cat_file(key)
        except (KeyError, FileNotFoundError):
            raise KeyError(key) from None

    def __contains__(self, key):
        return key in self.fs.references

    def __iter__(self):
        return iter(self.fs.references)

    def __len__(self):
        return len(self.fs.references)

    def __setitem__(self, key, value):
        raise PermissionError("references are read-only")

    def __delitem__(self, key):
        raise PermissionError("references are read-only")
