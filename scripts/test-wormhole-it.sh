#!/usr/bin/env bash
# Wormhole's OpenCL integration tests: each C program under tests/opencl/
# runs natively (PoCL) and through a Wormhole server, and the outputs must
# match. Installs what it needs (idempotent), then runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# iproute2 and ping: tests/partition.rs puts client and server on two
# network namespaces and cuts the link between them.
for p in pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc iproute2 iputils-ping; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "${need[@]}" || { apt-get update && apt-get install -y "${need[@]}"; }
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust" >&2; exit 1; }

# PoCL's kernel cache lives under $HOME; give the run its own, so that a
# stale or shared cache cannot change results.
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$(mktemp -d /tmp/wormhole-it-pocl.XXXXXX)}"

# The harness builds wormhole-server and the ICD itself (same profile);
# building them first keeps that step's output in the log.
cargo build -p wormhole-server -p wormhole-opencl-icd
cargo test -p wormhole-opencl-api
cargo test -p wormhole-it -- --test-threads=2
