#!/usr/bin/env bash
# CI entry for the pyopencl part: installs what it needs (idempotently),
# runs the unit tests of the size rules it relies on, the clinfo comparison
# and the pyopencl suite subset (native PoCL vs Wormhole). Exits non-zero
# when a test passes natively but not through Wormhole (unexplained), or
# clinfo shows an unexplained difference. The full run is
# `scripts/pyopencl-suite.sh --full` (docs/wormhole-opencl.md).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/need-packages.sh pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo python3 python3-venv python3-pip
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

status=0
cargo test -p wormhole-opencl-api || status=1
echo "== clinfo: native vs Wormhole =="
bash scripts/clinfo-diff.sh || status=1
echo "== pyopencl test suite (subset): native vs Wormhole =="
bash scripts/pyopencl-suite.sh --subset || status=1
echo "== pyopencl test suite (subset) under memory pressure (delay storing): native vs Wormhole =="
PYOPENCL_REUSE_NATIVE=1 bash scripts/pyopencl-suite.sh --subset --pressure || status=1
exit $status
