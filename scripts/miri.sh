#!/usr/bin/env bash
# The shared-memory ring's in-process tests under Miri (undefined behaviour,
# data races between the producer and consumer threads, out-of-bounds
# reads of the shared region). Tests Miri cannot run in reasonable time, or
# at all (sched_getcpu), are marked `cfg_attr(miri, ignore)` with the
# reason. Needs the nightly toolchain with the miri component; skipped,
# saying so, without it (CI machines have no route to the toolchain
# servers).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  echo "miri skipped: needs rustup component add --toolchain nightly miri rust-src"
  exit 0
fi
MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}" cargo +nightly miri test -p wormhole-transport --lib ring::
