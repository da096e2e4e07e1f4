#!/usr/bin/env bash
# Builds the peer, PoCL 7.1's remote driver (the `pocld` daemon and the
# remote client ICD), from the tarball and patch in ../shared/peers/ into a
# cache under target/peers/ (never into the repository). Built without LLVM
# and without PoCL's own CPU devices: `pocld` is then an ordinary OpenCL
# program that serves whatever device the ICD loader gives it (Debian's
# PoCL 3.1 here, the device Wormhole's server serves).
#
#   bench/peers/build-peer.sh            prints the install prefix
#
# PEERS_DIR overrides where the tarball and patch are read from; a second
# run with the same inputs does nothing (a stamp names their checksums).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
peers=${PEERS_DIR:-$(cd "$root/.." && pwd)/shared/peers}
[ -d "$peers" ] || peers=/work/shared/peers
tarball=$peers/pocl-7.1.tar.gz
patch=$peers/pocl-remote-notify-pipe.patch
for f in "$tarball" "$patch"; do
  [ -r "$f" ] || { echo "build-peer: $f not found (set PEERS_DIR)" >&2; exit 2; }
done
cache=${CARGO_TARGET_DIR:-$root/target}/peers
prefix=$cache/install
stamp=$prefix/.built-from
want=$(cat "$tarball" "$patch" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$prefix/bin/pocld" ]; then
  echo "$prefix"
  exit 0
fi

scripts/need-packages.sh cmake ninja-build ocl-icd-dev ocl-icd-opencl-dev opencl-headers \
  pkg-config libhwloc-dev gcc g++ patch
rm -rf "$cache/src" "$cache/build" "$prefix"
mkdir -p "$cache/src"
tar -xzf "$tarball" -C "$cache/src"
(cd "$cache/src/pocl-7.1" && patch -p1 --quiet < "$patch")
# The ICD vendor directory is ours, so Debian's /etc/OpenCL/vendors/pocl.icd
# is left alone.
cmake -S "$cache/src/pocl-7.1" -B "$cache/build" -G Ninja -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DPOCL_ICD_ABSOLUTE_PATH=ON -DOCL_ICD_INCLUDE_DIRS=/usr/include \
  -DCMAKE_INSTALL_SYSCONFDIR="$prefix/etc" \
  -DENABLE_LLVM=OFF -DENABLE_HOST_CPU_DEVICES=OFF -DENABLE_REMOTE_CLIENT=ON \
  -DENABLE_REMOTE_SERVER=ON -DENABLE_ICD=ON -DENABLE_TESTS=OFF -DENABLE_EXAMPLES=OFF \
  > "$cache/configure.log" 2>&1 || { tail -n 30 "$cache/configure.log" >&2; exit 1; }
ninja -C "$cache/build" install > "$cache/build.log" 2>&1 || { tail -n 30 "$cache/build.log" >&2; exit 1; }
lib=$(find "$prefix" -name 'libpocl.so*' -type f | head -n 1)
[ -n "$lib" ] && [ -x "$prefix/bin/pocld" ] || { echo "build-peer: no pocld or libpocl.so under $prefix" >&2; exit 1; }
mkdir -p "$prefix/vendors"
echo "$lib" > "$prefix/vendors/pocl-remote.icd"
echo "$want" > "$stamp"
echo "$prefix"
