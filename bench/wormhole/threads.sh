#!/usr/bin/env bash
# OpenCL from several threads of one process (bench/wormhole/threads.c),
# natively and through Wormhole (one server for all runs, futex handoff,
# release build), and with an older client library beside it if OLD_ICD
# names one, all alternating within each round so that a noisy machine hits
# every setup alike. Workloads: threads each looping small launches with a
# clFinish every few (wall time), and one thread waiting on 0.3 ms or 20 ms
# kernels, or builds programs, while another makes short calls (their
# latency). Writes
# bench/out/threads.md: medians of the rounds, and the ratio to native.
#
#   bench/wormhole/threads.sh [ROUNDS]              (default 3)
#   OLD_ICD=/path/to/libwormhole_opencl.so bench/wormhole/threads.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}

. bench/wormhole/apps-common.sh
bench_setup
cc -O2 -Wall -o "$out/threads" bench/wormhole/threads.c -lOpenCL -lpthread

bin=${CARGO_TARGET_DIR:-$root/target}/release
dir=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
OCL_ICD_VENDORS=$POCL_ICD "$bin/wormhole-server" --socket "$dir/s.sock" > "$out/threads-server.log" 2>&1 &
server=$!
for _ in $(seq 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done

setups=(native wormhole)
[ -n "${OLD_ICD:-}" ] && setups+=(old)
workloads=(
  "loops 2 2000 1 1"
  "loops 2 2000 10 1000"
  "loops 1 4000 1 1"
  "loops 4 1000 10 1000"
  "loops 2 200 10 100000"
  "latency 0.3 100"
  "latency 20 100"
  "builds 300 50"
)
raw=$out/threads-raw.txt
: > "$raw"
one() {
  local setup=$1 w=$2 line
  local cmd=("$out/threads" $w)
  case $setup in
    native) line=$(OCL_ICD_VENDORS=$POCL_ICD timeout 600 "${cmd[@]}") ;;
    wormhole) line=$(timeout 600 "$bin/wormhole-run" --server "unix:$dir/s.sock" -- "${cmd[@]}") ;;
    old) line=$(timeout 600 "$bin/wormhole-run" --icd "$OLD_ICD" --server "unix:$dir/s.sock" -- "${cmd[@]}") ;;
  esac
  echo "$setup|$w|${line#RESULT }" >> "$raw"
}
n=${#setups[@]}
for ((r = 1; r <= rounds; r++)); do
  for w in "${workloads[@]}"; do
    order=("${setups[@]:r%n}" "${setups[@]:0:r%n}")
    for s in "${order[@]}"; do one "$s" "$w"; done
  done
  echo "round $r/$rounds done" >&2
done

python3 - "$raw" "${setups[@]}" > "$out/threads.md" <<'PY'
import json, statistics, sys
raw, setups = sys.argv[1], sys.argv[2:]
vals = {}
for line in open(raw):
    s, w, j = line.rstrip("\n").split("|", 2)
    vals.setdefault(w, {}).setdefault(s, []).append(json.loads(j))
print("| workload | " + " | ".join(setups) + " | " + " | ".join(f"{s} / native" for s in setups[1:]) + " |")
print("|---|" + "---:|" * (2 * len(setups) - 1))
for w, by in vals.items():
    key = "wall_s" if w.startswith("loops") else "mean_us"
    med = {s: statistics.median(r[key] for r in by[s]) for s in setups}
    unit = "s" if key == "wall_s" else "us"
    if key == "wall_s":
        cells = [f"{med[s]:.3f} s" for s in setups]
        ratios = [f"{med[s] / med['native']:.2f}x" for s in setups[1:]]
        extra = ""
    else:
        # A ratio to a native call of a few hundred ns says little: the
        # absolute times, and the longest call of all rounds, say it all.
        cells = [f"{med[s]:.1f} us" for s in setups]
        ratios = ["–" for s in setups[1:]]
        worst = {s: max(r["max_us"] for r in by[s]) for s in setups}
        extra = " (longest call: " + ", ".join(f"{s} {worst[s]:,.0f} us" for s in setups) + ")"
    print(f"| `{w}`{extra} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
print()
print(f"Medians of {len(next(iter(vals.values()))['native'])} rounds, setups rotating within each round. "
      "`loops T LAUNCHES EVERY ITERS`: wall time; `latency KERNEL_MS CALLS`: mean time of the "
      "short calls one thread makes while another waits on kernels; `builds FUNCS CALLS`: the "
      "same while another builds programs of FUNCS functions.")
PY
cat "$out/threads.md"
