#!/usr/bin/env bash
# vnet benchmark: one TCP stream, four TCP streams (iperf3) and ping round trips between two
# network namespaces joined by a veth underlay, for
#   veth   - the plain underlay (no overlay)
#   kvxlan - Linux kernel VXLAN
#   vnet   - vnetd (this project), VXLAN-compatible, every frame in user space (--offload off)
#   vnetrt - the same with the data-plane worker under SCHED_FIFO (--rt-priority 10)
#   vnetspin - the same with a 200 us busy-poll window (--spin-us 200)
#   vnetbpf - vnetd with its kernel fast path (--offload on, the default where the kernel
#            allows): tc eBPF programs forward established flows with copies of its decisions
#   vnetold - a baseline vnetd build given as VNETD_OLD=/path/to/vnetd (before/after in one run)
#   n2n    - n2n edge (user-level L2 overlay from Debian, via a supernode)
#   tinc   - tincd in switch mode (user-level L2 overlay from Debian)
# all in one run, alternating rounds so that background load hits every setup alike.
# Writes bench/out/vnet/{results.json,results.md,chart.png}.
#
# Usage: bench/vnet/run.sh [SECONDS_PER_IPERF_RUN] [ROUNDS]     (root required)
#   SETUPS="kvxlan vnet ..." picks setups (default: all; vnetold only with VNETD_OLD).
#   GUEST_HALT_POLL=NS: in a KVM guest with the haltpoll cpuidle driver, let an idle vCPU poll
#   up to NS ns before it halts during the run (Linux's default is 200000; some VMs set 0); the
#   old value is put back at exit and machine.txt records the one used.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SECS=${1:-8}
ROUNDS=${2:-2}
OUT=$ROOT/bench/out/vnet
mkdir -p "$OUT"
TMP=$(mktemp -d /tmp/vnetbench.XXXXXX)
TAG=vb$$
A=${TAG}a
B=${TAG}b

