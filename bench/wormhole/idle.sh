#!/usr/bin/env bash
# Idle cost of a Wormhole server: CPU time (user + system, all threads, from
# /proc/PID/stat) of the main server process and of one connected but idle
# tenant over a window (default 60 s), and of the idle client for
# comparison. Prints a markdown table row; `--record` appends it, with the
# date and machine, to docs/benchmarks-wormhole-idle.md.
#
#   bench/wormhole/idle.sh [SECONDS] [--record]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECS=${1:-60}
RECORD=${2:-}
cargo build -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-isolation-tests
T=target/debug
DIR=$(mktemp -d /tmp/wh-idle-XXXXXX)
SERVER_PID=
PROBE_PID=
cleanup() {
    for p in $PROBE_PID $SERVER_PID; do
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    # The tenant is the server's child; it exits when its client goes.
    sleep 0.2
    rm -rf "$DIR"
}
trap cleanup EXIT
mkdir -p "$DIR/icd"
echo "$PWD/$T/libwormhole_opencl.so" > "$DIR/icd/wormhole.icd"
"$T/wormhole-server" --socket "$DIR/s.sock" 2>"$DIR/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
OCL_ICD_VENDORS="$DIR/icd" WORMHOLE_SERVER="$DIR/s.sock" \
    "$T/wormhole-probe" idle $((SECS + 30)) > "$DIR/probe.out" &
PROBE_PID=$!
for _ in $(seq 200); do grep -q ready "$DIR/probe.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$DIR/probe.out" || { echo "probe did not connect" >&2; cat "$DIR/probe.out" >&2; exit 1; }
TENANT_PID=$(pgrep -P "$SERVER_PID" | head -1)
[ -n "$TENANT_PID" ] || { echo "no tenant process" >&2; exit 1; }
sleep 1  # start-up settles
HZ=$(getconf CLK_TCK)
cpu() { local s; s=$(sed 's/.*) //' "/proc/$1/stat"); echo "$s" | awk '{ print $12 + $13 }'; }
S0=$(cpu "$SERVER_PID"); T0=$(cpu "$TENANT_PID"); P0=$(cpu "$PROBE_PID")
sleep "$SECS"
S1=$(cpu "$SERVER_PID"); T1=$(cpu "$TENANT_PID"); P1=$(cpu "$PROBE_PID")
ms() { echo $(( ($2 - $1) * 1000 / HZ )); }
SMS=$(ms "$S0" "$S1"); TMS=$(ms "$T0" "$T1"); PMS=$(ms "$P0" "$P1")
THREADS=$(ls "/proc/$TENANT_PID/task" | wc -l)
ROW="| $(date -u +%F) | ${SECS} s | ${SMS} ms | ${TMS} ms (${THREADS} threads) | ${PMS} ms |"
echo "| date | window | server CPU | idle tenant CPU | idle client CPU |"
echo "|---|---|---|---|---|"
echo "$ROW"
if [ "$RECORD" = "--record" ]; then
    {
        echo
        echo "Run $(date -u '+%F %T UTC') on $(nproc) cores, $(lscpu | grep 'Model name' | sed 's/Model name: *//'):"
        echo "\`bench/wormhole/idle.sh $SECS --record\` (CPU = utime + stime from /proc/PID/stat, ${HZ} Hz ticks)"
        echo
        echo "| date | window | server CPU | idle tenant CPU | idle client CPU |"
        echo "|---|---|---|---|---|"
        echo "$ROW"
    } >> docs/benchmarks-wormhole-idle.md
fi
