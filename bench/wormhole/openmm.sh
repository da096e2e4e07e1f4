#!/usr/bin/env bash
# A real scientific application, unmodified: OpenMM's molecular dynamics on
# its OpenCL platform (Debian's python3-simtk), natively and through Wormhole
# with the futex and same-core handoffs (a private server per run, release
# build), alternating in each round so that a noisy machine hits all alike.
# Each run is tests/apps/openmm_md.py: the steps are timed inside the
# program (context creation and kernel builds are not), and every run must
# end in the same state. Writes bench/out/openmm.md: steps per second
# (median of the rounds), the ratio to native, and the round trips the
# client counted (WORMHOLE_LOG).
#
#   bench/wormhole/openmm.sh [ROUNDS] [STEPS]     (default 3 rounds of 200 steps)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
steps=${2:-200}

. bench/wormhole/apps-common.sh
bench_setup python3-simtk libopenmm-plugins

setups=(native futex same-core)
raw=$out/openmm-raw.txt
: > "$raw"
one() {
  local setup=$1 rc=0 log=$out/openmm.log
  local md=(/usr/bin/python3 tests/apps/openmm_md.py "$steps")
  case $setup in
    native) OCL_ICD_VENDORS=$POCL_ICD timeout 1800 "${md[@]}" > "$log" 2>&1 || rc=$? ;;
    futex) WORMHOLE_LOG=1 OCL_ICD_VENDORS=$POCL_ICD timeout 1800 "$run" --start-server -- "${md[@]}" > "$log" 2>&1 || rc=$? ;;
    same-core) WORMHOLE_LOG=1 OCL_ICD_VENDORS=$POCL_ICD timeout 1800 "$run" --start-server \
      --server-arg=--handoff --server-arg=same-core -- "${md[@]}" > "$log" 2>&1 || rc=$? ;;
  esac
  local secs state trips
  secs=$(sed -n 's/^stepping took \([0-9.]*\) s.*/\1/p' "$log")
  state=$(sed -n 's/.*state md5 //p' "$log")
  trips=$(grep -aoE "[0-9]+ of them round trips" "$log" | awk '{print $1}' | tail -n 1 || true)
  if [ $rc -ne 0 ] || [ -z "$secs" ] || [ -z "$state" ]; then
    echo "$setup: exit $rc, no timing or state; see $log" >&2
    exit 1
  fi
  echo "$setup $secs $state ${trips:--}" >> "$raw"
}
for ((r = 1; r <= rounds; r++)); do
  # Rotate which setup goes first.
  order=("${setups[@]:r%3}" "${setups[@]:0:r%3}")
  for s in "${order[@]}"; do one "$s"; done
  echo "round $r/$rounds done" >&2
done

python3 - "$raw" "$steps" "${setups[@]}" > "$out/openmm.md" <<'PY'
import statistics, sys
raw, steps, setups = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
t, states, trips = {}, set(), {}
for line in open(raw):
    s, secs, state, n = line.split()
    t.setdefault(s, []).append(float(secs))
    states.add(state)
    if n != "-":
        trips[s] = int(n)
med = {s: statistics.median(v) for s, v in t.items()}
print("| setup | steps/s | time / native | round trips in the whole run |")
print("|---|---:|---:|---:|")
for s in setups:
    rt = f"{trips[s]:,}" if s in trips else "–"
    print(f"| {s} | {steps / med[s]:.2f} | {med[s] / med['native']:.3f}x | {rt} |")
print()
print(f"{steps} steps per run, median of {len(t['native'])} rounds, setups rotating within each round; "
      f"round trips from the last round, setup included. "
      f"Final states: {'all identical' if len(states) == 1 else 'DIFFERENT: ' + ', '.join(sorted(states))}.")
PY
cat "$out/openmm.md"
