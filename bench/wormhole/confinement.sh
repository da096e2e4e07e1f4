#!/usr/bin/env bash
# What tenant confinement costs, and that load and faults still hold with it
# (issue 34). Two release servers side by side, one confined (the default)
# and one with --no-confine, alternated within each round so the machine's
# noise falls on both:
#   - per call: whbench nullcall (clGetEventInfo on a completed event, median
#     ns), readback (a launch and a blocking 4-byte read, median ns) and
#     callheavy (20,000 launches, clFinish every 100: wall seconds);
#   - a tenant's start: `clinfo -l` through each server (ms, median);
# then on the confined server alone:
#   - CLIENTS (64) clients at once, each CALLS (10,000) readback rounds with
#     their results checked: failures, and the listener's memory and the
#     tenants left afterwards;
#   - KILLS (50) clients SIGKILLed mid-call while one survivor runs a long
#     readback loop: the survivor's exit status, tenants and cgroups left.
# Prints a table; bench/out/confinement.md keeps it. Bounded: every client
# runs under `timeout`, every wait has a limit.
#   ROUNDS=5 CLIENTS=64 CALLS=10000 KILLS=50 bench/wormhole/confinement.sh
# (CLIENTS=0 KILLS=0: the per-call comparison alone.)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/bench/out
mkdir -p "$out"
rounds=${ROUNDS:-5}
clients=${CLIENTS:-64}
calls=${CALLS:-10000}
kills=${KILLS:-50}

pkgs=(pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc procps)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null 2>&1 || export PATH="$HOME/.cargo/bin:$PATH"
echo "== building (release)"
cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run
bin=${CARGO_TARGET_DIR:-$root/target}/release
cc -O2 -Wall -o "$out/whbench" bench/wormhole/whbench.c -lOpenCL

