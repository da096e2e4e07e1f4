#!/usr/bin/env bash
# Wormhole for CUDA, the part that needs no GPU (CI has none): builds the
# libcudart.so.12/.13, libcublas.so.12/.13 and libcurand.so.10 stand-ins
# and the server, runs the unit tests
# (allocation tracker, fat binary and .nv.info parsing, argument packing,
# wire requests, tenant validation, cuBLAS/cuRAND extents and request
# checks, description parsing), checks the
# stand-ins' sonames and symbol versions, and runs the host-only samples
# (examples/cuda, built with the system compiler) with no server, through a
# server without a CUDA runtime and through one with CUDA disabled: every
# answer must be the one native CUDA gives without a GPU, never a crash or
# a hang. Then, with nvcc (CUDA 13.5 from PyPI's wheels if it is not on
# the PATH: about 120 MB, into target/cuda-nvcc; no GPU, driver or NVIDIA
# library is needed to build), it runs nvcc-built programs unmodified:
# examples/cuda/lenet.cu, a LeNet-style training loop, natively on a CPU
# stand-in of the runtime and cuBLAS and through a Wormhole server on the
# same stand-in, whose results must be identical.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
command -v readelf >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils >/dev/null; }
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

# Every stand-in of crates/wormhole/cuda-stand-ins' table.
mapfile -t stand_ins < <(scripts/cuda-stand-ins.sh --packages)
cargo build -p wormhole-server "${stand_ins[@]/#/--package=}"
cargo test -p wormhole-apigen -p wormhole-cuda-api -p wormhole-cudart -p wormhole-cuda-forward \
  -p wormhole-cuda-stand-ins -p wormhole-server

work=$(mktemp -d /tmp/wormhole-cuda-test.XXXXXX)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
check() { # NAME COMMAND...: runs a check, bounded in time
  if timeout 60 "${@:2}" > "$work/out" 2>&1; then
    echo "ok   $1"
  else
    echo "FAIL $1 (rc $?)"; sed 's/^/     /' "$work/out"; fail=1
  fi
}

for major in 12 13; do
  lib="$work/lib$major"; mkdir -p "$lib"
  so="$PWD/target/debug/libwormhole_cudart$major.so"
  ln -s "$so" "$lib/libcudart.so.$major"
  ln -s "libcudart.so.$major" "$lib/libcudart.so"
  check "libcudart.so.$major: soname" sh -c "readelf -d '$so' | grep -q 'Library soname: \[libcudart.so.$major\]'"
  check "libcudart.so.$major: cudaMalloc@@libcudart.so.$major" sh -c "readelf --dyn-syms -W '$so' | grep -q ' cudaMalloc@@libcudart.so.$major\$'"
  [ "$major" = 12 ] && check "libcudart.so.12: cudaGetDeviceProperties_v2 (CUDA 12 headers' name)" sh -c "readelf --dyn-syms -W '$so' | grep -q ' cudaGetDeviceProperties_v2@@libcudart.so.12\$'"
  check "libcudart.so.$major: __cudaRegisterFatBinary versioned" sh -c "readelf --dyn-syms -W '$so' | grep -q ' __cudaRegisterFatBinary@@libcudart.so.$major\$'"
  check "libcudart.so.$major: per-thread default stream names (cudaMemcpy_ptds, cudaMemcpyAsync_ptsz)" sh -c "readelf --dyn-syms -W '$so' | grep -q ' cudaMemcpy_ptds@@libcudart.so.$major\$' && readelf --dyn-syms -W '$so' | grep -q ' cudaMemcpyAsync_ptsz@@libcudart.so.$major\$'"
  gcc -Wall -Werror -o "$work/nodevice$major" examples/cuda/nodevice.c -L"$lib" -lcudart
  gcc -Wall -Werror -o "$work/launch$major" examples/cuda/launch_fixture.c -L"$lib" -lcudart
  check "nodevice$major binds libcudart.so.$major versions" sh -c "readelf -V '$work/nodevice$major' | grep -q 'Name: libcudart.so.$major'"
  # cuBLAS and cuRAND: stand-ins that forward to the client in libcudart.
  blas_so="$PWD/target/debug/libwormhole_cublas$major.so"
  rand_so="$PWD/target/debug/libwormhole_curand10.so"
  ln -s "$blas_so" "$lib/libcublas.so.$major"; ln -s "libcublas.so.$major" "$lib/libcublas.so"
  ln -s "$rand_so" "$lib/libcurand.so.10"; ln -s libcurand.so.10 "$lib/libcurand.so"
  # libcuda.so.1 for a client without the driver: the calls PyTorch makes.
  ln -s "$PWD/target/debug/libwormhole_cuda_driver1.so" "$lib/libcuda.so.1"
  if [ "$major" = 13 ]; then
    ln -s "$PWD/target/debug/libwormhole_cublaslt13.so" "$lib/libcublasLt.so.13"
    ln -s libcublasLt.so.13 "$lib/libcublasLt.so"
  fi
  # cuSOLVER's soname is its own major: 11 beside CUDA 12, 12 beside 13.
  solver_major=$((major - 1))
  solver_so="$PWD/target/debug/libwormhole_cusolver$solver_major.so"
  ln -s "$solver_so" "$lib/libcusolver.so.$solver_major"; ln -s "libcusolver.so.$solver_major" "$lib/libcusolver.so"
  check "libcusolver.so.$solver_major: soname and cusolverDnXpotrf@@libcusolver.so.$solver_major" sh -c \
    "readelf -d '$solver_so' | grep -q 'Library soname: \[libcusolver.so.$solver_major\]' && readelf --dyn-syms -W '$solver_so' | grep -q ' cusolverDnXpotrf@@libcusolver.so.$solver_major\$'"
  check "libcublas.so.$major: soname" sh -c "readelf -d '$blas_so' | grep -q 'Library soname: \[libcublas.so.$major\]'"
  check "libcublas.so.$major: cublasSgemm_v2@@libcublas.so.$major" sh -c "readelf --dyn-syms -W '$blas_so' | grep -q ' cublasSgemm_v2@@libcublas.so.$major\$'"
  check "libcublas.so.$major: no client of its own (no cudaMalloc)" sh -c "! readelf --dyn-syms -W '$blas_so' | grep -q ' cudaMalloc'"
  check "libcudart.so.$major: exports the forwarding entry" sh -c "readelf --dyn-syms -W '$so' | grep -q ' wormhole_cuda_forward_table'"
  for p in blas_nodevice sgemm curand; do
    gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/$p$major" "examples/cuda/$p.c" -L"$lib" -lcublas -lcurand -lcudart -lm
  done
  check "blas_nodevice$major binds libcublas.so.$major and libcurand.so.10 versions" sh -c \
    "readelf -V '$work/blas_nodevice$major' | grep -q 'Name: libcublas.so.$major' && readelf -V '$work/blas_nodevice$major' | grep -q 'Name: libcurand.so.10'"
