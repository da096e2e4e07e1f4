#!/usr/bin/env bash
# Old build vs new build of giant-sim, side by side in one run, on the same machine:
# end-to-end rows per CPU-second of the measuring thread (gzip + parse + simulate) on the
# real excerpt, and on the full-scale synthetic cell; plus a check that both builds give
# byte-identical outputs. Results go to bench/out/giant/compare-*.txt (ignored).
#   OLD_REV=b0ba0da bench/giant/compare.sh      # build OLD_REV into bench/out/giant/old-target
#     (b0ba0da: main's simulator plus `synth-bench --out`, which the identity check uses;
#      an older build runs without it and the check is skipped)
#   OLD_BIN=/path/to/giant-sim bench/giant/compare.sh
#   REPS=9 HOURS=24 ...                          # repetitions (excerpt), hours (synthetic)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bench/out/giant
mkdir -p "$out"
reps=${REPS:-9}
hours=${HOURS:-24}
trace=${TRACE:-../shared/data/google-clusterdata-2011-2}
cargo build --release -p giant-sim
new=$out/giant-sim-new
cp target/release/giant-sim "$new"
if [ -z "${OLD_BIN:-}" ]; then
    rev=${OLD_REV:-b0ba0da}
    src=$out/old-src
    rm -rf "$src" && mkdir -p "$src"
    git archive "$rev" | tar -x -C "$src"
    # Reuse this checkout's compiled dependencies: only the giant crates rebuild.
    mkdir -p "$out/old-target"
    [ -d "$out/old-target/release" ] || cp -r target/release "$out/old-target/release"
    (cd "$src" && CARGO_TARGET_DIR="$PWD/../old-target" cargo build --release -p giant-sim)
    OLD_BIN=$out/old-target/release/giant-sim
fi
log=$out/compare-$(date -u +%Y%m%dT%H%M%SZ).txt
{
    date -u
    echo "nproc: $(nproc)"
    lscpu | grep 'Model name' || true
    echo "load: $(cat /proc/loadavg)"
    echo "old: $OLD_BIN   new: $new (HEAD $(git rev-parse --short HEAD))"
} | tee "$log"

rate() { sed -n 's/.*: \([0-9.]*\) M rows per CPU-second.*/\1/p; s/.*= \([0-9.]*\) M rows per CPU-second.*/\1/p'; }
stats() { sort -n | awk '{a[NR]=$1} END {printf "best %.2f median %.2f (n=%d)", a[NR], a[int((NR+1)/2)], NR}'; }

if [ -d "$trace" ]; then
    ev=("$trace"/task_events-*.csv.gz)
    us=("$trace"/task_usage-*.csv.gz)
    for mode in "" "--filter-jobs"; do
        : >"$out/old.r"; : >"$out/new.r"
        for _ in $(seq "$reps"); do
            "$OLD_BIN" stream --events "${ev[@]}" --usage "${us[@]}" --policy fine $mode | rate >>"$out/old.r"
            "$new" stream --events "${ev[@]}" --usage "${us[@]}" --policy fine $mode | rate >>"$out/new.r"
        done
        o=$(stats <"$out/old.r"); n=$(stats <"$out/new.r")
        echo "excerpt stream ${mode:-(every field parsed)}: old $o | new $n M rows/CPU-s" | tee -a "$log"
    done
fi

syn=(synth-bench --trace-machines 12500 --hours "$hours" --machines 12500 --job-sample 1 --policy budget-best-fit)
same=--out
"$OLD_BIN" synth-bench --help | grep -q -- --out || same=
rm -rf "$out/synth-old" "$out/synth-new"
for which in old new; do
    bin=$OLD_BIN; [ "$which" = new ] && bin=$new
    "$bin" "${syn[@]}" ${same:+--out "$out/synth-$which"} | tail -1 | sed "s/^/$which: /" | tee -a "$log"
done
if [ -z "$same" ]; then
    echo "full-scale ${hours} h: old build has no --out; identity not checked" | tee -a "$log"
elif cmp -s "$out/synth-old/synth.json" "$out/synth-new/synth.json"; then
    echo "full-scale ${hours} h: summaries and intervals byte-identical" | tee -a "$log"
elif python3 - "$out/synth-old/synth.json" "$out/synth-new/synth.json" <<'PY'
# Fields added since the old build (the input report, the verdict) are not compared.
import json, sys
old, new = (json.load(open(f)) for f in sys.argv[1:3])
sys.exit(0 if len(old) == len(new) and all(
    all(n.get(k) == v for k, v in o.items()) for o, n in zip(old, new)) else 1)
PY
then
    echo "full-scale ${hours} h: every field the old build writes identical (new fields not compared)" | tee -a "$log"
else
    echo "full-scale ${hours} h: OUTPUTS DIFFER" | tee -a "$log"
fi
echo "load: $(cat /proc/loadavg)" | tee -a "$log"
