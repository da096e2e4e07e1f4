#!/usr/bin/env bash
# Wormhole beside its nearest peer, PoCL-remote, in one command (issue 32).
# Installs what it needs (apt, and pyopencl into a venv under target/),
# builds the peer from ../shared/peers/ into target/peers/ (build-peer.sh)
# while it builds Wormhole's release binaries, then, inside a network
# namespace of its own (pocld listens on every address), runs native PoCL
# 3.1, Wormhole over shared memory in each handoff mode, Wormhole over TCP
# and PoCL-remote over TCP on the same CPU device, alternated for several
# rounds: the synchronous round trips, a call-heavy loop, 256 MiB transfers,
# program builds, the demo, clpeak, CLBlast's tests, the C integration
# suite and pyopencl's test subset, and each server's CPU with an idle
# client. Writes bench/out/peers/{results.md,results.json,peers.png} and
# prints the table.
#
#   bench/peers/run.sh [--rounds N] [--parts apps,it,pyopencl] [...]
#
# Arguments go to `peers.py run` (see its --help). BENCH_LIMIT (default
# 900) bounds the measurements in seconds. PEERS_DIR names where the peer's
# tarball and patch are (default ../shared/peers).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/bench/out/peers
mkdir -p "$out"
start=$SECONDS

scripts/need-packages.sh pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo gcc clpeak \
  clblast-tests python3 python3-venv gnuplot-nox fonts-dejavu-core iproute2 util-linux
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: run scripts/install-deps.sh" >&2; exit 1; }

# The peer builds while Wormhole does: on 2 CPUs each waits on its own
# steps' serial parts.
bash bench/peers/build-peer.sh > "$out/build-peer.log" 2>&1 &
peer_build=$!
echo "== building Wormhole (release) and PoCL-remote (log: $out/build-peer.log)"
cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run
wait "$peer_build" || { tail -n 20 "$out/build-peer.log" >&2; exit 1; }
peer=$(tail -n 1 "$out/build-peer.log")
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release

cc -O2 -Wall -o "$out/peerbench" bench/peers/peerbench.c -lOpenCL
cc -O2 -o "$out/demo" examples/demo.c -lOpenCL -lm
mkdir -p "$out/it"
for c in tests/opencl/*.c; do
  cc -O1 -Wall -Wno-deprecated-declarations -Itests/opencl -o "$out/it/$(basename "$c" .c)" "$c" -lOpenCL -lpthread
done

# pyopencl and its tests, as scripts/pyopencl-suite.sh installs them.
work=$target/pyopencl-suite
version=${PYOPENCL_VERSION:-2026.1.4}
venv=$work/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import pyopencl, pytest, pytest_timeout, xdist, mako" 2>/dev/null; then
  "$venv/bin/pip" install -q "pyopencl==$version" numpy pytest pytest-timeout pytest-xdist mako
fi
tests=$work/tests-$version
[ -f "$tests/test_wrapper.py" ] || "$venv/bin/python" scripts/pyopencl_suite.py fetch-tests "$version" "$tests"
echo "== built and installed in $((SECONDS - start)) s; measuring on $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# pocld binds a peer port on every address whatever -a says: the servers
# and clients run in a network namespace with loopback only.
if [ "$(id -u)" -eq 0 ]; then ns=(unshare --net); else ns=(unshare --net --map-root-user); fi
"${ns[@]}" true 2>/dev/null || { echo "cannot make a network namespace (unshare --net): needed to keep pocld off the network" >&2; exit 1; }
"${ns[@]}" bash -c 'ip link set lo up && exec "$@"' _ \
  timeout --kill-after=10 "${BENCH_LIMIT:-900}" python3 bench/peers/peers.py run --out "$out" \
  --bin-dir "$bin" --peer "$peer" --peerbench "$out/peerbench" --demo "$out/demo" --it-dir "$out/it" \
  --pyopencl-venv "$venv" --pyopencl-tests "$tests" "$@"
echo "== $((SECONDS - start)) s in all; report: $out/results.md, chart: $out/peers.png"
