#!/usr/bin/env bash
# Delay storing's benchmark, in one command (issue 31): builds release
# binaries, then runs bench/delay-storing/run.py, which prints a table and
# writes bench/out/delay-storing.{md,json}:
#   (a) room for everyone: residency on (delay storing) vs off, per call and
#       on a call-heavy workload (bench/wormhole/whbench.c), side by side,
#       and what the hooks cost per call, timed in one process
#       (`wh-bench residency-hooks`);
#   (b) 20 tenants each holding a quarter of the budget: one active at a
#       time (notebook) and round-robin among 4, delay storing vs eager:
#       throughput and bytes moved; and `residency = off` refusing the
#       tenants past the budget;
#   (c) resuming a tenant that was not displaced, eager vs delay storing.
# Extra arguments go to run.py (e.g. --only b, --budget-mib 512); see
# `python3 bench/delay-storing/run.py --help`. Killed after BENCH_LIMIT
# seconds (default 1800).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/bench/out
mkdir -p "$out"
for p in pocl-opencl-icd ocl-icd-opencl-dev opencl-headers gcc python3; do
  dpkg -s "$p" >/dev/null 2>&1 || { echo "missing package $p (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "== building (release)"
cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-bench
bin=${CARGO_TARGET_DIR:-$root/target}/release
cc -O2 -Wall -o "$out/whbench" bench/wormhole/whbench.c -lOpenCL
cc -O2 -Wall -o "$out/ds-tenant" bench/delay-storing/tenant.c -lOpenCL
icd=$(mktemp -d /tmp/wh-delay-icd.XXXXXX)
trap 'rm -rf "$icd"' EXIT
echo "$bin/libwormhole_opencl.so" > "$icd/wormhole.icd"
# Kernels compiled once for every tenant of every run.
export POCL_CACHE_DIR="${POCL_CACHE_DIR:-$out/pocl-cache}"
mkdir -p "$POCL_CACHE_DIR"
timeout "${BENCH_LIMIT:-1800}" python3 bench/delay-storing/run.py --server "$bin/wormhole-server" \
  --icd "$icd" --tenant "$out/ds-tenant" --whbench "$out/whbench" --wh-bench "$bin/wh-bench" --out "$out" "$@"
