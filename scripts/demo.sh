#!/usr/bin/env bash
# The main job: a real OpenCL program (examples/demo.c) run natively on
# PoCL and then, unmodified, through a local Wormhole server on the same
# PoCL device. Prints both results and times.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run
out=target/demo; mkdir -p "$out"
cc -O2 -o "$out/demo" examples/demo.c -lOpenCL -lm
pocl_icd=$(ls /etc/OpenCL/vendors/*pocl*.icd | head -n1)
# PoCL compiles each kernel on first use and caches it; a silent first run
# keeps that one-time cost out of both timings.
OCL_ICD_VENDORS="$pocl_icd" "$out/demo" >/dev/null
echo "== native (PoCL) =="
OCL_ICD_VENDORS="$pocl_icd" "$out/demo"
echo
echo "== through Wormhole (local server, shared memory) =="
target/release/wormhole-run --start-server -- "$out/demo"