done
# What PyTorch 2.11.0's CUDA libraries (cu130 wheel) import from cuBLAS,
# cuBLASLt, cuSOLVER and cuRAND, read with nm on a GPU machine: every
# name, at its version, is exported by our stand-in of that soname, or
# `import torch` (RTLD_NOW) or torch.linalg stops at a missing symbol.
check "every cuBLAS, cuBLASLt, cuSOLVER and cuRAND symbol PyTorch 2.11 imports is exported" bash -c '
  declare -A so=([libcublas.so.13]=cublas13 [libcublasLt.so.13]=cublaslt13 [libcusolver.so.12]=cusolver12 [libcurand.so.10]=curand10 [libcudart.so.13]=cudart13)
  missing=0
  while read -r _ sym; do
    name=${sym%@*}; soname=${sym#*@}
    readelf --dyn-syms -W "target/debug/libwormhole_${so[$soname]}.so" | grep -q " $name@@$soname\$" \
      || { echo "missing: $sym"; missing=1; }
  done < crates/wormhole/cuda-api/fixtures/torch-2.11.0-cu130-imports.txt
  exit $missing'
rand_so="$PWD/target/debug/libwormhole_curand10.so"
check "libcurand.so.10: soname" sh -c "readelf -d '$rand_so' | grep -q 'Library soname: \[libcurand.so.10\]'"
check "libcurand.so.10: curandGenerateNormal@@libcurand.so.10" sh -c "readelf --dyn-syms -W '$rand_so' | grep -q ' curandGenerateNormal@@libcurand.so.10\$'"

# Our test kernels: a synthetic fat binary, and nvcc 13.5's builds of
# crates/wormhole/cuda-api/fixtures/testkernels.cu (all checked in): plain,
# with the cubin compressed (LZ4 and Zstandard), whose layouts client and
# server must inflate, and PTX alone, whose parameter lists give them.
fixtures=crates/wormhole/cuda-api/fixtures
nvcc_fixtures="$fixtures/nvcc13-sm90.fatbin $fixtures/nvcc13-lz4.fatbin $fixtures/nvcc13-zstd.fatbin $fixtures/nvcc13-ptx.fatbin"
if ! command -v nvcc >/dev/null 2>&1; then
  venv=target/cuda-nvcc
  [ -d "$venv/lib" ] || python3 -m venv "$venv"
  if [ -z "$(find "$venv" -name nvcc -type f -print -quit)" ] \
     || [ -z "$(find "$venv" -path '*cccl/thrust/sort.h' -print -quit)" ]; then
    "$venv/bin/pip" install -q nvidia-cuda-nvcc==13.5.37 nvidia-cuda-runtime==13.5.37 \
      nvidia-cuda-cccl==13.3.5.0.6
  fi
  PATH="$(dirname "$(find "$PWD/$venv" -name nvcc -type f | head -n1)"):$PATH"
fi
# Thrust's headers: the toolkit's include folder has them, the wheel a
# folder of their own.
cccl=$(dirname "$(dirname "$(command -v nvcc)")")/include/cccl
# Linked against our stand-ins, which carry NVIDIA's sonames and versions.
for p in vectorAdd matmul; do
  nvcc -O2 -cudart shared -arch=sm_90 -L"$work/lib13" -o "$work/$p" "examples/cuda/$p.cu"
done
nvcc -O2 -cudart shared -arch=sm_90 -L"$work/lib13" -o "$work/lenet" examples/cuda/lenet.cu -lcublas
# The same built with --default-stream per-thread: it calls the _ptsz and
# _ptds names (cudaMemcpy_ptds, cudaLaunchKernelExC_ptsz, ...).
nvcc -O2 -cudart shared -arch=sm_90 --default-stream per-thread -L"$work/lib13" -o "$work/lenet_pt" examples/cuda/lenet.cu -lcublas
# __constant__ and __device__ variables from the host (no kernel): copies,
# addresses, sizes, stream-ordered copies; also per-thread default stream.
nvcc -O2 -cudart shared -arch=sm_90 -L"$work/lib13" -o "$work/symbols" examples/cuda/symbols.cu
nvcc -O2 -cudart shared -arch=sm_90 --default-stream per-thread -L"$work/lib13" -o "$work/symbols_pt" examples/cuda/symbols.cu
nvcc -O2 -cudart shared -arch=sm_90 -I"$cccl" -L"$work/lib13" -o "$work/thrust_sort" examples/cuda/thrust_sort.cu
# Thrust and CUB need more of the runtime than <<<>>>: every symbol must
# resolve against the stand-in.
check "nvcc-built Thrust program: every runtime symbol resolves" sh -c \
  "LD_LIBRARY_PATH='$work/lib13' ldd -r '$work/thrust_sort' > '$work/ldd' 2>&1; cat '$work/ldd'; grep -q 'libcudart.so.13 => $work/lib13/' '$work/ldd' && ! grep -q 'undefined symbol' '$work/ldd'"
run_samples() { # LABEL connected|offline, with WORMHOLE_SERVER set by the caller
  for major in 12 13; do
    check "$1: nodevice ($major)" env WORMHOLE_LOG=1 LD_LIBRARY_PATH="$work/lib$major" "$work/nodevice$major"
    # The answers are the same with and without a server: make sure this
    # one really went through the server.
    if [ "$2" = connected ] && grep -q "no Wormhole server" "$work/out"; then
      echo "FAIL $1: the client did not reach the server"; fail=1
    fi
    if [ "$2" = offline ] && ! grep -q "no Wormhole server" "$work/out"; then
      echo "FAIL $1: the client did not notice there is no server"; fail=1
    fi
    # cuBLAS and cuRAND: exactly NVIDIA's answers without a GPU; the GPU
    # samples stop at their first call with the runtime's message.
    check "$1: blas_nodevice ($major)" env LD_LIBRARY_PATH="$work/lib$major" "$work/blas_nodevice$major" "$major"
    for p in sgemm curand; do
      check "$1: $p stops with the native error ($major)" sh -c \
        "LD_LIBRARY_PATH='$work/lib$major' '$work/$p$major' | tee /dev/stderr | grep -q '^cudaMalloc.*CUDA driver version is insufficient'"
    done
    for fb in "$fixtures/testkernels.fatbin" $nvcc_fixtures; do
      check "$1: kernels from $(basename "$fb") ($major)" env LD_LIBRARY_PATH="$work/lib$major" "$work/launch$major" "$fb"
    done
    # Programs built by nvcc: nvcc's own registration code and <<<>>>;
    # without a GPU they must stop at their first CUDA call with the native
    # runtime's message, not crash.
    if [ "$major" = 13 ]; then
      for p in vectorAdd matmul thrust_sort; do
        check "$1: nvcc-built $p stops with the native error" sh -c \
          "LD_LIBRARY_PATH='$work/lib13' '$work/$p' 2>&1 | tee /dev/stderr | grep -q 'CUDA driver version is insufficient'; [ \$? -eq 0 ]"
      done
    fi
  done
}

export WORMHOLE_SERVER="$work/none.sock"
run_samples "no server" offline

start_server() { # ARGS...
  ./target/debug/wormhole-server --socket "$work/s.sock" -q "$@" &
  server_pid=$!
  for _ in $(seq 50); do [ -S "$work/s.sock" ] && return 0; sleep 0.1; done
  echo "server did not start"; return 1
}
stop_server() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; server_pid=""; rm -f "$work/s.sock"; }

