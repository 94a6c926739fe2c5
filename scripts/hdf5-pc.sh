#!/usr/bin/env bash
# Writes OUTDIR/hdf5.pc for the HDF5 installed at PREFIX (its include/ and lib/), for builds
# with HDF5_DIR=PREFIX: an autotools install of HDF5 has no pkg-config file of its own. The
# library's run-time path is set, so the binary needs no LD_LIBRARY_PATH.
#
#   scripts/hdf5-pc.sh PREFIX OUTDIR
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 PREFIX OUTDIR" >&2; exit 2; }
prefix=$1 out=$2
h=$prefix/include/H5public.h
[ -r "$h" ] || { echo "HDF5_DIR=$prefix: no include/H5public.h there" >&2; exit 1; }
v() { sed -n "s/^#define H5_VERS_$1 *\([0-9]*\).*/\1/p" "$h"; }
mkdir -p "$out"
cat >"$out/hdf5.pc" <<PC
Name: hdf5
Description: HDF5 in $prefix
Version: $(v MAJOR).$(v MINOR).$(v RELEASE)
Cflags: -I$prefix/include
Libs: -L$prefix/lib -Wl,-rpath,$prefix/lib -lhdf5
PC
