#!/usr/bin/env bash
# Everything issue 30 asks of one lent GPU, as one command that ends within
# DEADLINE seconds (default 450), each part bounded by what is left, with
# its logs under $OUT (the device tool's folder) or target/gpu-session:
#   1. scripts/gpu-validate-cuda.sh 13: every sample natively and through a
#      local server, outputs compared, the LeNet-style loop's ratio;
#   2. that loop natively, over shared memory, over TCP (loopback) and with
#      WORMHOLE_SYNC=1, alternated twice in one run: the batching figure;
#   3. nvidia-smi's memory.used with 0, 1, 4 and 16 idle tenants
#      (examples/cuda/idle_tenant.c) and one native process: what a
#      tenant's CUDA context costs the device;
#   4. scripts/try-pytorch.sh: how far PyTorch gets, natively and remoted;
#   5. delay storing for CUDA on the GPU (residency_api = "cuda", the
#      driver's virtual memory calls): three pressure clients and the LeNet
#      loop at once through a 64 MiB budget, then the eager baseline; each
#      output compared with native, the ledger's report kept; with step 4,
#      PyTorch's steps again with its allocations on residency's slabs.
# On the device machine, with target/gpu-bundle carried (scripts/gpu-bundle.sh):
#   WORMHOLE_BIN=target/gpu-bundle scripts/gpu-session.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-target/gpu-session}; mkdir -p "$out"
bin=$(cd "${WORMHOLE_BIN:?the bundle of scripts/gpu-bundle.sh}" && pwd)
export WORMHOLE_BIN=$bin
# STEPS: which parts to run (default all: 12345).
steps=${STEPS:-12345}
deadline=$((SECONDS + ${DEADLINE:-450}))
# A step's time limit: SECS, or what is left before the deadline if less.
limit() { local l=$((deadline - SECONDS)); [ "$l" -lt "$1" ] && echo $((l > 1 ? l : 1)) || echo "$1"; }
{
  date -u; uname -r
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  nvcc --version | tail -n2
  python3 -c 'import torch; print("torch", torch.__version__)'
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

v=target/gpu-validate; mkdir -p "$v/probe-lib"
echo "=== 0. which confinement a CUDA tenant starts under"
# A confined tenant that cannot start CUDA here would fail every sample:
# try the full confinement, then each layer left out
# (WORMHOLE_CONFINE_SKIP), then none, with one idle tenant each; the rest
# of the session runs under the first that works, and says which.
nv_rt=$(ldconfig -p | awk '$1 == "libcudart.so.13" { print $NF; exit }')
nv_rt=$(dirname "${nv_rt:-${NVIDIA_LIB_DIRS:-/usr/local/cuda/targets/x86_64-linux/lib}/libcudart.so.13}")
ln -sf "$bin/libwormhole_cudart13.so" "$v/probe-lib/libcudart.so.13"
ln -sf libcudart.so.13 "$v/probe-lib/libcudart.so"
cc -O2 -Wall -Iexamples/cuda -o "$v/idle_tenant" examples/cuda/idle_tenant.c -L"$v/probe-lib" -lcudart
probe() { # SKIP ARGS...: 0 when a tenant starts CUDA under that server
  local skip=$1; shift
  rm -f "$v/p.sock"
  WORMHOLE_CONFINE_SKIP=$skip WORMHOLE_LOG=info LD_LIBRARY_PATH="$nv_rt:$bin/ocl" \
    "$bin/wormhole-server" --socket "$v/p.sock" "$@" 2>> "$out/probe.log" &
  local p=$! rc
  for _ in $(seq 100); do [ -S "$v/p.sock" ] && break; sleep 0.1; done
  WORMHOLE_SERVER="$v/p.sock" LD_LIBRARY_PATH="$v/probe-lib" timeout 30 "$v/idle_tenant" < /dev/null >> "$out/probe.log" 2>&1
  rc=$?; kill $p 2>/dev/null; wait $p 2>/dev/null
  echo "skip '${skip}' $*: exit $rc" | tee -a "$out/probe.log"
  return $rc
}
{ id; ls -la /dev/nvidia* /dev/nvidia-caps 2>&1; ulimit -a; } > "$out/probe.log" 2>&1
chosen=none
for variant in "" landlock-scope landlock-proc landlock limits seccomp root "root,limits,landlock,seccomp"; do
  probe "$variant" && { chosen=$variant; break; }
done
if [ "$chosen" = none ]; then
  chosen=""
  probe "" --no-confine && export WORMHOLE_SERVER_ARGS=--no-confine
fi
export WORMHOLE_CONFINE_SKIP=$chosen
echo "the session runs with WORMHOLE_CONFINE_SKIP='$chosen' WORMHOLE_SERVER_ARGS='${WORMHOLE_SERVER_ARGS:-}'"

echo "=== 1. samples natively and through Wormhole"
if [[ $steps == *1* ]]; then
  timeout "$(limit 200)" scripts/gpu-validate-cuda.sh 13 > "$out/validate.log" 2>&1
  echo "validate exit $?"; tail -n 40 "$out/validate.log"
fi

native_path=$(sed -n "s/^== NVIDIA's libraries: //p" "$out/validate.log" | head -n1)
cudart_dir=${native_path%%:*}
rm -f "$v/s2.sock"
# shellcheck disable=SC2086
LD_LIBRARY_PATH="$native_path:$bin/ocl" "$bin/wormhole-server" --socket "$v/s2.sock" --tcp 127.0.0.1:7700 -q ${WORMHOLE_SERVER_ARGS:-} &
spid=$!
trap 'kill $spid 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$v/s2.sock" ] && break; sleep 0.1; done

echo "=== 2. LeNet-style loop: native, shared memory, TCP, WORMHOLE_SYNC=1"
if [[ $steps != *2* ]]; then
  :
elif [ -x "$v/lenet" ]; then
  for round in 1 2; do
    for mode in native shm tcp sync; do
      case $mode in
        native) e=(LD_LIBRARY_PATH="$native_path") ;;
        shm) e=(WORMHOLE_SERVER="$v/s2.sock" LD_LIBRARY_PATH="$v/lib13") ;;
        tcp) e=(WORMHOLE_SERVER=tcp:127.0.0.1:7700 LD_LIBRARY_PATH="$v/lib13") ;;
        sync) e=(WORMHOLE_SERVER="$v/s2.sock" WORMHOLE_SYNC=1 LD_LIBRARY_PATH="$v/lib13") ;;
      esac
      r=$(env "${e[@]}" timeout "$(limit 60)" "$v/lenet" "${LENET_IMAGES:-65536}" 4 2>&1)
      echo "round $round $mode (exit $?): $(grep -E '^time:|digest|correct' <<< "$r" | tr '\n' ' ')"
    done
  done 2>&1 | tee "$out/lenet-modes.txt"