export WORMHOLE_SERVER="$work/s.sock"
# A runtime that cannot be loaded: the server answers as a machine
# without the driver does. (Pointing it at our own stand-in must be
# refused too, never forwarded to itself.)
# Our libcublas and libcurand stand-ins first on its library path too.
LD_LIBRARY_PATH="$work/lib13" start_server --cuda-runtime "$work/lib13/libcudart.so.13"
run_samples "server, stand-ins refused" connected
stop_server
start_server --cuda-runtime /nonexistent/libcudart.so.13
run_samples "server without a CUDA runtime" connected
stop_server
start_server --no-cuda
run_samples "server with CUDA disabled" connected
stop_server
# The same server still exports OpenCL (PoCL) next to CUDA.
start_server
check "OpenCL next to CUDA: platforms listed" sh -c "./target/debug/wormhole-server platforms | grep -q ."
run_samples "server exporting OpenCL and CUDA" connected
stop_server

# The whole cuBLAS and cuRAND path with real data: a server whose
# "NVIDIA libraries" are examples/cuda/cpu_device/ (a CPU stand-in under
# the four sonames) runs the samples to the end; their CPU references
# judge every result (host and device pointer modes, results in replies,
# streams, strided batches).
cpu="$work/cpu"; mkdir -p "$cpu"
check_as_natively() { # NAME PROGRAM: $work/PROGRAM prints the same natively
  # on the CPU stand-in and through Wormhole, and `correct` last.
  local remote="LD_LIBRARY_PATH='$work/lib13' '$work/$2'"
  check "$1" bash -c "diff <(LD_LIBRARY_PATH='$cpu' '$work/$2' 2>/dev/null) <($remote) && $remote | tail -n1 | grep -qx correct"
}
gcc -shared -fPIC -O2 -Wall -Werror -o "$cpu/libcpudevice.so" examples/cuda/cpu_device/*.c -lm
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcusolver.so.12 libcuda.so.1; do ln -s libcpudevice.so "$cpu/$n"; done
LD_LIBRARY_PATH="$cpu" start_server --cuda-runtime "$cpu/libcudart.so.13"
# nvcc's lenet: the stand-in runs its kernels by CPU twins of the same
# element functions. Natively (the program on the stand-in directly) and
# through Wormhole (the server on it), losses, accuracy and the weights'
# digest must be identical, and it must have learned.
check "CPU device: nvcc-built lenet trains natively" sh -c \
  "LD_LIBRARY_PATH='$cpu' '$work/lenet' 2048 2 2>/dev/null | tee '$work/lenet.native' | tail -n1 | grep -qx correct"
check "CPU device: nvcc-built lenet trains through Wormhole" sh -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/lenet' 2048 2 | tee '$work/lenet.remote' | tail -n1 | grep -qx correct"
check "CPU device: lenet's results identical natively and through Wormhole" bash -c \
  "cat '$work/lenet.native' '$work/lenet.remote'; diff <(grep -v '^time:' '$work/lenet.native') <(grep -v '^time:' '$work/lenet.remote')"
for p in symbols symbols_pt; do
  check_as_natively "CPU device: variables from the host ($p), as natively and correct" "$p"
done
check "CPU device: lenet built for per-thread default streams, identical natively and through Wormhole" bash -c \
  "diff <(LD_LIBRARY_PATH='$cpu' '$work/lenet_pt' 2048 2 2>/dev/null | grep -v '^time:') <(LD_LIBRARY_PATH='$work/lib13' '$work/lenet_pt' 2048 2 | grep -v '^time:') && LD_LIBRARY_PATH='$work/lib13' '$work/lenet_pt' 2048 2 | tail -n1 | grep -qx correct"
for major in 12 13; do
  check "CPU device: sgemm runs through Wormhole and is correct ($major)" sh -c \
    "LD_LIBRARY_PATH='$work/lib$major' '$work/sgemm$major' 64 | tee /dev/stderr | tail -n1 | grep -qx correct"
  check "CPU device: cuBLAS calls Wormhole refuses answer CUBLAS_STATUS_NOT_SUPPORTED ($major)" sh -c \
    "LD_LIBRARY_PATH='$work/lib$major' '$work/sgemm$major' 64 refused | grep -x 'strsm: status 15'"
  check "CPU device: curand runs through Wormhole and is correct ($major)" sh -c \
    "LD_LIBRARY_PATH='$work/lib$major' '$work/curand$major' | tee /dev/stderr | tail -n1 | grep -qx correct"  # The versions are the server's libraries' (the stand-in's 130100 and
  # 10400), not the client's own (131000 or 120903, 10405 or 10310).
  check "CPU device: cuBLAS's and cuRAND's versions are the server's libraries' ($major)" sh -c \
    "LD_LIBRARY_PATH='$work/lib$major' '$work/sgemm$major' 64 | grep -qx 'cuBLAS 130100' && LD_LIBRARY_PATH='$work/lib$major' '$work/curand$major' | grep -qx 'cuRAND 10400'"
done
# cuBLAS and cuRAND calls go batched once their shape succeeded; a
# deferred one's failure (freed memory) is answered by the next synchronous
# call of the same library, never by another's; with WORMHOLE_SYNC=1 by the
# call itself.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/lib_deferred13" examples/cuda/lib_deferred.c \
  -L"$work/lib13" -lcublas -lcurand -lcudart
check "CPU device: deferred cuBLAS and cuRAND failures answered in their own statuses" sh -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/lib_deferred13' | tee /dev/stderr | tail -n1 | grep -qx correct"
check "CPU device: WORMHOLE_SYNC=1, the failing cuBLAS and cuRAND calls answer themselves" sh -c \
  "WORMHOLE_SYNC=1 LD_LIBRARY_PATH='$work/lib13' '$work/lib_deferred13' sync | tee /dev/stderr | tail -n1 | grep -qx correct"
# Calls a framework makes at start (stream priorities, capture status, info
# and mode, peer access and copies, the stream-ordered allocator, host
# functions, driver entry points): the same answers
# natively on the stand-in and through Wormhole.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/streams13" examples/cuda/streams.c -L"$work/lib13" -lcudart
check "CPU device: stream priorities, capture, peers, async allocation as natively" bash -c \
  "diff <(LD_LIBRARY_PATH='$cpu' '$work/streams13' 2>/dev/null) <(LD_LIBRARY_PATH='$work/lib13' '$work/streams13') && LD_LIBRARY_PATH='$work/lib13' '$work/streams13' | grep -qx 'its priority: 0, -5' && LD_LIBRARY_PATH='$work/lib13' '$work/streams13' | grep -qx 'capture info: 0, status 0, id 0, graph none, deps none none 0' && LD_LIBRARY_PATH='$work/lib13' '$work/streams13' | grep -qx 'stream callback: 0, calls 11' && LD_LIBRARY_PATH='$work/lib13' '$work/streams13' | grep -qx 'bytes 5a 5a 5a 5a' && LD_LIBRARY_PATH='$work/lib13' '$work/streams13' | grep -qx 'driver entry point: 0, none, status 1'"
# The stream-ordered allocator's default pool (an account the client keeps
# of what it holds), the bus id and the profiler: the same answers natively
# on the stand-in and through Wormhole; then, through Wormhole alone, what
# it refuses (interprocess handles, graph capture) with clear errors.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/pools13" examples/cuda/pools.c -L"$work/lib13" -lcudart
check "CPU device: default memory pool, bus id and profiler as natively" bash -c \
  "diff <(LD_LIBRARY_PATH='$cpu' '$work/pools13' 2>/dev/null) <(LD_LIBRARY_PATH='$work/lib13' '$work/pools13') && LD_LIBRARY_PATH='$work/lib13' '$work/pools13' | grep -qx 'used went down by it: 1' && LD_LIBRARY_PATH='$work/lib13' '$work/pools13' | grep -qx 'bus id: 0, 0000:00:00.0'"
check "CPU device: IPC and graph capture refused with errors, not missing symbols" bash -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/pools13' refused | tail -n6 | tee /dev/stderr | diff - <(printf '%s\\n' 'ipc: get 801, open 801, close 1' 'capture: begin 801, end 401, last error 401' 'graphs: instantiate 1, launch 1, destroy 1' 'pool access: own 0, own read-only 1, device 9 101' 'managed: 801, untouched, last error 801' 'mapped: 801, untouched')"
# Page-locked host memory as cudaPointerGetAttributes reports it (what
# PyTorch's Tensor.is_pinned asks), through Wormhole (the stand-in has none).
check "CPU device: pinned and registered host memory reported as such" bash -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/pools13' pinned | tail -n9 | tee /dev/stderr | diff - <(printf '%s\\n' 'malloc host: 0, type 1, inside 1' 'host alloc: 0, type 1' 'pageable: type 0' 'register: 0, type 1, past it 0' 'register again: 712' 'unregister: 0, type 0, again 713' 'free pageable refused: 1' 'free host: 0, type 0' 'free host alloc: 0')"
# The driver calls a framework makes itself (PyTorch: primary context
# state, current context), through the libcuda stand-in, looked up with
# dlsym as PyTorch does; without a server, the driver cannot start.
gcc -O2 -Wall -Werror -o "$work/driver" examples/cuda/driver.c -ldl
printf '%s\n' 'cuMemCreate missing' 'init: 0, flags 1: 1' 'driver version: 0, positive' 'devices: 0, 1' \
  'device 0: 0, 0; device 1: 101' 'primary state: 0, flags 0, active 0' 'current: 0, none' 'retain: 0, set' \
  'set current: 0; a forged one: 201' 'current: 0, the primary' 'primary state: 0, active 1' 'release: 0, again: 201' \
  'name of 101: 0, CUDA_ERROR_INVALID_DEVICE' 'string of 12345: 1, (null)' > "$work/driver.want"
check "CPU device: libcuda stand-in answers the driver calls PyTorch makes" bash -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/driver' | diff '$work/driver.want' -"
check "libcuda stand-in without a server: the driver cannot start" bash -c \
  "WORMHOLE_SERVER='$work/none.sock' LD_LIBRARY_PATH='$work/lib13' '$work/driver' 2>/dev/null | grep -qx 'init: 3, flags 1: 1'"
# cuBLASLt as PyTorch's nn.Linear calls it: a bias and a ReLU epilogue, a
# strided batch, a handle of cublasLtCreate's; the same lines natively on
# the stand-in and through Wormhole, and right by the CPU reference. Then
# what Wormhole's model refuses: where it is set (the client), or for the
# memory it would touch (the server).
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/lt_matmul" examples/cuda/lt_matmul.c -L"$work/lib13" -lcublasLt -lcublas -lcudart -lm
check_as_natively "CPU device: cuBLASLt matmuls as natively, and correct" lt_matmul
check "CPU device: cuBLASLt refusals" bash -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/lt_matmul' refused | tee /dev/stderr | diff - <(printf '%s\\n' 'device pointer mode: 15' 'an attribute of the wrong size: 7' 'row order: 15' 'shapes that disagree: 7' 'heuristic: 0, count 1' 'an algorithm of its own: 7' 'operands past their allocation: 7' 'destroyed: 0, again 7')"
# Pitched memory and 2D copies in every direction, checked byte by byte,
# the same natively and through Wormhole.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/memcpy2d13" examples/cuda/memcpy2d.c -L"$work/lib13" -lcudart
check_as_natively "CPU device: pitched memory and 2D copies as natively" memcpy2d13
# Pitched 3D memory (the client's slices of 2D calls), every byte checked.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/mem3d13" examples/cuda/mem3d.c -L"$work/lib13" -lcudart
check_as_natively "CPU device: 3D memory (malloc, memsets, copies) as natively" mem3d13
# cuSOLVER's Cholesky, LU, QR and symmetric eigensolver (classic and
# 64-bit API, float and double): the same lines natively on the stand-in
# and through Wormhole, judged by residuals on the CPU; then with every
# call waiting (WORMHOLE_SYNC=1).
# A NULL handle too: the stand-ins refuse it (NVIDIA's library is not
# asked, on a GPU; see solver.c).
export SOLVER_NULL_HANDLE=1
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/solver13" examples/cuda/solver.c -L"$work/lib13" -lcusolver -lcudart -lm
check_as_natively "CPU device: cuSOLVER factorisations and solves as natively, and correct" solver13
check "CPU device: cuSOLVER with WORMHOLE_SYNC=1" sh -c \
  "WORMHOLE_SYNC=1 LD_LIBRARY_PATH='$work/lib13' '$work/solver13' | tail -n1 | grep -qx correct"
# What PyTorch's linalg library imports beyond that is exported only to
# refuse (a status, not a missing symbol).
check "CPU device: cuSOLVER's LDL^T, SVD, Jacobi refused with CUSOLVER_STATUS_NOT_SUPPORTED" bash -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/solver13' refused | tee /dev/stderr | diff - <(printf '%s\\n' 'sytrf size: 9, lwork -1' 'gesvd size: 9' 'syevj info: 9, untouched')"
# A tenant's memory quota (tenant_memory): without one, the stand-in's
# 16 GiB and all 64 allocations; with 10 MiB, a device of 10 MiB, two
# 4 MiB allocations and not a third, and the quota back after cudaFree.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/quota13" examples/cuda/quota.c -L"$work/lib13" -lcudart
check "CPU device: no quota, the device's own memory" sh -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/quota13' | tee /dev/stderr | grep -qx 'allocations: 64, then 0'"
stop_server
LD_LIBRARY_PATH="$cpu" start_server --cuda-runtime "$cpu/libcudart.so.13" --tenant-memory 10M
cat > "$work/quota.want" <<'WANT'
cudaGetDeviceProperties 0, totalGlobalMem 10485760
at start: cudaMemGetInfo 0, free 10485760, total 10485760
allocations: 2, then 2
holding them: cudaMemGetInfo 0, free 2097152, total 10485760
after freeing: 2, then 2
at the end: cudaMemGetInfo 0, free 10485760, total 10485760
WANT
check "CPU device: a 10 MiB quota holds" sh -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/quota13' | diff '$work/quota.want' -"
stop_server
# Delay storing for CUDA (docs/delay-storing.md): the stand-in's driver
# has the virtual memory calls (cpu_device/vmm.c, as libcuda.so.1), so an
# evicted allocation's memory is really gone (a kernel or copy touching it
# would fault) and comes back at the same address. Three pressure clients
# (30 MiB of 2 MiB slabs each) and lenet (20 MiB) at once through a 64 MiB
# budget: every output as natively, and the ledger's report shows saves
# and restores, no refusal, and nothing held once all are gone.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/pressure13" examples/cuda/pressure.c -L"$work/lib13" -lcublas -lcudart -lm
for seed in 1 2 3; do
  LD_LIBRARY_PATH="$cpu" "$work/pressure13" 24 6 "$seed" > "$work/pressure.native.$seed" 2>/dev/null || true
done
check "CPU device: pressure sample correct natively" sh -c "tail -n1 '$work/pressure.native.1' | grep -qx correct"
residency_server() { # LOG ARGS...: a server sharing the stand-in's memory
  local log=$1; shift
  LD_LIBRARY_PATH="$cpu" ./target/debug/wormhole-server --socket "$work/s.sock" -q \
    --cuda-runtime "$cpu/libcudart.so.13" --residency-api cuda "$@" 2> "$log" &
  server_pid=$!
  for _ in $(seq 50); do [ -S "$work/s.sock" ] && return 0; sleep 0.1; done
  echo "server did not start"; return 1
}
pressure_at_once() { # NAME SEEDS...: pressure clients at once; each as natively
  local name=$1 pids=() seed ok=0
  shift
  for seed in "$@"; do
    LD_LIBRARY_PATH="$work/lib13" timeout 120 "$work/pressure13" 24 6 "$seed" > "$work/pressure.remote.$seed" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || ok=1; done
  for seed in "$@"; do
    diff "$work/pressure.native.$seed" "$work/pressure.remote.$seed" || ok=1
    tail -n1 "$work/pressure.remote.$seed" | grep -qx correct || ok=1
  done
  if [ "$ok" -eq 0 ]; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
ledger_line() { # LOG [TEXT]: the listener's report of its ledger once it
  # says TEXT (default: nothing resident; tenants end a moment after their
  # clients), or after 5 s
  local before line want=${2:- 0 resident}
  for _ in $(seq 10); do
    before=$(grep -c 'residency: device budget' "$1" || true)
    kill -USR1 "$server_pid"
    for _ in $(seq 50); do
      [ "$(grep -c 'residency: device budget' "$1" || true)" -gt "$before" ] && break
      sleep 0.1
    done
    line=$(grep 'residency: device budget' "$1" | tail -n1)
    case $line in *"$want"*) break ;; esac
    sleep 0.5
  done
  echo "$line"
}
residency_server "$work/delay.log" --device-memory 64M --oversubscribe
LD_LIBRARY_PATH="$work/lib13" timeout 120 "$work/lenet" 2048 2 > "$work/lenet.pressure" 2>&1 &
lenet_pid=$!
pressure_at_once "CUDA residency: three pressure clients through a 64 MiB budget, each as natively" 1 2 3
wait "$lenet_pid" || true
check "CUDA residency: lenet beside them, identical to native" bash -c \
  "diff <(grep -v '^time:' '$work/lenet.native') <(grep -v '^time:' '$work/lenet.pressure')"
ledger_line "$work/delay.log" > "$work/delay.ledger"
check "CUDA residency: the ledger saw saves and restores, no refusal, nothing left" bash -c \
  "cat '$work/delay.ledger'; grep -q ' 0 resident' '$work/delay.ledger' && grep -q 'refusals 0 ' '$work/delay.ledger' && grep -Eq 'restored [1-9][0-9]* freed' '$work/delay.ledger' && grep -Eq 'saved [1-9][0-9]*;' '$work/delay.ledger' && grep -Eq 'skipped resident [1-9]' '$work/delay.ledger'"
stop_server
# kill -9 of a tenant while the ledger moves slabs: its client fails, the
# other is served as natively, and the dead tenant's share comes back (the
# ledger holds nothing once the other is gone too).
WORMHOLE_LOG=info residency_server "$work/kill.log" --device-memory 40M --oversubscribe
LD_LIBRARY_PATH="$work/lib13" timeout 120 "$work/pressure13" 24 12 1 > "$work/pressure.killed" 2>&1 &
victim_client=$!
LD_LIBRARY_PATH="$work/lib13" timeout 120 "$work/pressure13" 24 6 2 > "$work/pressure.remote.2" 2>&1 &
other_client=$!
sleep 1.5
victim_pid=$(pgrep -P "$victim_client" | head -n1)
victim=$(sed -n "s/.*tenant process \([0-9]*\) .* client pid ${victim_pid:-none} .*/\1/p" "$work/kill.log" | head -n1)
[ -n "$victim" ] && kill -9 "$victim"
wait "$victim_client" || true
wait "$other_client" || true
check "CUDA residency: kill -9 of a tenant (pid ${victim:-none}): the other served as natively" bash -c \
  "[ -n '$victim' ] && diff '$work/pressure.native.2' '$work/pressure.remote.2'"
