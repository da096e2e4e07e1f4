#!/usr/bin/env bash
# Builds every fuzz target of every fuzz crate under fuzz/ with the stable
# toolchain (libFuzzer links without sanitizer instrumentation), so that a
# target that no longer compiles fails the tests (test.sh), not a later
# fuzzing session. The crates share one target directory for their common
# dependencies. Instrumented runs: scripts/fuzz-smoke.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}/fuzz-build
status=0
for manifest in fuzz/*/Cargo.toml; do
  targets=$(sed -n '/^\[\[bin\]\]/,/^name/ s/^name *= *"\(.*\)"/\1/p' "$manifest" | tr '\n' ' ')
  echo "== $(dirname "$manifest"): $targets"
  if ! cargo build -q --manifest-path "$manifest" --bins; then
    echo "FAILED: a fuzz target in $(dirname "$manifest") does not build"
    status=1
  fi
done
exit $status
