#!/usr/bin/env bash
# How far PyTorch gets through Wormhole for CUDA (issue 6: "try PyTorch and
# record exactly how far it gets"). Runs tests/apps/pytorch_steps.py, which
# reports each step (CUDA's start, copies, pinned memory, streams and
# events, memory queries, a kernel, a cuBLAS matmul, random numbers) as ok
# or FAIL, with the client's stand-ins for libcudart.so.13, libcublas.so.13,
# libcublasLt.so.13 (refusing) and libcurand.so.10 preloaded in place of
# the wheel's. Not run by CI:
# PyTorch with its NVIDIA wheels is about 5 GB.
#
# With a GPU (nvidia-smi works): the server loads NVIDIA's libcudart.so.13
# (PyTorch's wheel, or the system's), and the steps run natively first, as
# the reference.
# Without one: the server runs on the CPU stand-in (examples/cuda/
# cpu_device/), which runs no PyTorch kernel but has a CPU SGEMM, and the
# client gets Wormhole's libcuda.so.1 stand-in for the few driver calls
# PyTorch makes itself (wormhole-cuda-driver-1), as a client without
# NVIDIA's driver would. Kernels then fail with a CUDA error; cuBLAS runs.
#
# PyTorch: python3's if it imports a CUDA 13 build of torch; else PyTorch
# 2.11.0 is installed from PyPI into target/torch-venv. WORMHOLE_BIN: where
# wormhole-server and libwormhole_cudart13.so are (default: built here into
# target/debug; a bundle from scripts/gpu-bundle.sh on a machine without Rust).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
work=$(mktemp -d /tmp/wormhole-pytorch.XXXXXX)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

torch_cuda() { "$1" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null || true; }
py=python3
case "$(torch_cuda "$py")" in
  13.*) ;;
  *)
    py=$root/target/torch-venv/bin/python
    if [ "$(torch_cuda "$py")" = "" ]; then
      echo "== installing PyTorch 2.11.0 (CUDA 13 build, ~5 GB) into target/torch-venv"
      python3 -m venv "$root/target/torch-venv"
      "$py" -m pip install -q torch==2.11.0
    fi
    ;;
esac
echo "== $("$py" -c 'import torch; print("torch", torch.__version__)')"

bin=${WORMHOLE_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q -p wormhole-server -p wormhole-cudart-13 -p wormhole-cublas-13 -p wormhole-curand-10 -p wormhole-cuda-driver-1 -p wormhole-cublaslt-13 \
    -p wormhole-cusolver-12
  bin=target/debug
fi
# A bundle carries the OpenCL ICD loader the server links.
ocl=""; [ -d "$bin/ocl" ] && ocl=":$bin/ocl"
lib="$work/lib"; mkdir -p "$lib"
cp "$bin/libwormhole_cudart13.so" "$lib/libcudart.so.13"
cp "$bin/libwormhole_cublas13.so" "$lib/libcublas.so.13"
cp "$bin/libwormhole_curand10.so" "$lib/libcurand.so.10"
cp "$bin/libwormhole_cublaslt13.so" "$lib/libcublasLt.so.13"
cp "$bin/libwormhole_cusolver12.so" "$lib/libcusolver.so.12"
# The driver stand-in too, GPU or not: PyTorch calls the driver itself
# (cuDevicePrimaryCtxRetain, cuCtxGetCurrent), and NVIDIA's, in a client
# that never initialised it (the runtime is the server's), answers
# "initialization error".
cp "$bin/libwormhole_cuda_driver1.so" "$lib/libcuda.so.1"
preload="$lib/libcudart.so.13:$lib/libcublas.so.13:$lib/libcublasLt.so.13:$lib/libcurand.so.10:$lib/libcusolver.so.12:$lib/libcuda.so.1"

steps=("$py" -W ignore tests/apps/pytorch_steps.py)
if nvidia-smi >/dev/null 2>&1; then
  rt=$("$py" -c 'import nvidia.cu13, os; print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))' 2>/dev/null || true)
  [ -f "$rt/libcudart.so.13" ] || rt=$(dirname "$(ldconfig -p | awk '$1 == "libcudart.so.13" { print $NF; exit }')")
  echo "== natively (the reference)"
  env -u WORMHOLE_SERVER timeout 600 "${steps[@]}" || true
  server_env=(env LD_LIBRARY_PATH="$rt$ocl")
  runtime="$rt/libcudart.so.13"
  client_path=""
else
  echo "== no GPU: the server runs on the CPU stand-in"
  cpu="$work/cpu"; mkdir -p "$cpu"
  gcc -shared -fPIC -O2 -Wall -Werror -o "$cpu/libcpudevice.so" examples/cuda/cpu_device/*.c -lm
  for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcusolver.so.12; do ln -s libcpudevice.so "$cpu/$n"; done
  server_env=(env LD_LIBRARY_PATH="$cpu$ocl")
  runtime="$cpu/libcudart.so.13"
  client_path="$lib"
fi

# WORMHOLE_SERVER_ARGS: more of the server's options (--no-confine, say).
# shellcheck disable=SC2086
"${server_env[@]}" "$bin/wormhole-server" --socket "$work/s.sock" -q --cuda-runtime "$runtime" ${WORMHOLE_SERVER_ARGS:-} &
server_pid=$!
for _ in $(seq 100); do [ -S "$work/s.sock" ] && break; sleep 0.1; done
echo "== through Wormhole (shared memory, one local server)"
timeout 600 env WORMHOLE_SERVER="$work/s.sock" LD_PRELOAD="$preload" \
  LD_LIBRARY_PATH="$client_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "${steps[@]}" | tee "$work/steps.txt" || true
mkdir -p target && cp "$work/steps.txt" target/try-pytorch.txt
echo "== $(grep -c '^ok' target/try-pytorch.txt) steps ok, $(grep -c '^FAIL' target/try-pytorch.txt) failed (target/try-pytorch.txt)"
