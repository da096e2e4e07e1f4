#!/usr/bin/env bash
# The test command (README, CI): installs what the tests need, runs each
# part's suite (scripts/test-*.sh, which install their own extra
# dependencies and test their own crates), then the remaining crates' tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
# A one-off build gains nothing from incremental caches, which take gigabytes.
[ "${CI:-}" = true ] && export CARGO_INCREMENTAL=0
# Running out of disk makes every later step fail with unrelated-looking
# errors; say so once, up front.
free_kib=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "${free_kib:-0}" -lt $((6 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kib / 1024)) MiB free here; the build and tests need about 6 GiB" >&2
fi
cargo build --workspace --all-targets
status=0
# Gates that keep the tree as it is (formatting, clippy, fuzz targets that
# build): each fails the run, after all the tests.
./scripts/gates.sh || status=1
for t in scripts/test-*.sh; do
  [ -e "$t" ] || continue
  echo "== $t =="
  if ! bash "$t"; then
    echo "FAILED: $t"
    status=1
  fi
done
# Crates whose tests a script above already ran.
covered=(giant-trace giant-sim giant-rebalance vnet-core vnet-api vnetd vnetctl wormhole-opencl-api wormhole-it wormhole-isolation-tests wormhole-server wormhole-bench wormhole-apigen wormhole-cuda-api wormhole-cudart wormhole-cuda-forward wormhole-cuda-stand-ins)
excludes=()
for c in "${covered[@]}"; do excludes+=(--exclude "$c"); done
echo "== cargo test (remaining crates) =="
cargo test --workspace "${excludes[@]}" || status=1
exit $status
