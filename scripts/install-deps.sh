#!/usr/bin/env bash
# Installs what building and testing Wormhole needs on a Debian machine:
# PoCL's CPU device (the real OpenCL backend), the ICD loader and headers,
# clinfo, a C compiler, and a Rust toolchain if none is present; and clang
# with libbpf's headers, which build vnetd's kernel fast path (tc eBPF).
set -euo pipefail
"$(dirname "$0")/need-packages.sh" pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc clang libbpf-dev pkg-config iproute2 procps python3 python3-venv
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
