#!/usr/bin/env bash
# CI entry for the pyopencl part: installs what it needs (idempotently),
# runs the unit tests of the size rules it relies on, the clinfo comparison
# and the pyopencl suite subset (native PoCL vs Wormhole). Exits non-zero
# when a test passes natively but not through Wormhole (unexplained), or
# clinfo shows an unexplained difference. The full run is
# `scripts/pyopencl-suite.sh --full` (docs/wormhole-opencl.md).
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo python3 python3-venv python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

status=0
cargo test -p wormhole-opencl-api || status=1
echo "== clinfo: native vs Wormhole =="
bash scripts/clinfo-diff.sh || status=1
echo "== pyopencl test suite (subset): native vs Wormhole =="
bash scripts/pyopencl-suite.sh --subset || status=1
exit $status
