#!/usr/bin/env bash
# Tests of the giant part (GiantVM rebalancer, trace parser, simulator).
# Idempotent: installs what it needs, then runs cargo test. Exits non-zero on failure.
# Tests that read the real trace excerpt (../shared/data/google-clusterdata-2011-2)
# print "SKIP: ..." and pass when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
    if ! apt-get install -y "${need_apt[@]}"; then
        apt-get update && apt-get install -y "${need_apt[@]}"
    fi
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install the Rust toolchain" >&2; exit 1; }

if [ -d ../shared/data/google-clusterdata-2011-2 ]; then
    echo "real trace excerpt: ../shared/data/google-clusterdata-2011-2"
else
    echo "real trace excerpt absent: tests that need it will print SKIP"
fi

# -j2: the CI machine has 2 cores shared with other builds.
cargo test -j 2 -p giant-trace -p giant-sim -p giant-rebalance "$@"