ledger_line "$work/kill.log" "deaths 2" > "$work/kill.ledger"
check "CUDA residency: kill -9 of a tenant: its share came back, nothing held" bash -c \
  "cat '$work/kill.ledger'; grep -q ' 0 resident' '$work/kill.ledger' && grep -q 'deaths 2' '$work/kill.ledger'"
stop_server
# The eager baseline moves every slab at every switch: still correct;
# its store on disk (store_dir: a file per tenant the listener opens).
mkdir -p "$work/store"
residency_server "$work/eager.log" --device-memory 40M --oversubscribe --residency eager --store-dir "$work/store"
pressure_at_once "CUDA residency, eager: two pressure clients at once, each as natively" 1 2
ledger_line "$work/eager.log" > "$work/eager.ledger"
check "CUDA residency, eager: the ledger saw saves" bash -c \
  "cat '$work/eager.ledger'; grep -Eq 'saved [1-9][0-9]*;' '$work/eager.ledger' && grep -q 'refusals 0 ' '$work/eager.ledger'"
stop_server
# Without oversubscribe the budget is a hard limit: a second tenant past
# it gets cudaErrorMemoryAllocation, as on a full device; once the first
# is gone, it is served.
residency_server "$work/off.log" --device-memory 40M
LD_LIBRARY_PATH="$work/lib13" timeout 120 "$work/pressure13" 24 12 1 > "$work/pressure.first" 2>&1 &
first_pid=$!
sleep 1
check "CUDA residency off: a tenant past the budget gets out of memory" bash -c \
  "! LD_LIBRARY_PATH='$work/lib13' '$work/pressure13' 24 6 2 > '$work/pressure.second' 2>&1; cat '$work/pressure.second'; grep -q 'cudaMalloc.*(2)' '$work/pressure.second'"