pkgs=()
command -v iperf3 >/dev/null || pkgs+=(iperf3)
command -v edge >/dev/null || pkgs+=(n2n)
command -v tincd >/dev/null || pkgs+=(tinc)
command -v ping >/dev/null || pkgs+=(iputils-ping)
command -v ip >/dev/null || pkgs+=(iproute2)
[ -x /usr/bin/time ] || pkgs+=(time)
# vnetd's kernel fast path is compiled with clang against libbpf's headers.
command -v clang >/dev/null || pkgs+=(clang)
[ -e /usr/include/bpf/bpf_helpers.h ] || pkgs+=(libbpf-dev)
# Debian's python3 (not a pyenv shim) gets matplotlib from apt.
PY=/usr/bin/python3
"$PY" -c 'import matplotlib' 2>/dev/null || pkgs+=(python3 python3-matplotlib)
if [ "${#pkgs[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "${pkgs[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null; apt-get install -y "${pkgs[@]}" >/dev/null; }
fi
cargo build --release -p vnetd -p vnetctl
VNETD=$ROOT/target/release/vnetd

PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$TMP"
    halt_poll_restore
}
. "$ROOT/bench/halt-poll.sh"
trap cleanup EXIT
if [ -n "${GUEST_HALT_POLL:-}" ]; then
    halt_poll_set "$GUEST_HALT_POLL"
fi

# Fresh namespaces with a veth underlay 10.201.0.1 <-> 10.201.0.2.
underlay() {
    for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    PIDS=()
    sleep 0.3
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    ip netns add "$A"; ip netns add "$B"
    ip link add u0 netns "$A" type veth peer name u0 netns "$B"
    ip -n "$A" addr add 10.201.0.1/24 dev u0
    ip -n "$B" addr add 10.201.0.2/24 dev u0
    for n in "$A" "$B"; do ip -n "$n" link set u0 up; ip -n "$n" link set lo up; done
}

setup_veth() { underlay; DST=10.201.0.2; }

setup_kvxlan() {
    underlay
    ip -n "$A" link add vx0 type vxlan id 42 remote 10.201.0.2 local 10.201.0.1 dstport 4789 dev u0
    ip -n "$B" link add vx0 type vxlan id 42 remote 10.201.0.1 local 10.201.0.2 dstport 4789 dev u0
    ip -n "$A" addr add 192.168.81.1/24 dev vx0
    ip -n "$B" addr add 192.168.81.2/24 dev vx0
    for n in "$A" "$B"; do ip -n "$n" link set vx0 up; done
    DST=192.168.81.2
}

# vnet's own setups name their path: the user-space one (--offload off), or the kernel fast
# path that vnetd uses by default where the kernel allows (--offload on, so that a refusal
# fails the setup instead of measuring the other path).
setup_vnetrt() { VNET_ARGS="--offload off --rt-priority 10" setup_vnet; }
setup_vnetspin() { VNET_ARGS="--offload off --spin-us 200" setup_vnet; }
setup_vnetbpf() { VNET_ARGS="--offload on" setup_vnet; }
setup_vnetold() { VNET_ARGS="" VNET_BIN=$VNETD_OLD setup_vnet; }

setup_vnet() {
    underlay
    local i o ns
    for i in 1 2; do
        o=$((3 - i)); [ "$i" = 1 ] && ns=$A || ns=$B
        cat > "$TMP/vnet$i.toml" <<EOT
listen = "10.201.0.$i:4789"
socket = "$TMP/vnet$i.sock"
[[interface]]
name = "vif"
mac = "02:00:00:00:01:0$i"
[[link]]
name = "peer"
remote = "10.201.0.$o"
vni = 42
[[route]]
name = "local"
src = "any"
dst = "02:00:00:00:01:0$i"
to = "vif"
[[route]]
name = "remote"
src = "any"
dst = "02:00:00:00:01:0$o"
to = "peer"
[[route]]
name = "bcast-in"
src = "any"
dst = "ff:ff:ff:ff:ff:ff"
from = "peer"
to = "vif"
[[route]]
name = "bcast-out"
src = "any"
dst = "ff:ff:ff:ff:ff:ff"
from = "vif"
to = "peer"
EOT
        rm -f "$TMP/vnet$i.sock"   # a stale socket of the previous setup would end the wait early
        RUST_LOG=warn ip netns exec "$ns" "${VNET_BIN:-$VNETD}" -c "$TMP/vnet$i.toml" ${VNET_ARGS---offload off} > "$TMP/vnet$i.log" 2>&1 &
        PIDS+=($!)
    done
    for i in 1 2; do
        for _ in $(seq 100); do [ -S "$TMP/vnet$i.sock" ] && break; sleep 0.05; done
    done
    for _ in $(seq 100); do
        ip -n "$A" link show vif >/dev/null 2>&1 && ip -n "$B" link show vif >/dev/null 2>&1 && break
        sleep 0.05
    done
    ip -n "$A" addr add 192.168.82.1/24 dev vif
    ip -n "$B" addr add 192.168.82.2/24 dev vif
    DST=192.168.82.2
}

setup_n2n() {
    underlay
    ip netns exec "$A" supernode -l 7654 > "$TMP/sn.log" 2>&1 &
    PIDS+=($!)
    sleep 0.3
    ip netns exec "$A" edge -d n2n0 -a 192.168.83.1 -c bench -k benchkey -l 10.201.0.1:7654 -m 02:00:00:00:02:01 > "$TMP/e1.log" 2>&1 &
    PIDS+=($!)
    ip netns exec "$B" edge -d n2n0 -a 192.168.83.2 -c bench -k benchkey -l 10.201.0.1:7654 -m 02:00:00:00:02:02 > "$TMP/e2.log" 2>&1 &
    PIDS+=($!)
    DST=192.168.83.2
}

setup_tinc() {
    underlay
    local i o ns d
    for i in 1 2; do
        d=$TMP/tinc$i; mkdir -p "$d/hosts"
        o=$((3 - i))
        printf 'Name = h%s\nMode = switch\nInterface = tinc0\nAddressFamily = ipv4\nConnectTo = h%s\n' "$i" "$o" > "$d/tinc.conf"
        printf 'Address = 10.201.0.%s\nPort = 655\n' "$i" > "$d/hosts/h$i"
        printf '#!/bin/sh\nip addr add 192.168.84.%s/24 dev $INTERFACE\nip link set $INTERFACE up\n' "$i" > "$d/tinc-up"
        chmod +x "$d/tinc-up"
        tincd -c "$d" -K2048 </dev/null >/dev/null 2>&1
    done
    cp "$TMP/tinc1/hosts/h1" "$TMP/tinc2/hosts/h1"
    cp "$TMP/tinc2/hosts/h2" "$TMP/tinc1/hosts/h2"
    for i in 1 2; do
        [ "$i" = 1 ] && ns=$A || ns=$B
        ip netns exec "$ns" tincd -c "$TMP/tinc$i" -D --pidfile="$TMP/tinc$i.pid" > "$TMP/tinc$i.log" 2>&1 &
        PIDS+=($!)
    done
    DST=192.168.84.2
}

# Waits until the overlay answers pings (or gives up after 20 s).
wait_up() {
    for _ in $(seq 40); do
        ip netns exec "$A" ping -c 1 -W 1 "$DST" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}

# CPU time (seconds) used so far by every process in both namespaces (vnetd, n2n edge,
# tincd, the iperf3 server). Kernel work done on behalf of a process (softirq in its
# context) counts to it, which is where kernel VXLAN's work lands.
ns_cpu() {
    local total=0 p t
    for p in $(ip netns pids "$A"; ip netns pids "$B"); do
        t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
        total=$((total + t))
    done
    echo "$total"
}

# Prints "gbps1 gbps4 rtt_ms cpu_s_per_gb" for the current setup; the last is the CPU time
# of all processes in both namespaces plus the iperf3 client per GB moved (1 stream).
measure() {
    local g1 g4 rtt c0 c1 cc bytes
    ip netns exec "$B" iperf3 -s -D --pidfile "$TMP/iperfs.pid" >/dev/null 2>&1; sleep 0.3
    c0=$(ns_cpu)
    /usr/bin/time -f "%U %S" -o "$TMP/ctime" ip netns exec "$A" iperf3 -c "$DST" -t "$SECS" -J > "$TMP/one.json" 2>/dev/null || true
    c1=$(ns_cpu)
    kill "$(cat "$TMP/iperfs.pid")" 2>/dev/null || true
    sleep 0.3
    read -r cu cs < "$TMP/ctime" || { cu=0; cs=0; }
    g1=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9)' "$TMP/one.json" 2>/dev/null || echo 0)
    bytes=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bytes"])' "$TMP/one.json" 2>/dev/null || echo 0)
    cc=$("$PY" -c 'import sys; t=(int(sys.argv[2])-int(sys.argv[1]))/100+float(sys.argv[3])+float(sys.argv[4]); b=float(sys.argv[5]); print(t/(b/1e9) if b else 0)' "$c0" "$c1" "$cu" "$cs" "$bytes")
    ip netns exec "$B" iperf3 -s -D -1 --pidfile "$TMP/iperf.pid" >/dev/null 2>&1; sleep 0.3
    g4=$(ip netns exec "$A" iperf3 -c "$DST" -t "$SECS" -P 4 -J 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)' 2>/dev/null || echo 0)
    rtt=$(ip netns exec "$A" ping -q -c 200 -i 0.01 "$DST" 2>/dev/null | awk -F'/' '/^rtt/ {print $5}')
    echo "$g1 $g4 ${rtt:-0} $cc"
}

