#!/usr/bin/env bash
# GPU validation of Wormhole for CUDA (needs an NVIDIA GPU and driver; not
# run by CI). Builds the kernel samples with nvcc (-cudart shared), runs
# each natively and then unmodified through a local Wormhole server, and
# prints both outputs. nvcc comes from the toolkit if installed, else from
# PyPI's nvidia-cuda-nvcc wheel (downloaded into a venv under target/).
# Usage: scripts/gpu-validate-cuda.sh [12|13]   (default: the driver's major)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
nvidia-smi >/dev/null || { echo "no NVIDIA driver/GPU here"; exit 2; }
major=${1:-$(nvidia-smi | sed -n 's/.*CUDA Version: \([0-9]*\).*/\1/p' | head -n1)}
out=target/gpu-validate; mkdir -p "$out"
if ! command -v nvcc >/dev/null; then
  python3 -m venv "$out/venv"
  if [ "$major" = 12 ]; then pkgs="nvidia-cuda-nvcc-cu12 nvidia-cuda-runtime-cu12"; else pkgs="nvidia-cuda-nvcc nvidia-cuda-runtime"; fi
  "$out/venv/bin/pip" install -q $pkgs
  nvcc=$(find "$out/venv" -name nvcc -type f | head -n1)
  export PATH="$(dirname "$nvcc"):$PATH"
  cudart_dir=$(dirname "$(find "$out/venv" -name "libcudart.so.$major" | head -n1)")
  inc=$(dirname "$(find "$out/venv" -name cuda_runtime_api.h | head -n1)")
  extra=(-I"$inc" -L"$cudart_dir" -Xlinker -rpath-link="$cudart_dir")
else
  cudart_dir=$(dirname "$(ldconfig -p | sed -n "s/.*libcudart.so.$major => //p" | head -n1)")
  extra=()
fi
cargo build --release -q -p wormhole-server -p "wormhole-cudart-$major"
lib="$out/lib$major"; mkdir -p "$lib"
ln -sf "$PWD/target/release/libwormhole_cudart$major.so" "$lib/libcudart.so.$major"
for s in vectorAdd matmul; do
  nvcc -O2 -cudart shared "${extra[@]}" -o "$out/$s" "examples/cuda/$s.cu"
done
./target/release/wormhole-server --socket "$out/s.sock" -q &
pid=$!; trap 'kill $pid 2>/dev/null' EXIT; sleep 1
status=0
for s in vectorAdd matmul; do
  echo "== $s native"; LD_LIBRARY_PATH="$cudart_dir" timeout 120 "$out/$s" || status=1
  echo "== $s through Wormhole"
  WORMHOLE_SERVER="$out/s.sock" LD_LIBRARY_PATH="$lib" timeout 120 "$out/$s" || status=1
done
exit $status