wait "$first_pid" || true
check "CUDA residency off: the first tenant is correct" sh -c "tail -n1 '$work/pressure.first' | grep -qx correct"
check "CUDA residency off: once it is gone, the second is served" bash -c \
  "LD_LIBRARY_PATH='$work/lib13' '$work/pressure13' 24 6 2 | diff '$work/pressure.native.2' -"
stop_server
# Two devices: the current device is per host thread (a new thread on
# device 0, another's cudaSetDevice not its own, each thread's memory on
# its own device while two threads alternate), the same natively and
# through Wormhole, where the tenant has one current device.
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/devices13" examples/cuda/devices.c -L"$work/lib13" -lcudart -lpthread
gcc -O2 -Wall -Werror -Iexamples/cuda -o "$work/limits13" examples/cuda/limits.c -L"$work/lib13" -lcudart
CPU_DEVICE_COUNT=2 LD_LIBRARY_PATH="$cpu" start_server --cuda-runtime "$cpu/libcudart.so.13"
# A device's limits (per device), cache preference and flags, a stream's
# flags, bus ids and peer attributes, as natively.
check "CPU device, two devices: limits, flags, bus ids, peer attributes as natively" bash -c \
  "diff <(CPU_DEVICE_COUNT=2 LD_LIBRARY_PATH='$cpu' '$work/limits13' 2>/dev/null) <(LD_LIBRARY_PATH='$work/lib13' '$work/limits13') && LD_LIBRARY_PATH='$work/lib13' '$work/limits13' | grep -qx \"device 1's stack: 0, 1024\""
check "CPU device, two devices: the current device is per thread, as natively" bash -c \
  "diff <(CPU_DEVICE_COUNT=2 LD_LIBRARY_PATH='$cpu' '$work/devices13' 2>/dev/null) <(LD_LIBRARY_PATH='$work/lib13' '$work/devices13') && LD_LIBRARY_PATH='$work/lib13' '$work/devices13' | tail -n1 | grep -qx correct && WORMHOLE_SYNC=1 LD_LIBRARY_PATH='$work/lib13' '$work/devices13' | tail -n1 | grep -qx correct"
stop_server

if [ "$fail" -ne 0 ]; then
  echo "wormhole-cuda: FAILED"
  exit 1
fi
echo "wormhole-cuda: all no-GPU checks passed"
