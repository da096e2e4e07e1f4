#!/usr/bin/env bash
# Throughput benchmarks of the giant part. Results go to bench/out/giant/ (ignored);
# copy the figures into docs/benchmarks-giant.md with date and machine.
#   HOURS=24 bench/giant/run.sh        # full-scale cell (12.5k machines), 24 h of trace
#   HOURS=696 bench/giant/run.sh       # the whole 29 days (about 1.4 billion rows)
# Old build vs this one, side by side (excerpt and full scale, with an identical-output
# check): bench/giant/compare.sh (see its header).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/out/giant
mkdir -p "$out"
{
    date -u
    echo "nproc: $(nproc)"
    lscpu | grep 'Model name' || true
    uptime
} | tee "$out/machine.txt"
cargo build --release -p giant-sim
# 1. Stage by stage on the real excerpt, one thread, best of 7 (gzip backends, csv crate vs ours).
cargo bench -p giant-sim --bench throughput | tee "$out/throughput.txt"
# 2. Full-scale synthetic cell: generated in memory window by window, parsed and simulated
#    on one thread (generation timed separately), all 12,500 machines, every job.
./target/release/giant-sim synth-bench --trace-machines 12500 --hours "${HOURS:-24}" \
    --machines 12500 --job-sample 1 --policy budget-best-fit | tee "$out/synth-${HOURS:-24}h.txt"
# 3. The same rows parsed only (every field), to split parse and simulation time
#    (skipped for long runs).
if [ "${HOURS:-24}" -le 48 ]; then
    ./target/release/giant-sim synth-bench --trace-machines 12500 --hours "${HOURS:-24}" \
        --machines 12500 --job-sample 1 --parse-only | tee "$out/synth-${HOURS:-24}h-parse.txt"
fi
uptime | tee -a "$out/machine.txt"
