#!/usr/bin/env bash
# An older Wormhole build against this one, side by side in one run: for each
# handoff mode, the raw ping-pong, the ring alone (`ShmChannel` ping-pong), the
# null call (`whbench nullcall`, clGetEventInfo on a completed event) natively
# and through each build's own server and client, and the in-process
# marshalling cost. Old and new alternate within every round, so the
# machine's noise falls on both alike; read the ratios within a round.
#   OLD_REV=e1c2ab3 bench/wormhole/compare.sh     # build OLD_REV (default e1c2ab3)
#   OLD_DIR=/path/to/old/target/release bench/wormhole/compare.sh
#   ROUNDS=7 MODES="spin futex" RT=1 bench/wormhole/compare.sh   (spin and/or futex)
# RT=1 runs every measured process (both builds, raw primitives included)
# under SCHED_FIFO (chrt -f 10): on a machine shared with other work, a
# spinning pair is otherwise preempted and the spin figures measure the
# neighbours. Each run is a few tens of milliseconds, well inside the
# kernel's real-time throttling. Output: bench/out/compare.txt (ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/bench/out
mkdir -p "$out"
rounds=${ROUNDS:-5}
modes=${MODES:-spin futex}
for m in $modes; do
  # Each mode needs a raw primitive of its own to compare with.
  case $m in spin|futex) ;; *) echo "MODES: spin and/or futex (got $m)" >&2; exit 2 ;; esac
done
rt=()
[ "${RT:-0}" = 1 ] && rt=(chrt -f 10)

command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
echo "== building this tree (release)"
cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run -p wormhole-bench
new=${CARGO_TARGET_DIR:-$root/target}/release
cc -O2 -Wall -o "$out/whbench" bench/wormhole/whbench.c -lOpenCL
if [ -z "${OLD_DIR:-}" ]; then
  rev=${OLD_REV:-e1c2ab3}
  src=$out/old-src
  echo "== building $rev into $out/old-target"
  rm -rf "$src" && mkdir -p "$src"
  git archive "$rev" | tar -x -C "$src"
  (cd "$src" && CARGO_TARGET_DIR="$out/old-target" cargo build --release -q \
    -p wormhole-server -p wormhole-opencl-icd -p wormhole-run -p wormhole-bench)
  OLD_DIR=$out/old-target/release
fi
old=$OLD_DIR
export OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd

med() { grep -o '"median_ns":[0-9.]*' | head -n1 | cut -d: -f2; }
event() { grep -o '"event_info":{[^}]*}' | grep -o '"median_ns":[0-9.]*' | cut -d: -f2; }
marshal() { grep -o '"marshal_ns":[0-9.]*' | cut -d: -f2 | cut -c1-6; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

servers=()
cleanup() { for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)"
  echo "# old: $old; new: $new; RT=${RT:-0}; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for mode in $modes; do
    "${rt[@]}" "$old/wormhole-server" --socket "$out/cmp-old.sock" --handoff "$mode" -q & servers+=($!)
    "${rt[@]}" "$new/wormhole-server" --socket "$out/cmp-new.sock" --handoff "$mode" -q & servers+=($!)
    sleep 0.5
    echo
    echo "## handoff $mode (medians in ns; ratios to the raw $mode ping-pong of the same round)"
    echo "| round | raw | ring old | ring new | native call | call old | call new | call old/raw | call new/raw | marshal old | marshal new |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for r in $(seq "$rounds"); do
      raw=$("${rt[@]}" "$new/wh-bench" pingpong --prim "$mode" | med)
      ro=$("${rt[@]}" "$old/wh-bench" pingpong --prim "chan-$mode" | med)
      rn=$("${rt[@]}" "$new/wh-bench" pingpong --prim "chan-$mode" | med)
      na=$("${rt[@]}" "$out/whbench" nullcall 20000 | event)
      co=$(WORMHOLE_SERVER="unix:$out/cmp-old.sock" "${rt[@]}" "$old/wormhole-run" -- "$out/whbench" nullcall 20000 | event)
      cn=$(WORMHOLE_SERVER="unix:$out/cmp-new.sock" "${rt[@]}" "$new/wormhole-run" -- "$out/whbench" nullcall 20000 | event)
      mo=$("$old/wh-bench" marshal --batches 100 | marshal)
      mn=$("$new/wh-bench" marshal --batches 100 | marshal)
      echo "| $r | $raw | $ro | $rn | $na | $co | $cn | $(ratio "$co" "$raw") | $(ratio "$cn" "$raw") | $mo | $mn |"
    done
    cleanup
    servers=()
  done
  echo
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out/compare.txt"
