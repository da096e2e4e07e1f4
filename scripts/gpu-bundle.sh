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
cargo build --release -q -p wormhole-server -p wormhole-cudart-12 -p wormhole-cudart-13 \
  -p wormhole-cublas-12 -p wormhole-cublas-13 -p wormhole-curand-10 -p wormhole-cuda-driver-1 -p wormhole-cublaslt-13 \
  -p wormhole-cusolver-11 -p wormhole-cusolver-12
b=target/gpu-bundle
rm -rf "$b"; mkdir -p "$b/ocl"
for f in wormhole-server libwormhole_cudart12.so libwormhole_cudart13.so \
         libwormhole_cublas12.so libwormhole_cublas13.so libwormhole_curand10.so \
         libwormhole_cuda_driver1.so libwormhole_cublaslt13.so \
         libwormhole_cusolver11.so libwormhole_cusolver12.so; do
  strip -o "$b/$f" "target/release/$f"
done
cp -L "$(ldconfig -p | awk '$1 == "libOpenCL.so.1" { print $NF; exit }')" "$b/ocl/libOpenCL.so.1"
echo "$(du -sh "$b" | cut -f1) in $b; on the GPU machine: WORMHOLE_BIN=$b scripts/gpu-validate-cuda.sh 13"
