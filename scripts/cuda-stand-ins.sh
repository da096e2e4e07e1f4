#!/usr/bin/env bash
# Writes the CUDA stand-in packages' manifests
# (crates/wormhole/cuda-stand-ins/<package>/Cargo.toml) from the table in
# crates/wormhole/cuda-stand-ins/src/lib.rs. Run it after changing the
# table; `cargo test -p wormhole-cuda-stand-ins` fails while they differ.
# With --packages or --files, prints instead the stand-ins' package names
# or the files cargo builds for them (one a line), for scripts that build
# or bundle them all.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --packages)
    for manifest in crates/wormhole/cuda-stand-ins/wormhole-*/Cargo.toml; do
      basename "$(dirname "$manifest")"
    done
    exit 0 ;;
  --files)
    for manifest in crates/wormhole/cuda-stand-ins/wormhole-*/Cargo.toml; do
      awk -F'"' '/^\[lib\]/ { lib = 1 } lib && /^name = / { print "lib" $2 ".so"; exit }' "$manifest"
    done
    exit 0 ;;
esac
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
WORMHOLE_WRITE_STAND_INS=1 cargo test -q -p wormhole-cuda-stand-ins --lib manifests_follow_the_table
