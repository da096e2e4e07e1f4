#!/usr/bin/env bash
# Isolation and robustness tests of the Wormhole core (see
# docs/wormhole-security.md): bad input from one tenant while another is
# served, kill -9 of a client mid-call, a blocked client whose tenant dies,
# idle CPU, no server / bad greeting. Installs what it needs (Debian), builds
# the server, the ICD and the test crate, runs the tests. Optionally a short
# smoke run of every fuzz target (WORMHOLE_FUZZ_SMOKE=1, scripts/fuzz-smoke.sh:
# needs nightly and cargo-fuzz; skipped otherwise, since building the
# sanitizer-instrumented fuzzers from scratch takes longer than this script's
# budget; scripts/fuzz-build.sh, which test.sh runs, checks they build).
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

if [ "${WORMHOLE_FUZZ_SMOKE:-0}" = 1 ]; then
    ./scripts/fuzz-smoke.sh
else
    echo "smoke fuzz skipped (WORMHOLE_FUZZ_SMOKE=1 runs scripts/fuzz-smoke.sh: every target a few" \
        "seconds, with nightly and cargo-fuzz; docs/wormhole-security.md has the 10-minute runs)"
fi
