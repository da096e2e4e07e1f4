#!/usr/bin/env bash
# GPU validation of Wormhole for CUDA (needs an NVIDIA GPU and driver; not
# run by CI). Builds the kernel samples with nvcc (-cudart shared) and the
# cuBLAS and cuRAND samples (host code, system compiler) against NVIDIA's
# libcublas/libcurand, runs each natively and then unmodified through a
# local Wormhole server (its libcudart, libcublas and libcurand stand-ins
# first on the library path), and prints both outputs; for the cuBLAS and
# cuRAND samples and the LeNet-style training loop (examples/cuda/lenet.cu)
# the results must be identical, and the loop's throughput ratio is printed. nvcc, cuBLAS and
# cuRAND come from the toolkit if installed, else from PyPI's wheels
# (downloaded into a venv under target/).
# Usage: scripts/gpu-validate-cuda.sh [12|13]   (default: the driver's major)
#
# On a GPU machine without Rust or a network (the device machines lent to
# sessions): build the server and stand-ins here with scripts/gpu-bundle.sh,
# carry target/gpu-bundle there and run with WORMHOLE_BIN=target/gpu-bundle.
# NVIDIA's libraries are looked for with ldconfig, then under
# NVIDIA_LIB_DIRS (colon-separated), the toolkit (/usr/local/cuda*) and
# python3's packages (the nvidia-* wheels PyTorch installs); the wheels are
# downloaded only where nvcc is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
nvidia-smi >/dev/null || { echo "no NVIDIA driver/GPU here"; exit 2; }
major=${1:-$(nvidia-smi | sed -n 's/.*CUDA Version: \([0-9]*\).*/\1/p' | head -n1)}
out=target/gpu-validate; mkdir -p "$out"
find_lib() { # NAME: the directory holding NVIDIA's library NAME
  local p root roots
  p=$(ldconfig -p | awk -v n="$1" '$1 == n { print $NF; exit }')
  IFS=: read -r -a roots <<< "${NVIDIA_LIB_DIRS:-}"
  roots+=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda*/lib64
          "$(python3 -c 'import sys; print(sys.prefix)' 2>/dev/null || true)" /opt)
  for root in "${roots[@]}"; do
    [ -z "$p" ] || break
    [ -n "$root" ] && [ -d "$root" ] || continue
    p=$(find "$root" -name "$1" \( -type f -o -type l \) 2>/dev/null | head -n1)
  done
  [ -n "$p" ] || { echo "NVIDIA's $1 not found (the toolkit, or the nvidia-* wheels)" >&2; return 1; }
  dirname "$p"
}
if ! command -v nvcc >/dev/null; then
  python3 -m venv "$out/venv"
  if [ "$major" = 12 ]; then pkgs="nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12 nvidia-cublas-cu12 nvidia-curand-cu12 nvidia-cusolver-cu12 nvidia-cuda-cccl-cu12"; else pkgs="nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cublas nvidia-curand nvidia-cusolver nvidia-cuda-cccl"; fi
  "$out/venv/bin/pip" install -q $pkgs
  nvcc=$(find "$out/venv" -name nvcc -type f | head -n1)
  export PATH="$(dirname "$nvcc"):$PATH"
  export NVIDIA_LIB_DIRS="$PWD/$out/venv${NVIDIA_LIB_DIRS:+:$NVIDIA_LIB_DIRS}"
  cudart_dir=$(find_lib "libcudart.so.$major")
  inc=$(dirname "$(find "$out/venv" -name cuda_runtime_api.h | head -n1)")
  extra=(-I"$inc")
else
  cudart_dir=$(find_lib "libcudart.so.$major")
  extra=()
fi
blas_dir=$(find_lib "libcublas.so.$major")
rand_dir=$(find_lib libcurand.so.10)
# cuSOLVER's soname is its own major (11 with CUDA 12, 12 with CUDA 13);
# it needs cuSPARSE and nvJitLink beside it.
solver_major=$((major - 1))
solver_dirs="$(find_lib "libcusolver.so.$solver_major"):$(find_lib libcusparse.so.12):$(find_lib "libnvJitLink.so.$major")"
native_path="$cudart_dir:$blas_dir:$rand_dir:$solver_dirs"
echo "== NVIDIA's libraries: $native_path"
if [ -n "${WORMHOLE_BIN:-}" ]; then
  bin=$(cd "$WORMHOLE_BIN" && pwd)
else
  command -v cargo >/dev/null || { echo "no cargo here: run scripts/gpu-bundle.sh where there is, carry target/gpu-bundle, set WORMHOLE_BIN"; exit 2; }
  cargo build --release -q -p wormhole-server -p "wormhole-cudart-$major" -p "wormhole-cublas-$major" -p wormhole-curand-10 \
    -p wormhole-cublaslt-13 -p "wormhole-cusolver-$((major - 1))"
  bin=$PWD/target/release
