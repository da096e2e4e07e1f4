#!/usr/bin/env bash
# Isolation and robustness tests of the Wormhole core (see
# docs/wormhole-security.md): bad input from one tenant while another is
# served, kill -9 of a client mid-call, a blocked client whose tenant dies,
# idle CPU, no server / bad greeting. Installs what it needs (Debian), builds
# the server, the ICD and the test crate, runs the tests. Optionally a
# 30-second smoke run of each fuzz target (WORMHOLE_FUZZ_SMOKE=1, needs
# nightly and cargo-fuzz; skipped otherwise: building the sanitizer-
# instrumented fuzzers from scratch takes longer than this script's budget).
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc pkg-config procps)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
    [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    export PATH="$HOME/.cargo/bin:$PATH"
fi

# The tests start the real server binary and load the real ICD, so both are
# built first (same profile as the tests).
cargo build -p wormhole-server -p wormhole-opencl-icd -p wormhole-isolation-tests
cargo test -p wormhole-isolation-tests -p wormhole-server

if [ "${WORMHOLE_FUZZ_SMOKE:-0}" = 1 ] && cargo +nightly --version >/dev/null 2>&1 \
    && cargo fuzz --version >/dev/null 2>&1; then
    for target in dispatch transport ring; do
        echo "== smoke fuzz: $target (30 s) =="
        ASAN_OPTIONS=detect_leaks=0 cargo +nightly fuzz run --fuzz-dir fuzz/wormhole "$target" -- \
            -max_total_time=30 -rss_limit_mb=4096 -detect_leaks=0
    done
else
    echo "smoke fuzz skipped (set WORMHOLE_FUZZ_SMOKE=1 with nightly and cargo-fuzz installed;" \
        "docs/wormhole-security.md has the 10-minute run)"
fi
