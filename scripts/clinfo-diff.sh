#!/usr/bin/env bash
# clinfo natively on PoCL and through Wormhole, diffed after platform naming
# is normalised ("Wormhole: " prefix, our ICD suffix WH). Every remaining
# line must match one of the explained differences below (documented in
# docs/wormhole-opencl.md, section "clinfo"); any other line fails.
#
#   scripts/clinfo-diff.sh [--work DIR]      (default target/clinfo-diff)
#
# Needs clinfo, PoCL (pocl-opencl-icd) and cargo.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$ROOT/target/clinfo-diff}
POCL_ICD=${POCL_ICD:-/etc/OpenCL/vendors/pocl.icd}
while [ $# -gt 0 ]; do
  case "$1" in
    --work) WORK=$2; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

(cd "$ROOT" && cargo build -q -p wormhole-server -p wormhole-opencl-icd)
TARGET=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | sed 's/.*"target_directory":"\([^"]*\)".*/\1/')
mkdir -p "$WORK/icd"
echo "$TARGET/debug/libwormhole_opencl.so" > "$WORK/icd/wormhole.icd"
SOCK=$WORK/wh-$$.sock
"$TARGET/debug/wormhole-server" --socket "$SOCK" > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -f "$SOCK"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "wormhole-server did not start:"; cat "$WORK/server.log"; exit 1; }

OCL_ICD_VENDORS="$POCL_ICD" clinfo > "$WORK/native.txt" 2>&1
OCL_ICD_VENDORS="$WORK/icd" WORMHOLE_SERVER="unix:$SOCK" clinfo > "$WORK/remoted.txt" 2>&1
grep -q "Wormhole: " "$WORK/remoted.txt" || { echo "no Wormhole platform in remoted clinfo"; exit 1; }
# Platform naming: our name prefix, and the ICD suffix (each ICD has its own).
sed -e 's/Wormhole: //' -e 's/\[WH\]/[POCL]/' \
    -e 's/^\(  Platform Extensions function suffix *\)WH$/\1POCL/' \
    "$WORK/remoted.txt" > "$WORK/remoted-normalised.txt"
diff "$WORK/native.txt" "$WORK/remoted-normalised.txt" > "$WORK/diff.txt" || true

# Explained differences: an extended regex for the line, ' ## ', its cause.
EXPLAINED=(
  '^[<>] +(Platform|Device) Extensions  ## Extensions Wormhole does not forward are hidden (cl_khr_command_buffer*, cl_pocl_content_size: their entry points are not in the API description); the rest of the list is rejoined with single spaces'
  '^< +cl_(khr_command_buffer|pocl_content_size) +0x ## The same extensions in the *_WITH_VERSION lists'
  '^< +(Command buffer capabilities|Required queue properties for command buffer|Out-of-order execution|Profiling) ## clinfo asks for command-buffer properties only when cl_khr_command_buffer is listed'
  '^[<>] +(Coarse-grained buffer sharing|Fine-grained buffer sharing|Atomics) ## No SVM through Wormhole (CL_DEVICE_SVM_CAPABILITIES = 0): client and server do not share an address space'
  '^[<>] +Run native kernels ## No native kernels (CL_EXEC_NATIVE_KERNEL cleared): a host function pointer of the client cannot run in the server'
  '^[<>] +(Global memory size|Max memory allocation) ## PoCL reports no more than its process may use: a tenant whose cgroup allows less than the host has (three quarters of it by default, where cgroup v2 gives a memory controller) sees less'
)
status=0
while IFS= read -r line; do
  case "$line" in [\<\>]*) ;; *) continue ;; esac
  cause=""
  for e in "${EXPLAINED[@]}"; do
    if [[ "$line" =~ ${e%% ## *} ]]; then cause=${e#* ## }; break; fi
  done
  if [ -z "$cause" ]; then
    echo "UNEXPLAINED: $line"
    status=1
  else
    echo "$line"
    echo "    -> $cause"
  fi
done < "$WORK/diff.txt"
echo "clinfo: $(grep -c '^[<>]' "$WORK/diff.txt" || true) differing lines after platform naming; outputs in $WORK"
exit $status