fi
# The server links the OpenCL ICD loader; the bundle brings one for a
# machine without it.
server_path=$native_path
ldconfig -p | awk '$1 == "libOpenCL.so.1" { f = 1 } END { exit !f }' || server_path="$server_path:$bin/ocl"
lib="$out/lib$major"; mkdir -p "$lib"
ln -sf "$bin/libwormhole_cudart$major.so" "$lib/libcudart.so.$major"
ln -sf "$bin/libwormhole_cublas$major.so" "$lib/libcublas.so.$major"
ln -sf "$bin/libwormhole_curand10.so" "$lib/libcurand.so.10"
ln -sf "$bin/libwormhole_cusolver$solver_major.so" "$lib/libcusolver.so.$solver_major"
ln -sf "libcusolver.so.$solver_major" "$lib/libcusolver.so"
# The host-only cuBLAS and cuRAND samples link against our stand-ins (same
# sonames and versions as NVIDIA's): natively they run on NVIDIA's.
for n in cudart.so cublas.so; do ln -sf "lib$n.$major" "$lib/lib$n"; done
ln -sf libcurand.so.10 "$lib/libcurand.so"
for s in sgemm curand solver; do
  cc -O2 -Wall -Iexamples/cuda -o "$out/$s" "examples/cuda/$s.c" -L"$lib" -lcusolver -lcublas -lcurand -lcudart -lm
done
# cuBLASLt (CUDA 13's stand-in only): PyTorch's nn.Linear path.
lt=()
if [ "$major" = 13 ]; then
  ln -sf "$bin/libwormhole_cublaslt13.so" "$lib/libcublasLt.so.13"
  ln -sf libcublasLt.so.13 "$lib/libcublasLt.so"
  cc -O2 -Wall -Iexamples/cuda -o "$out/lt_matmul" examples/cuda/lt_matmul.c -L"$lib" -lcublasLt -lcublas -lcudart -lm
  lt=(lt_matmul)
fi
# nvcc links them against the stand-ins too (NVIDIA's sonames and versions).
# -arch=native: machine code for this GPU. Without it (sm_75 and PTX only)
# the driver compiles the PTX at first use, which fell inside some timings
# and not others on an H200 (vectorAdd natively: 72-101 us a launch, 18-21
# through Wormhole, whose server loads the module before the timer).
for s in vectorAdd matmul; do
  nvcc -O2 -arch=native -cudart shared "${extra[@]}" -L"$lib" -o "$out/$s" "examples/cuda/$s.cu"
done
nvcc -O2 -arch=native -cudart shared "${extra[@]}" -L"$lib" -o "$out/lenet" examples/cuda/lenet.cu -lcublas
# Thrust's headers: include/cccl since CUDA 13, include before, a folder
# of their own in CUDA 12's wheels.
thrust_h=$(find "$(dirname "$(dirname "$(command -v nvcc)")")" "$out/venv" -path '*thrust/sort.h' 2>/dev/null | head -n1 || true)
cccl=$(dirname "$(dirname "${thrust_h:-/nonexistent/thrust/sort.h}")")
nvcc -O2 -arch=native -cudart shared "${extra[@]}" -I"$cccl" -L"$lib" -o "$out/thrust_sort" examples/cuda/thrust_sort.cu
# The server finds NVIDIA's libraries on its own library path.
rm -f "$out/s.sock"
# WORMHOLE_SERVER_ARGS: more of the server's options (--no-confine, say).
# shellcheck disable=SC2086
LD_LIBRARY_PATH="$server_path" "$bin/wormhole-server" --socket "$out/s.sock" -q ${WORMHOLE_SERVER_ARGS:-} &
pid=$!; trap 'kill $pid 2>/dev/null' EXIT; sleep 1
status=0
for s in vectorAdd matmul thrust_sort; do
  echo "== $s native"; LD_LIBRARY_PATH="$cudart_dir" timeout 120 "$out/$s" || status=1
  echo "== $s through Wormhole"
  WORMHOLE_SERVER="$out/s.sock" LD_LIBRARY_PATH="$lib" timeout 120 "$out/$s" || status=1
done
# cuBLAS (SGEMM and the rest), cuRAND, the LeNet-style training loop
# (runtime, kernels and cuBLAS together), cuBLASLt's matmuls and cuSOLVER's
# factorisations: every result identical.
for s in sgemm curand solver lenet "${lt[@]}"; do
  args=(); [ "$s" = lenet ] && args=(16384 4)
  echo "== $s native"
  LD_LIBRARY_PATH="$native_path" timeout 300 "$out/$s" "${args[@]}" | tee "$out/$s.native" || status=1
  echo "== $s through Wormhole"
  WORMHOLE_SERVER="$out/s.sock" LD_LIBRARY_PATH="$lib" timeout 300 "$out/$s" "${args[@]}" | tee "$out/$s.remote" || status=1
  if diff <(grep -v '^time:' "$out/$s.native") <(grep -v '^time:' "$out/$s.remote"); then
    echo "== $s: identical results natively and through Wormhole"
  else
    echo "== $s: RESULTS DIFFER"; status=1
  fi
  grep '^time:' "$out/$s.native" "$out/$s.remote" || true
done
# The issue's throughput goal: the training loop at 0.8x native or better.
rate() { sed -n 's/^time: .* \([0-9.]*\) images\/s$/\1/p' "$1"; }
if [ -n "$(rate "$out/lenet.native")" ] && [ -n "$(rate "$out/lenet.remote")" ]; then
  echo "== lenet throughput through Wormhole: $(awk -v r="$(rate "$out/lenet.remote")" -v n="$(rate "$out/lenet.native")" 'BEGIN { printf "%.2fx native", r / n }')"
fi
exit $status
