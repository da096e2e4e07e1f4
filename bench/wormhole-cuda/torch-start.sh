#!/usr/bin/env bash
# How long PyTorch takes to start on CUDA through Wormhole, side by side in
# one run: `import torch` alone (no CUDA: the floor), then `import torch`
# and a first CUDA tensor with the stand-ins preloaded and a local server.
# Then, per client, the time of one small tensor copy on the device (2,000
# clones of 1,024 floats after 100 to warm up) and of one 16x16 matmul
# (2,000, through cuBLAS) and of one nn.Linear(16, 16) on 16 rows (2,000,
# through cuBLASLt; "-" for a client that refuses it), which PyTorch's
# device guards, cuBLAS handle settings and cuBLASLt descriptors
# around every operation dominate when they cost round trips
# (release builds; the server runs on the CPU stand-in device, which is
# enough: what is measured is the registration of PyTorch's kernels and
# the first allocation and copy). OLD=DIR adds a client built elsewhere
# (DIR holding libcudart.so.13, libcublas.so.13 and libcurand.so.10, from
# an older commit, and the libcuda.so.1 that goes with it) against the
# same server. Rounds alternate the order.
# Needs PyTorch with CUDA 13 (scripts/try-pytorch.sh installs one into
# target/torch-venv); not run by CI.
# Usage: [OLD=DIR] bench/wormhole-cuda/torch-start.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
rounds=${1:-3}
py=python3
"$py" -c 'import torch' 2>/dev/null || py=$root/target/torch-venv/bin/python
"$py" -c 'import torch' || { echo "no PyTorch: run scripts/try-pytorch.sh first" >&2; exit 2; }
cargo build --release -q -p wormhole-server -p wormhole-cudart-13 -p wormhole-cublas-13 -p wormhole-curand-10 -p wormhole-cuda-driver-1 -p wormhole-cublaslt-13
work=$(mktemp -d /tmp/wormhole-torch-start.XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cpu="$work/cpu"; mkdir -p "$cpu"
cc -shared -fPIC -O2 -o "$cpu/libcpudevice.so" examples/cuda/cpu_device/*.c -lm
for n in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10; do ln -s libcpudevice.so "$cpu/$n"; done
cp target/release/libwormhole_cuda_driver1.so "$work/libcuda.so.1"
new="$work/new"; mkdir -p "$new"
cp target/release/libwormhole_cudart13.so "$new/libcudart.so.13"
cp target/release/libwormhole_cublas13.so "$new/libcublas.so.13"
cp target/release/libwormhole_curand10.so "$new/libcurand.so.10"
cp target/release/libwormhole_cublaslt13.so "$new/libcublasLt.so.13"
LD_LIBRARY_PATH="$cpu" target/release/wormhole-server --socket "$work/s.sock" -q \
  --cuda-runtime "$cpu/libcudart.so.13" &
pid=$!
for _ in $(seq 100); do [ -S "$work/s.sock" ] && break; sleep 0.1; done

seconds() { # LABEL COMMAND...: wall seconds of one run, checked
  local t0 t1
  t0=$(date +%s.%N)
  "${@:2}" >/dev/null 2>&1 || { echo "$1 failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
}
client() { # DIR CODE: Python CODE with the client in DIR, through the server
  local lt=""
  [ -f "$1/libcublasLt.so.13" ] && lt=":$1/libcublasLt.so.13"
  env WORMHOLE_SERVER="$work/s.sock" LD_LIBRARY_PATH="$1:$work" \
    LD_PRELOAD="$1/libcudart.so.13:$1/libcublas.so.13:$1/libcurand.so.10$lt" \
    "$py" -W ignore -c "$2"
}
through() { # DIR: import torch and a first CUDA tensor through Wormhole
  client "$1" 'import torch; torch.ones(2).cuda()'
}
clone_us() { # DIR: microseconds per clone, per matmul and per linear layer
  client "$1" '
import time, torch
x = torch.ones(1024).cuda()
a = torch.ones(16, 16).cuda()
for _ in range(100): x.clone(); a @ a
torch.cuda.synchronize()
t = time.time()
for _ in range(2000): x.clone()
torch.cuda.synchronize()
u = time.time()
for _ in range(2000): a @ a
torch.cuda.synchronize()
v = time.time()
lin = "-"
try:  # cuBLASLt: a client that refuses it has no figure
    layer = torch.nn.Linear(16, 16).cuda()
    for _ in range(100): layer(a)
    torch.cuda.synchronize()
    w = time.time()
    for _ in range(2000): layer(a)
    torch.cuda.synchronize()
    lin = "%.1f" % ((time.time() - w) / 2000 * 1e6)
except RuntimeError:
    pass
print("%.1f/%.1f/%s" % ((u - t) / 2000 * 1e6, (v - u) / 2000 * 1e6, lin))'
}
configs=(import new); [ -n "${OLD:-}" ] && configs+=(old)
declare -A times clones
for r in $(seq "$rounds"); do
  order=("${configs[@]}"); [ $((r % 2)) -eq 0 ] && order=($(printf '%s\n' "${configs[@]}" | tac))
  for c in "${order[@]}"; do
    case $c in
      import) t=$(seconds import "$py" -c 'import torch') ;;
      new) t=$(seconds new through "$new") ;;
      old) t=$(seconds old through "$OLD") ;;
    esac
    times[$c]="${times[$c]:-} $t"
    case $c in
      new) clones[new]="${clones[new]:-} $(clone_us "$new")" ;;
      old) clones[old]="${clones[old]:-} $(clone_us "$OLD")" ;;
    esac
  done
done
echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs ($(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)), $rounds rounds, commit $(git rev-parse --short HEAD)"
echo
echo "| configuration | seconds, by round | median |"
echo "| --- | --- | ---: |"
for c in "${configs[@]}"; do
  med=$(printf '%s\n' ${times[$c]} | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  case $c in
    import) label='`import torch` alone (no CUDA)' ;;
    new) label='`import torch` + first CUDA tensor, through Wormhole' ;;
    old) label="the same with the client in \`$OLD\`" ;;
  esac
  echo "| $label | $(printf '%.2f ' ${times[$c]}) | $(printf '%.2f' "$med") |"
done
echo
echo "| client | µs per clone / per 16x16 matmul / per nn.Linear(16, 16) on 16 rows, by round | median of each |"
echo "| --- | --- | ---: |"
for c in new old; do
  [ -n "${clones[$c]:-}" ] || continue
  med=$(for k in 1 2 3; do printf '%s\n' ${clones[$c]} | cut -d/ -f$k | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; done | paste -sd/)
  echo "| $([ $c = new ] && echo this commit\'s || echo "\`$OLD\`") | ${clones[$c]} | $med |"
done