else
  echo "no lenet binary: step 1 did not build it" | tee "$out/lenet-modes.txt"
fi

echo "=== 3. device memory per idle tenant"
memory() {
  used() { sleep 2; nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -n1; }
  echo "server idle, no tenant: $(used) MiB"
  # N tenants (or, with native, one process on NVIDIA's runtime) held
  # until the fifo's last writer (this shell) closes it.
  hold() {
    local n=$1 mode=$2 fifo="$v/hold.fifo" ready="$v/ready.txt"
    rm -f "$fifo" "$ready"; mkfifo "$fifo"; exec 7<>"$fifo"
    for _ in $(seq "$n"); do
      if [ "$mode" = native ]; then
        LD_LIBRARY_PATH="$cudart_dir" "$v/idle_tenant" < "$fifo" >> "$ready" 7>&- &
      else
        WORMHOLE_SERVER="$v/s2.sock" LD_LIBRARY_PATH="$v/lib13" "$v/idle_tenant" < "$fifo" >> "$ready" 7>&- &
      fi
    done
    for _ in $(seq 300); do [ "$(grep -c ready "$ready" 2>/dev/null)" -ge "$n" ] && break; sleep 0.2; done
    echo "$n $mode tenant(s), $(grep -c ready "$ready") ready: $(used) MiB"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sort | uniq -c | head -n 20
    exec 7>&-; wait_n=0
    while [ "$(jobs -rp | grep -vc "^$spid$")" -gt 0 ] && [ $wait_n -lt 100 ]; do sleep 0.1; wait_n=$((wait_n + 1)); done
  }
  hold 1 native
  for n in 1 4 16; do [ $((deadline - SECONDS)) -gt 60 ] && hold "$n" wormhole; done
  echo "after: $(used) MiB"
}
[[ $steps == *3* ]] && { memory > "$out/memory.txt" 2>&1; cat "$out/memory.txt"; }

