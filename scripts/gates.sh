#!/usr/bin/env bash
# Gates that keep the tree as it is (run by scripts/test.sh, so by CI):
# formatting, clippy's warnings, and fuzz targets that still build. Runs all
# three and fails if any failed, saying which.
set -uo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
echo "== gates: cargo fmt --check, clippy -D warnings, fuzz targets build =="
status=0
if ! cargo fmt --all --check; then
  echo "FAILED: formatting (run: cargo fmt --all)"
  status=1
fi
if ! cargo clippy -q --workspace --all-targets -- -D warnings; then
  echo "FAILED: clippy warnings"
  status=1
fi
if ! ./scripts/fuzz-build.sh; then
  echo "FAILED: a fuzz target does not build"
  status=1
fi
exit $status
