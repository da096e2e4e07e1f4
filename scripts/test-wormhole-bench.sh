#!/usr/bin/env bash
# Tests of the benchmark tooling (crates/wormhole/bench): statistics, /proc
# parsing, the time-bounded process runner, clpeak output parsing, and the
# raw ping-pongs between real processes. Speed is never asserted here: the
# benchmarks themselves are bench/wormhole/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo test -p wormhole-bench