work=$(mktemp -d /tmp/wh-confine-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME ARGS...: a server on $work/NAME.sock; its pid in $spid.
start() {
  local name=$1; shift
  "$bin/wormhole-server" --quiet --socket "$work/$name.sock" "$@" 2>"$work/$name.log" &
  spid=$!
  pids+=("$spid")
  for _ in $(seq 200); do [ -S "$work/$name.sock" ] && return 0; sleep 0.05; done
  echo "server $name did not start: $(cat "$work/$name.log")" >&2; exit 1
}
start confined; confined_pid=$spid
start open --no-confine; open_pid=$spid
grep -h "tenant confinement" "$work/confined.log" | sed 's/^.*tenant confinement: /confinement: /' || true

via() { local name=$1; shift; timeout 300 "$bin/wormhole-run" --server "unix:$work/$name.sock" -- "$@"; }
# field JSON KEY: a number after "KEY": in whbench's RESULT line.
field() { sed -n "s/.*\"$2\":{[^}]*\"median_ns\":\([0-9.]*\).*/\1/p;s/.*\"$2\":\([0-9.]*\).*/\1/p" <<<"$1" | head -n1; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit} print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

declare -A samples
measure() {
  local name=$1 r
  r=$(via "$name" "$out/whbench" nullcall 100000 | grep RESULT)
  samples[$name.event_info]+="$(field "$r" event_info) "
  r=$(via "$name" "$out/whbench" readback 2000 | grep RESULT)
  samples[$name.readback]+="$(field "$r" round) "
  r=$(via "$name" "$out/whbench" callheavy 20000 100 | grep RESULT)
  samples[$name.callheavy]+="$(field "$r" wall_s) "
  local t0 t1
  t0=$(date +%s%N); via "$name" clinfo -l >/dev/null; t1=$(date +%s%N)
  samples[$name.start]+="$(( (t1 - t0) / 1000000 )) "
}
echo "== $rounds rounds, alternated ($(nproc) CPUs, $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1))"
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then measure confined; measure open; else measure open; measure confined; fi
  echo "   round $r done"
done

table=$out/confinement.md
{
  echo "Confinement, $(date -u +%Y-%m-%d' '%H:%M' UTC'), $(nproc) CPUs, $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1), commit $(git rev-parse --short HEAD)"
  echo
  echo "| measure (median of $rounds) | confined | --no-confine | ratio of medians | median of the rounds' ratios (quartiles) |"
  echo "| --- | ---: | ---: | ---: | ---: |"
  for m in event_info:"null call (ns)" readback:"launch + 4-byte read (ns)" callheavy:"call-heavy wall (s)" start:"clinfo -l, tenant start (ms)"; do
    key=${m%%:*}; label=${m#*:}
    c=$(tr ' ' '\n' <<<"${samples[confined.$key]}" | grep . | median)
    o=$(tr ' ' '\n' <<<"${samples[open.$key]}" | grep . | median)
    # Each round measured both back to back: its ratio sees the same
    # moment's noise, so their spread says how far the medians can be read.
    paired=$(paste -d' ' <(tr ' ' '\n' <<<"${samples[confined.$key]}" | grep .) \
                         <(tr ' ' '\n' <<<"${samples[open.$key]}" | grep .) |
      awk '$2 > 0 {print $1 / $2}' | sort -g |
      awk '{v[NR]=$1} END {if (NR==0) {print "nan"; exit}
           lo=v[int((NR+3)/4)]; hi=v[int((3*NR+3)/4)];
           md=(NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2);
           printf "%.3f (%.3f-%.3f)", md, lo, hi}')
    echo "| $label | $c | $o | $(awk -v c="$c" -v o="$o" 'BEGIN {printf "%.3f", c / o}') | $paired |"
  done
} | tee "$table"

rss() { ps -o rss= -p "$1" | tr -d ' '; }
tenants() { pgrep -P "$confined_pid" | wc -l; }
cgroups() { find /sys/fs/cgroup -maxdepth 8 -type d -name "tenant-$confined_pid-*" 2>/dev/null | wc -l; }
settle() { for _ in $(seq 300); do [ "$(tenants)" = 0 ] && return 0; sleep 0.1; done; }

if [ "$clients" = 0 ] && [ "$kills" = 0 ]; then echo "== $table"; exit 0; fi
echo "== $clients clients x $calls calls, at once, on the confined server"
settle
base=$(rss "$confined_pid")
t0=$(date +%s)
loadpids=()
for i in $(seq "$clients"); do
  via confined "$out/whbench" readback "$calls" >"$work/load.$i" 2>&1 &
  loadpids+=($!)
done
failed=0
for p in "${loadpids[@]}"; do wait "$p" || failed=$((failed + 1)); done
t1=$(date +%s)
settle
after=$(rss "$confined_pid")
echo "| $clients clients x $calls calls | $failed failed | $((t1 - t0)) s | listener RSS $base -> $after KiB | tenants left $(tenants) | cgroups left $(cgroups) |" | tee -a "$table"

echo "== $kills clients killed mid-call beside a survivor"
timeout 600 "$bin/wormhole-run" --server "unix:$work/confined.sock" -- "$out/whbench" readback 400000 >"$work/survivor" 2>&1 &
survivor=$!
killed=0
# (bash's own "Killed" notices for the victims go to /dev/null.)
for i in $(seq "$kills"); do
  via confined "$out/whbench" readback 100000000 >/dev/null 2>&1 &
  victim=$!
  # Past its tenant's start and its kernel's build: mid-call.
  sleep "0.$((RANDOM % 5 + 4))"
  kill -9 "$victim" 2>/dev/null && killed=$((killed + 1))
  # Its wormhole-run's child (whbench) too: SIGKILL does not propagate.
  pkill -9 -f "whbench readback 100000000" 2>/dev/null || true
  wait "$victim" 2>/dev/null || true
done 2>/dev/null
if wait "$survivor"; then s_ok=ok; else s_ok="FAILED ($(tail -n2 "$work/survivor"))"; fi
settle
echo "| $killed kills mid-call | survivor $s_ok | tenants left $(tenants) | cgroups left $(cgroups) |" | tee -a "$table"
echo "== $table"
