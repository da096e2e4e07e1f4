#!/usr/bin/env bash
# Forwarding cost per cuBLAS/cuRAND call, side by side in one run: the
# same program linked directly against a library (natively) and through
# Wormhole's stand-ins and a local server on that library. Without a GPU
# the library is the CPU stand-in device (examples/cuda/cpu_device/);
# with NVIDIA_LIB_DIR set (a directory with NVIDIA's libcudart.so.13,
# libcublas.so.13, libcurand.so.10) it is NVIDIA's. Release builds.
# Usage: [HANDOFF=futex|spin|same-core] bench/wormhole-cuda/run.sh [CALLS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
calls=${1:-20000}; rounds=${2:-3}
cargo build --release -q -p wormhole-server -p wormhole-cudart-13 -p wormhole-cublas-13 -p wormhole-curand-10
work=$(mktemp -d /tmp/wormhole-cuda-bench.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
if [ -n "${NVIDIA_LIB_DIR:-}" ]; then
  native="$NVIDIA_LIB_DIR"
else
  native="$work/cpu"; mkdir -p "$native"
  cc -shared -fPIC -O2 -o "$native/libcpudevice.so" examples/cuda/cpu_device/*.c -lm
  for n in libcudart.so.13 libcublas.so.13 libcurand.so.10; do ln -s libcpudevice.so "$native/$n"; done
fi
lib="$work/lib"; mkdir -p "$lib"
ln -s "$PWD/target/release/libwormhole_cudart13.so" "$lib/libcudart.so.13"
ln -s "$PWD/target/release/libwormhole_cublas13.so" "$lib/libcublas.so.13"
ln -s "$PWD/target/release/libwormhole_curand10.so" "$lib/libcurand.so.10"
for n in cudart.so.13 cublas.so.13; do ln -s "lib$n" "$lib/lib${n%.13}"; done
ln -s libcurand.so.10 "$lib/libcurand.so"
cc -O2 -Iexamples/cuda -o "$work/call_rate" bench/wormhole-cuda/call_rate.c -L"$lib" -lcublas -lcurand -lcudart -lm
LD_LIBRARY_PATH="$native" ./target/release/wormhole-server --socket "$work/s.sock" -q --handoff "${HANDOFF:-futex}" --cuda-runtime "$native/libcudart.so.13" &
pid=$!
for _ in $(seq 50); do [ -S "$work/s.sock" ] && break; sleep 0.1; done
for r in $(seq "$rounds"); do
  # (the CPU stand-in has no symbol versions: ld.so says so on stderr)
  echo "round $r native:   $(LD_LIBRARY_PATH="$native" "$work/call_rate" "$calls" 2>/dev/null)"
  echo "round $r wormhole: $(WORMHOLE_SERVER="$work/s.sock" LD_LIBRARY_PATH="$lib" "$work/call_rate" "$calls")"
done
