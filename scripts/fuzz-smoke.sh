#!/usr/bin/env bash
# A short instrumented run of every fuzz target of every fuzz crate under
# fuzz/ (SECONDS_EACH, default 10), with cargo-fuzz on the nightly toolchain:
# the targets' own assertions, and AddressSanitizer, on a few thousand
# inputs each. Skipped, saying so, where nightly or cargo-fuzz is missing
# (CI machines have neither: there scripts/fuzz-build.sh checks that the
# targets build). The long runs are in docs/wormhole-security.md.
set -euo pipefail
cd "$(dirname "$0")/.."
each=${SECONDS_EACH:-10}
if ! cargo +nightly --version >/dev/null 2>&1 || ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz smoke skipped: needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz)"
  exit 0
fi
status=0
for manifest in fuzz/*/Cargo.toml; do
  dir=$(dirname "$manifest")
  for target in $(sed -n '/^\[\[bin\]\]/,/^name/ s/^name *= *"\(.*\)"/\1/p' "$manifest"); do
    echo "== $dir $target ($each s)"
    if ! ASAN_OPTIONS=detect_leaks=0 cargo +nightly fuzz run --fuzz-dir "$dir" "$target" -- \
        -max_total_time="$each" -rss_limit_mb=4096 -detect_leaks=0 >"/tmp/fuzz-smoke-$target.log" 2>&1; then
      echo "FAILED: $dir $target (log: /tmp/fuzz-smoke-$target.log)"
      tail -n 20 "/tmp/fuzz-smoke-$target.log"
      status=1
    else
      grep -E "^Done [0-9]+ runs" "/tmp/fuzz-smoke-$target.log" | tail -n1
    fi
  done
done
exit $status