echo "setup round gbps_1 gbps_4 rtt_ms cpu_s_per_gb" > "$OUT/raw.txt"
{ date -u; nproc; lscpu | grep 'Model name'; uname -r; echo "cpuidle: $(halt_poll_describe)"; echo "load before: $(cat /proc/loadavg)"; } > "$OUT/machine.txt"
DEFAULT_SETUPS="veth kvxlan vnet vnetrt vnetspin vnetbpf${VNETD_OLD:+ vnetold} n2n tinc"
for r in $(seq "$ROUNDS"); do
    for s in ${SETUPS:-$DEFAULT_SETUPS}; do
        "setup_$s"
        if wait_up; then
            res=$(measure)
        else
            echo "warning: $s did not come up" >&2
            res="0 0 0 0"
        fi
        echo "$s $r $res" | tee -a "$OUT/raw.txt"
    done
done
# Route changes under load: replace the route in use 50 times (atomic batches) during a
# single-stream transfer; the TCP session must survive. With the fast path, each change
# also removes the flow's kernel copy, and the next frame copies the new decision.
CTL=$ROOT/target/release/vnetctl
: > "$OUT/flap.txt"
for v in vnet vnetbpf; do
    "setup_$v"
    wait_up || true
    ip netns exec "$B" iperf3 -s -D -1 >/dev/null 2>&1; sleep 0.3
    ip netns exec "$A" iperf3 -c "$DST" -t 6 -J > "$TMP/flap.json" 2>/dev/null &
    IPERF=$!
    sleep 0.5
    n=0
    for k in $(seq 50); do
        if [ $((k % 2)) = 1 ]; then old=remote; new=remote-b; else old=remote-b; new=remote; fi
        echo "[{\"op\":\"del_route\",\"route\":\"$old\"},{\"op\":\"add_route\",\"name\":\"$new\",\"src\":\"any\",\"dst\":\"02:00:00:00:01:02\",\"to\":\"peer\"}]" \
            | "$CTL" -s "$TMP/vnet1.sock" batch - >/dev/null && n=$((n + 1))
        sleep 0.08
    done
    if wait "$IPERF"; then survived=yes; else survived=no; fi
    gbps=$("$PY" -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/1e9))' "$TMP/flap.json" 2>/dev/null || echo 0)
    echo "route changes under load ($v): $n atomic batches applied during a 6 s transfer; TCP session survived: $survived; $gbps Gbit/s" | tee -a "$OUT/flap.txt"
done
# An idle vnetd must burn no CPU: after a few pings (which arm the busy-poll window of the
# spinning variant), the CPU time of both daemons over 5 idle seconds.
for v in vnet vnetspin vnetbpf; do
    "setup_$v"
    wait_up || true
    ip netns exec "$A" ping -q -c 20 -i 0.01 "$DST" >/dev/null 2>&1 || true
    sleep 1
    c0=$(ns_cpu); sleep 5; c1=$(ns_cpu)
    echo "idle $v: both daemons used $(( (c1 - c0) * 10 )) ms of CPU in 5 s" | tee -a "$OUT/flap.txt"
done
underlay
echo "load after: $(cat /proc/loadavg)" >> "$OUT/machine.txt"

"$PY" "$ROOT/bench/vnet/report.py" "$OUT" "$SECS" "$ROUNDS"
# Only a run of every setup replaces the chart the results page shows.
if [ -z "${SETUPS:-}" ]; then
    cp "$OUT/chart.png" "$ROOT/docs/benchmarks-vnet.png"
    echo "results: $OUT/results.md (chart copied to docs/benchmarks-vnet.png)"
else
    echo "results: $OUT/results.md, chart: $OUT/chart.png (SETUPS given: docs/ left alone)"
fi
