#!/usr/bin/env bash
# Installs what vh5fs needs to build and test on Debian: libhdf5, liblzf and libdeflate for cgo, fuse3
# for mounting, h5py and numpy as reference clients, zarr/fsspec/numcodecs/dask/distributed/xarray
# as clients of `vh5fs refs`, groff to check the man page, rsync to copy out of a mount. Installs only what is missing.
set -euo pipefail
pkgs=(libhdf5-dev liblzf-dev libdeflate-dev pkg-config fuse3 python3-h5py python3-numpy hdf5-tools attr strace groff-base rsync
  python3-zarr python3-fsspec python3-numcodecs python3-dask python3-distributed python3-xarray)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "deps: Go is required (https://go.dev/dl/)" >&2; exit 1; }
[ -e /dev/fuse ] || { echo "deps: /dev/fuse is missing: load the fuse module (modprobe fuse)" >&2; exit 1; }
