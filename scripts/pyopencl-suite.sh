#!/usr/bin/env bash
# pyopencl's own test suite (pyopencl from PyPI), run twice in one go:
# natively on PoCL and through Wormhole (a wormhole-server on a private
# socket, in front of the same PoCL), then compared test by test. Fails
# when a test passes natively but not through Wormhole, unless
# scripts/pyopencl-known-differences.txt lists it with its cause.
#
#   scripts/pyopencl-suite.sh [--subset|--full] [--work DIR] [--keep-going]
#
#   --subset   the files CI runs (SUBSET_FILES below; a few minutes)
#   --full     every test file of the sdist (default)
#   --work DIR venv, tests, reports (default target/pyopencl-suite)
#
# Needs python3 with venv, PoCL (pocl-opencl-icd), cargo; network access to
# PyPI. Reports: DIR/{native,remoted}.xml (junit), DIR/summary.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=full
WORK=${WORK:-$ROOT/target/pyopencl-suite}
PYOPENCL_VERSION=${PYOPENCL_VERSION:-2026.1.4}
POCL_ICD=${POCL_ICD:-/etc/OpenCL/vendors/pocl.icd}
# The files that exercise the most API surface for their time: the
# wrapper itself (info queries, images, maps, events, programs, binaries,
# kernels, sub-buffers, SVM reporting), copies, struct arguments, RNG.
SUBSET_FILES="test_wrapper.py test_enqueue_copy.py test_arrays_in_structs.py test_clrandom.py"
PER_TEST_TIMEOUT=${PER_TEST_TIMEOUT:-300}

while [ $# -gt 0 ]; do
  case "$1" in
    --subset) MODE=subset ;;
    --full) MODE=full ;;
    --work) WORK=$2; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
[ -r "$POCL_ICD" ] || { echo "no PoCL ICD at $POCL_ICD (install pocl-opencl-icd)" >&2; exit 2; }

# --- Python environment and the tests -----------------------------------
VENV=$WORK/venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import pyopencl, pytest, pytest_timeout, xdist, mako" 2>/dev/null \
   || [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("pyopencl"))')" != "$PYOPENCL_VERSION" ]; then
  "$VENV/bin/pip" install -q "pyopencl==$PYOPENCL_VERSION" numpy pytest pytest-timeout pytest-xdist mako
fi
TESTS=$WORK/tests-$PYOPENCL_VERSION
[ -f "$TESTS/test_wrapper.py" ] || "$VENV/bin/python" "$ROOT/scripts/pyopencl_suite.py" fetch-tests "$PYOPENCL_VERSION" "$TESTS"

if [ "$MODE" = subset ]; then FILES=$SUBSET_FILES; else FILES=$(cd "$TESTS" && ls test_*.py | tr '\n' ' '); fi

# --- Wormhole: server and ICD --------------------------------------------
(cd "$ROOT" && cargo build -q -p wormhole-server -p wormhole-opencl-icd)
TARGET=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
ICD_DIR=$WORK/icd
mkdir -p "$ICD_DIR"
echo "$TARGET/debug/libwormhole_opencl.so" > "$ICD_DIR/wormhole.icd"
SOCK=$WORK/wh-$$.sock
export POCL_CACHE_DIR=$WORK/pocl-cache   # kernels compiled once, shared by both runs
mkdir -p "$POCL_CACHE_DIR"
"$TARGET/debug/wormhole-server" --socket "$SOCK" > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -f "$SOCK"' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { echo "wormhole-server did not start:"; cat "$WORK/server.log"; exit 1; }

# --- The two runs ---------------------------------------------------------
# -n 1 (pytest-xdist): one worker process, replaced if a test crashes it, so
# a segfault is one failed test rather than the end of the run. A hung test
# is ended by pytest-timeout, or, when it holds the GIL, by the faulthandler
# watchdog of scripts/pyopencl_watchdog.py a minute later.
run_suite() { # LABEL, then environment assignments
  local label=$1; shift
  rm -rf "$WORK/cache-$label" "$WORK/$label.xml"
  echo "== pyopencl $PYOPENCL_VERSION tests ($MODE), $label =="
  local start=$SECONDS
  (cd "$TESTS" && env "$@" XDG_CACHE_HOME="$WORK/cache-$label" PYOPENCL_CACHE_FAILURE_FATAL=1 \
    PYTHONPATH="$ROOT/scripts" PYOPENCL_SUITE_HARD_TIMEOUT=$((PER_TEST_TIMEOUT + 60)) \
    timeout 7200 "$VENV/bin/python" -m pytest -p no:cacheprovider -p pyopencl_watchdog -n 1 -q -rfE \
      --timeout "$PER_TEST_TIMEOUT" --timeout-method thread --junitxml "$WORK/$label.xml" $FILES 2>&1 | tail -n 40) || true
  echo "$label: $((SECONDS - start)) s"
}
run_suite native OCL_ICD_VENDORS="$POCL_ICD" PYOPENCL_TEST=portable
# Only Wormhole's ICD is visible to the remoted run. Its platform keeps the
# remote name (WORMHOLE_PLATFORM_NAME=remote, a documented client option):
# pyopencl keys its PoCL workarounds and its tests' helpers on the exact
# name "Portable Computing Language" and fails under "Wormhole: ...".
run_suite remoted OCL_ICD_VENDORS="$ICD_DIR" WORMHOLE_SERVER="unix:$SOCK" \
  WORMHOLE_PLATFORM_NAME=remote PYOPENCL_TEST=portable

echo "== comparison ($MODE) =="
for label in native remoted; do
  [ -s "$WORK/$label.xml" ] || { echo "no junit report from the $label run (see its output above)"; exit 1; }
done
"$VENV/bin/python" "$ROOT/scripts/pyopencl_suite.py" compare "$WORK/native.xml" "$WORK/remoted.xml" \
  "$ROOT/scripts/pyopencl-known-differences.txt" "$WORK/summary.txt"
