#!/usr/bin/env bash
# Delay storing for CUDA, measured (issue 31, item 4): run.py's (b) and (c)
# with CUDA tenants (tenant_cuda.c: cuBLAS for kernels) through a server
# whose ledger counts CUDA's memory (--residency-api cuda). The server's
# CUDA libraries are NVIDIA's where CUDA_LIBS names their folder (a GPU
# machine), else the CPU stand-in (examples/cuda/cpu_device, built here),
# whose driver maps and unmaps memory as a GPU's does. Writes
# bench/out/delay-storing-cuda.{md,json}; extra arguments go to run.py
# (e.g. --only b, --budget-mib 128). Killed after BENCH_LIMIT seconds
# (default 1800).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/bench/out
mkdir -p "$out"
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "== building (release)"
cargo build --release -q -p wormhole-server -p wormhole-cudart-13 -p wormhole-cublas-13
bin=${CARGO_TARGET_DIR:-$root/target}/release
libs=$(mktemp -d /tmp/wh-delay-cuda.XXXXXX)
trap 'rm -rf "$libs"' EXIT
mkdir -p "$libs/client"
ln -s "$bin/libwormhole_cudart13.so" "$libs/client/libcudart.so.13"
ln -s "$bin/libwormhole_cublas13.so" "$libs/client/libcublas.so.13"
ln -s libcudart.so.13 "$libs/client/libcudart.so"
ln -s libcublas.so.13 "$libs/client/libcublas.so"
if [ -z "${CUDA_LIBS:-}" ]; then
  CUDA_LIBS=$libs/cpu; mkdir -p "$CUDA_LIBS"
  gcc -shared -fPIC -O2 -Wall -Werror -o "$CUDA_LIBS/libcpudevice.so" examples/cuda/cpu_device/*.c -lm
  for n in libcudart.so.13 libcublas.so.13 libcuda.so.1; do ln -s libcpudevice.so "$CUDA_LIBS/$n"; done
fi
cc -O2 -Wall -Iexamples/cuda -o "$out/ds-tenant-cuda" bench/delay-storing/tenant_cuda.c \
  -L"$libs/client" -lcublas -lcudart
timeout "${BENCH_LIMIT:-1800}" python3 bench/delay-storing/run.py --api cuda --server "$bin/wormhole-server" \
  --cuda-libs "$CUDA_LIBS" --client-libs "$libs/client" --tenant "$out/ds-tenant-cuda" --out "$out" "$@"
