#!/usr/bin/env bash
# Wormhole's benchmark suite, in one command (issue 3): installs what it
# needs, builds release binaries, runs native and remoted OpenCL side by side
# (null-call round trips beside raw futex/spin/TCP ping-pongs, the in-process
# marshalling cost, a call-heavy workload with client and server CPU, 256 MiB
# transfers, and Debian's clpeak unmodified), and writes bench/out/results.md,
# results.json and PNG charts. Extra arguments go to `wh-bench run`
# (e.g. --rounds 5, --clpeak "" to skip clpeak); see `wh-bench run --help`.
# Bounded: the measurements fit a budget of 360 s (`--budget`), sections
# shortening their rounds to fit, and are killed after BENCH_LIMIT seconds
# (default 480) whatever happens.
#
# --guest-halt-poll NS (first argument, root only): in a KVM guest with the
# haltpoll cpuidle driver, let an idle vCPU poll for up to NS ns before it
# halts during the run (Linux's default is 200000; some VMs set 0), and put
# the old value back afterwards. The report names the value it ran with.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/bench/out
mkdir -p "$out"

pkgs=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc clpeak fonts-dejavu-core)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  echo "== installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: run scripts/install-deps.sh" >&2; exit 1; }

echo "== building (release)"
cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run -p wormhole-bench
bin=${CARGO_TARGET_DIR:-$root/target}/release
cc -O2 -Wall -o "$out/whbench" bench/wormhole/whbench.c -lOpenCL

. "$root/bench/halt-poll.sh"
if [ "${1:-}" = --guest-halt-poll ]; then
  want=${2:?--guest-halt-poll needs a value in ns}
  shift 2
  trap halt_poll_restore EXIT
  halt_poll_set "$want"
fi

echo "== measuring on $(nproc) CPUs ($(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)); load: $(cut -d' ' -f1-3 /proc/loadavg)"
timeout --kill-after=10 "${BENCH_LIMIT:-480}" \
  "$bin/wh-bench" run --bin-dir "$bin" --whbench "$out/whbench" --out "$out" "$@"
echo "== report: $out/results.md (paste into docs/benchmarks-wormhole.md), charts: $out/*.png"
