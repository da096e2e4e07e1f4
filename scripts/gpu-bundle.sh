#!/usr/bin/env bash
# Builds what scripts/gpu-validate-cuda.sh needs on a GPU machine that has
# no Rust or network (the device machines lent to sessions): the server and
# the CUDA 12 and 13 stand-ins, stripped, and the OpenCL ICD loader the
# server links (for a machine without one), into target/gpu-bundle. Carry
# that folder and run there:
#   WORMHOLE_BIN=target/gpu-bundle scripts/gpu-validate-cuda.sh 13
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
# Every stand-in of crates/wormhole/cuda-stand-ins' table.
mapfile -t stand_ins < <(scripts/cuda-stand-ins.sh --packages)
mapfile -t stand_in_files < <(scripts/cuda-stand-ins.sh --files)
cargo build --release -q -p wormhole-server "${stand_ins[@]/#/--package=}"
b=target/gpu-bundle
rm -rf "$b"; mkdir -p "$b/ocl"
for f in wormhole-server "${stand_in_files[@]}"; do
  strip -o "$b/$f" "target/release/$f"
done
cp -L "$(ldconfig -p | awk '$1 == "libOpenCL.so.1" { print $NF; exit }')" "$b/ocl/libOpenCL.so.1"
echo "$(du -sh "$b" | cut -f1) in $b; on the GPU machine: WORMHOLE_BIN=$b scripts/gpu-validate-cuda.sh 13"
