#!/usr/bin/env bash
# The test command (README, CI): installs what the tests need, runs the
# workspace's unit and integration tests, then each part's own suite
# (scripts/test-*.sh), which install their own extra dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --workspace --all-targets
cargo test --workspace
status=0
for t in scripts/test-*.sh; do
  [ -e "$t" ] || continue
  echo "== $t =="
  if ! bash "$t"; then
    echo "FAILED: $t"
    status=1
  fi
done
exit $status
