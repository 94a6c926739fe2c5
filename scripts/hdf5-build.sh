#!/usr/bin/env bash
# Builds libhdf5 from Debian's source package into a prefix, once: what `make test-hdf5-1.14`
# tests vh5fs against beside the system's HDF5. Debian 12 ships 1.10; 1.14 comes from
# unstable's source package (a deb-src line in a private apt configuration: the system's
# sources stay as they are). Nothing but the Debian archive is fetched; the build is kept
# in PREFIX (a second run finds PREFIX/.built and does nothing).
#
#   scripts/hdf5-build.sh VERSION PREFIX      e.g. 1.14.6+repack-2 ~/.cache/vh5fs/hdf5-1.14.6
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 DEBIAN-VERSION PREFIX" >&2; exit 2; }
version=$1 prefix=$2
if [ -e "$prefix/.built" ] && [ "$(cat "$prefix/.built")" = "$version" ]; then
  echo "hdf5-build: HDF5 $version in $prefix (built before)"
  exit 0
fi

for tool in gcc make dpkg-source; do
  command -v "$tool" >/dev/null || missing=1
done
if [ "${missing:-}" ] || ! dpkg-query -W -f='${Status}' zlib1g-dev 2>/dev/null | grep -q "ok installed"; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends gcc make dpkg-dev zlib1g-dev >/dev/null
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/vh5fs-hdf5.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# A private apt state: unstable's source index only.
apt=$work/apt
mkdir -p "$apt/lists/partial" "$apt/sources.list.d"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main" >"$apt/sources.list"
aptopts=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/sources.list.d"
  -o "Dir::State::Lists=$apt/lists" -o "APT::Sandbox::User=root" -qq)
apt-get "${aptopts[@]}" update
(cd "$work" && apt-get "${aptopts[@]}" source --download-only "hdf5=$version" >/dev/null)

# The upstream tarball as Debian ships it (its patches are Debian's packaging: not needed).
src=$(find "$work" -maxdepth 1 -name 'hdf5_*.orig.tar.*' | head -1)
[ -n "$src" ] || { echo "hdf5-build: no orig tarball for hdf5 $version" >&2; exit 1; }
tar -xf "$src" -C "$work"
dir=$(find "$work" -maxdepth 1 -type d -name 'hdf5-*' | head -1)

rm -rf "$prefix"
(cd "$dir" && ./configure --prefix="$prefix" --disable-fortran --disable-cxx --disable-java \
  --disable-tests --disable-static --enable-build-mode=production --with-zlib >"$work/configure.log" 2>&1) ||
  { tail -20 "$work/configure.log" >&2; exit 1; }
(cd "$dir" && make -j"$(nproc)" >"$work/make.log" 2>&1 && make install >>"$work/make.log" 2>&1) ||
  { tail -30 "$work/make.log" >&2; exit 1; }

# The autotools build installs no pkg-config file; vh5fs's Makefile (HDF5_DIR) needs none,
# but other builds may.
upstream=$(sed -n 's/^#define H5_VERS_STR "\(.*\)"/\1/p' "$prefix/include/H5public.h")
mkdir -p "$prefix/lib/pkgconfig"
cat >"$prefix/lib/pkgconfig/hdf5.pc" <<PC
prefix=$prefix
Name: hdf5
Description: HDF5 $upstream (Debian source $version)
Version: $upstream
Cflags: -I\${prefix}/include
Libs: -L\${prefix}/lib -Wl,-rpath,\${prefix}/lib -lhdf5
PC
echo "$version" >"$prefix/.built"
echo "hdf5-build: HDF5 $upstream built into $prefix in $((SECONDS - start)) s"
