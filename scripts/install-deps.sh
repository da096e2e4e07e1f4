#!/usr/bin/env bash
# Installs what building and testing Wormhole needs on a Debian machine:
# PoCL's CPU device (the real OpenCL backend), the ICD loader and headers,
# clinfo, a C compiler, and a Rust toolchain if none is present.
set -euo pipefail
pkgs=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc pkg-config iproute2 procps python3 python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