echo "=== 5. delay storing for CUDA on the GPU"
kill $spid 2>/dev/null
residency() { # POLICY: pressure clients and lenet at once through a 64 MiB budget
  local log="$v/residency-$1.log" pids=() seed rc=0
  rm -f "$v/r.sock"
  # shellcheck disable=SC2086
  WORMHOLE_LOG=info LD_LIBRARY_PATH="$native_path:$bin/ocl" "$bin/wormhole-server" --socket "$v/r.sock" -q \
    --residency-api cuda --device-memory 64M --oversubscribe --residency "$1" ${WORMHOLE_SERVER_ARGS:-} 2> "$log" &
  local rp=$!
  for _ in $(seq 100); do [ -S "$v/r.sock" ] && break; sleep 0.1; done
  for seed in 1 2 3; do
    WORMHOLE_SERVER="$v/r.sock" LD_LIBRARY_PATH="$v/lib13" timeout "$(limit 90)" "$v/pressure" 24 6 "$seed" > "$v/pressure.$1.$seed" 2>&1 &
    pids+=($!)
  done
  [ -x "$v/lenet" ] && WORMHOLE_SERVER="$v/r.sock" LD_LIBRARY_PATH="$v/lib13" timeout "$(limit 90)" "$v/lenet" 4096 2 > "$v/lenet.$1" 2>&1 &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  for seed in 1 2 3; do
    if diff "$v/pressure.native.$seed" "$v/pressure.$1.$seed" > /dev/null; then echo "$1: pressure $seed as natively"; else echo "$1: pressure $seed DIFFERS"; tail -n 5 "$v/pressure.$1.$seed"; rc=1; fi
  done
  if [ -x "$v/lenet" ]; then
    if diff <(grep -v '^time:' "$v/lenet.native") <(grep -v '^time:' "$v/lenet.$1") > /dev/null; then echo "$1: lenet as natively"; else echo "$1: lenet DIFFERS"; tail -n 5 "$v/lenet.$1"; rc=1; fi
  fi
  sleep 1; kill -USR1 $rp; sleep 1
  grep -E 'residency: device budget|residency \(CUDA|ERROR|no residency' "$log" | tail -n 5
  kill $rp 2>/dev/null; wait $rp 2>/dev/null
  echo "$1: exit $rc"
}
if [[ $steps == *5* ]]; then
  cc -O2 -Wall -Iexamples/cuda -o "$v/pressure" examples/cuda/pressure.c -L"$v/lib13" -lcublas -lcudart -lm
  for seed in 1 2 3; do LD_LIBRARY_PATH="$native_path" "$v/pressure" 24 6 "$seed" > "$v/pressure.native.$seed" 2>/dev/null; done
  [ -x "$v/lenet" ] && LD_LIBRARY_PATH="$native_path" "$v/lenet" 4096 2 > "$v/lenet.native" 2>/dev/null
  echo "native: $(tail -n1 "$v/pressure.native.1"), lenet $(tail -n1 "$v/lenet.native" 2>/dev/null)"
  { residency delay; [ $((deadline - SECONDS)) -gt 60 ] && residency eager; } 2>&1 | tee "$out/residency.txt"
fi

echo "=== 4. PyTorch"
if [[ $steps == *4* ]]; then
  # What PyTorch's CUDA libraries import from cuBLAS and cuSOLVER: the
  # entry points the stand-ins must export for them to load.
  tl=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__) + "/lib")' 2>/dev/null)
  for f in "$tl"/libtorch_cuda*.so; do
    nm -D --undefined-only "$f" 2>/dev/null | awk -v f="${f##*/}" '/@libcu(blas|blasLt|solver|rand|art)/ { print f, $2 }'
  done | sort -u > "$out/torch-imports.txt"
  echo "$(wc -l < "$out/torch-imports.txt") imports from the CUDA libraries (torch-imports.txt)"
  timeout "$(limit 200)" scripts/try-pytorch.sh > "$out/pytorch.log" 2>&1
  echo "pytorch exit $?"; grep -E '^(ok|FAIL|==)' "$out/pytorch.log" | head -n 60
fi
# PyTorch with its allocations on residency's slabs (one tenant, room for
# it: nothing is evicted, but every tensor lives in memory the driver's
# virtual memory calls mapped), after step 4's plain run.
if [[ $steps == *5* && $steps == *4* ]] && [ $((deadline - SECONDS)) -gt 150 ]; then
  echo "=== 5b. PyTorch on residency's slabs"
  WORMHOLE_SERVER_ARGS="${WORMHOLE_SERVER_ARGS:-} --residency-api cuda --device-memory 32G" \
    timeout "$(limit 150)" scripts/try-pytorch.sh > "$v/pytorch-residency.log" 2>&1
  { echo "pytorch on slabs: exit $?"; grep -E '^(ok|FAIL)' "$v/pytorch-residency.log" | head -n 40; } 2>&1 | tee -a "$out/residency.txt"
fi
echo "=== done in $SECONDS s"
