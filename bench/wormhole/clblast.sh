#!/usr/bin/env bash
# A real third-party OpenCL workload, unmodified: CLBlast's own correctness
# tests (Debian's clblast-tests), natively and through Wormhole (a private
# server per run, release build), alternating in each round so that a noisy
# machine hits both alike. Writes bench/out/clblast.md: wall seconds per
# routine (median of the rounds), the ratio to native, and the round trips
# the client counted (WORMHOLE_LOG).
#
#   bench/wormhole/clblast.sh [ROUNDS] [ROUTINE...]     (default 3; xaxpy xgemv xcol2im)
#
# ALT_RUN=/path/to/wormhole-run ALT_NAME=label adds a third setup, e.g. an
# older build, measured in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
shift || true
routines=("$@")
[ ${#routines[@]} -gt 0 ] || routines=(xaxpy xgemv xcol2im)

. bench/wormhole/apps-common.sh
bench_setup clblast-tests bc python3

setups=(native wormhole)
[ -n "${ALT_RUN:-}" ] && setups+=("${ALT_NAME:-alt}")
raw=$out/clblast-raw.txt
: > "$raw"
# One timed run; fails the benchmark if the tests themselves fail.
one() {
  local setup=$1 bin=/usr/bin/clblast_test_$2 t0 t1 rc=0
  t0=$(date +%s.%N)
  case $setup in
    native) OCL_ICD_VENDORS=$POCL_ICD timeout 1800 "$bin" -q > "$out/clblast.log" 2>&1 || rc=$? ;;
    # WORMHOLE_LOG makes the client say at exit how many calls were round trips.
    wormhole) WORMHOLE_LOG=1 timeout 1800 "$run" --start-server -- "$bin" -q > "$out/clblast.log" 2>&1 || rc=$? ;;
    *) WORMHOLE_LOG=1 timeout 1800 "$ALT_RUN" --start-server -- "$bin" -q > "$out/clblast.log" 2>&1 || rc=$? ;;
  esac
  t1=$(date +%s.%N)
  if [ $rc -ne 0 ] || sed 's/\x1b\[[0-9;]*m//g' "$out/clblast.log" | grep -aqE "[1-9][0-9]* test\(s\) failed"; then
    echo "$setup $2: exit $rc or failed tests; see $out/clblast.log" >&2
    exit 1
  fi
  trips=$(grep -aoE "[0-9]+ of them round trips" "$out/clblast.log" | awk '{print $1}' | tail -n 1 || true)
  echo "$2 $setup $(echo "$t1 - $t0" | bc) ${trips:--}" >> "$raw"
}
for ((r = 1; r <= rounds; r++)); do
  for rt in "${routines[@]}"; do
    # Alternate which setup goes first.
    if ((r % 2)); then order=("${setups[@]}"); else order=(); for ((i = ${#setups[@]} - 1; i >= 0; i--)); do order+=("${setups[$i]}"); done; fi
    for s in "${order[@]}"; do one "$s" "$rt"; done
    echo "round $r/$rounds $rt done" >&2
  done
done

python3 - "$raw" "${setups[@]}" > "$out/clblast.md" <<'EOF'
import statistics, sys
raw, setups = sys.argv[1], sys.argv[2:]
t, trips = {}, {}
for line in open(raw):
    rt, s, v, *n = line.split()
    t.setdefault(rt, {}).setdefault(s, []).append(float(v))
    if n and n[0] != "-":
        trips.setdefault(rt, {})[s] = int(n[0])
head = "| routine | " + " | ".join(f"{s} s" for s in setups) + " | " + " | ".join(f"{s} / native" for s in setups[1:]) + " |"
print(head)
print("|" + "---|" * (1 + 2 * len(setups) - 1))
for rt, by in t.items():
    med = {s: statistics.median(by[s]) for s in setups}
    cells = [f"{med[s]:.2f}" for s in setups] + [f"{med[s] / med['native']:.2f}x" for s in setups[1:]]
    print(f"| {rt} | " + " | ".join(cells) + " |")
print()
print(f"Median of {len(next(iter(t.values()))['native'])} rounds, setups alternating within each round.")
if trips:
    print()
    print("Round trips to the server in the last round (builds that count them, WORMHOLE_LOG):")
    for rt, by in trips.items():
        print(f"- {rt}: " + ", ".join(f"{s} {n:,}" for s, n in by.items()))
EOF
cat "$out/clblast.md"
