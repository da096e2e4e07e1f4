#!/usr/bin/env bash
# Third-party OpenCL programs, unmodified, natively and through Wormhole:
#  - CLBlast's own correctness tests (Debian's clblast-tests) for a set of
#    routines: each must pass the same number of cases both ways and fail none.
#    They also check the error codes of bad calls, so they compare Wormhole's
#    argument checks with the library's.
#  - hashcat cracking an MD5 by brute force, twice through Wormhole: cold (its
#    kernels built from source through us) and warm (loaded from the binaries
#    it cached on the first run).
#  - clFFT's client (Debian's clfft-client) running five transforms, each
#    checked by the client itself against its reference, both ways.
#  - A CLBlast tuner (clblast-utils): every configuration it compiles, runs,
#    times with event profiling and compares with its reference must match,
#    as many natively as through Wormhole.
#  - ffmpeg's OpenCL video filters (images, uploads and downloads through
#    maps): the MD5 of the filtered frames must be the same both ways.
#  - OpenCV's transparent API (python3-opencv) on the CPU device: the MD5s of
#    eight operations' results must be the same both ways.
#  - OpenMM (python3-simtk): a seeded molecular dynamics run on its OpenCL
#    platform must end in the same state both ways, with forces that match
#    its Reference platform.
#  - hcxkeys: WPA master keys computed with OpenCL must equal its CPU tool's.
#  - UFO's image-processing and tomography filters (ufo-filters): the MD5 of
#    each pipeline's output must be the same both ways.
#  - gpyfft's own tests (python3-gpyfft, clFFT through pyopencl).
#  - StarPU's examples (starpu-examples) on OpenCL workers: every one that
#    checks its result and passes natively must pass through Wormhole.
#  - piglit's OpenCL API tests (piglit): each checks one entry point's
#    results and error codes against the specification; every one that
#    passes natively must pass through Wormhole, on PoCL and on a second
#    vendor's implementation (Oclgrind, a simulator). Then piglit's program
#    tests (kernels run on given arguments, results compared) on PoCL.
#
#   scripts/test-opencl-apps.sh [--all]   (--all: every CLBlast routine and
#                                          piglit's generated tests too, ~1.5 h)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

scripts/need-packages.sh pocl-opencl-icd ocl-icd-opencl-dev clinfo clblast-tests hashcat \
  clfft-client clblast-utils piglit oclgrind ffmpeg python3-opencv \
  python3-simtk libopenmm-plugins hcxkeys ufo-filters libufo-bin starpu-examples python3-gpyfft
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

# A handful of routines that together cover BLAS levels 1-3, reductions,
# batched calls and im2col in a few minutes on two cores.
routines=(xaxpy xdot xnrm2 xgemv xger xtrsm xim2col xomatcopy)
if [ "${1:-}" = --all ]; then
  routines=()
  for t in /usr/bin/clblast_test_x*; do routines+=("${t#/usr/bin/clblast_test_}"); done
fi

cargo build -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run
TARGET=$(cargo metadata --format-version 1 --no-deps | sed 's/.*"target_directory":"\([^"]*\)".*/\1/')
RUN=$TARGET/debug/wormhole-run
WORK=$TARGET/opencl-apps
rm -rf "$WORK"
mkdir -p "$WORK"
POCL_ICD=${POCL_ICD:-/etc/OpenCL/vendors/pocl.icd}

# Sum of "N test(s) WORD" over all precisions in a CLBlast log.
# A log without any (a run that died early) counts 0, rather than ending the
# script through pipefail without a word.
count() { sed 's/\x1b\[[0-9;]*m//g' "$1" | { grep -aoE "[0-9]+ test\(s\) $2" || true; } | awk '{s += $1} END {print s + 0}'; }

status=0
# via SETUP SECS CMD...: CMD under a time limit, natively on PoCL or through
# Wormhole (a private server on PoCL).
via() {
  local setup=$1 secs=$2
  shift 2
  case $setup in
    native) OCL_ICD_VENDORS=$POCL_ICD timeout "$secs" "$@" ;;
    wormhole) OCL_ICD_VENDORS=$POCL_ICD timeout "$secs" "$RUN" --start-server -- "$@" ;;
  esac
}
# same LABEL NATIVE WORMHOLE: a result (an MD5) that must be there and equal.
same() {
  if [ -n "$2" ] && [ "$2" = "$3" ]; then
    echo "$1: the same both ways ($2)"
  else
    echo "$1: native '$2', through Wormhole '$3'"; status=1
  fi
}
echo "== CLBlast tests: native vs Wormhole =="
printf '%-16s %8s %8s %8s %8s\n' routine native wormhole failed "skipped (both)"
for r in "${routines[@]}"; do
  bin=/usr/bin/clblast_test_$r
  n=$WORK/$r.native.log w=$WORK/$r.wormhole.log
  nrc=0 wrc=0
  via native 1200 "$bin" -q > "$n" 2>&1 || nrc=$?
  via wormhole 1200 "$bin" -q > "$w" 2>&1 || wrc=$?
  np=$(count "$n" passed) wp=$(count "$w" passed)
  nf=$(count "$n" failed) wf=$(count "$w" failed)
  ns=$(count "$n" skipped) ws=$(count "$w" skipped)
  printf '%-16s %8s %8s %8s %8s\n' "$r" "$np" "$wp" "$wf" "$ns/$ws"
  if [ "$nrc" -ne 0 ] || [ "$nf" -ne 0 ] || [ "$np" -eq 0 ]; then
    echo "  native run unusable (exit $nrc, $nf failed): $n"; status=1
  elif [ "$wrc" -ne 0 ] || [ "$wf" -ne 0 ] || [ "$wp" -ne "$np" ] || [ "$ws" -ne "$ns" ]; then
    echo "  through Wormhole: exit $wrc, $wf failed, $wp passed and $ws skipped against $np and $ns natively: $w"
    tail -n 20 "$w" | sed 's/\x1b\[[0-9;]*m//g'
    status=1
  fi
done

echo "== hashcat through Wormhole: cold, then from its cached kernels =="
HC=$WORK/hashcat
mkdir -p "$HC/home"
printf '%s' 4242 | md5sum | cut -d' ' -f1 > "$HC/hash.txt"
want="$(cat "$HC/hash.txt"):4242"
for run in cold warm; do
  [ "$run" = warm ] && find "$HC/home" -name '*.kernel' -printf '%p %T@\n' | sort > "$HC/kernels.cold"
  rc=0
  # Its own cache (hashcat keeps kernels under XDG_CACHE_HOME, else the
  # user's home from the password file): the cold run must build the
  # kernels, the warm one must find what the cold one cached.
  (cd "$HC" && XDG_CACHE_HOME="$HC/home/cache" XDG_DATA_HOME="$HC/home/data" \
    XDG_CONFIG_HOME="$HC/home/config" \
    via wormhole 900 hashcat -m 0 -a 3 --potfile-disable --quiet hash.txt '?d?d?d?d') \
    > "$HC/$run.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] && grep -qx "$want" "$HC/$run.log"; then
    echo "$run: cracked"
  else
    echo "$run: hashcat exit $rc, no '$want' in its output:"; tail -n 20 "$HC/$run.log"; status=1
  fi
done
kernels=$(find "$HC/home" -name '*.kernel' | wc -l)
echo "kernels cached by the cold run: $kernels"
[ "$kernels" -gt 0 ] || { echo "the cold run cached no kernel binaries"; status=1; }
find "$HC/home" -name '*.kernel' -printf '%p %T@\n' | sort > "$HC/kernels.warm"
cmp -s "$HC/kernels.cold" "$HC/kernels.warm" || { echo "the warm run rebuilt kernels instead of loading them"; status=1; }
echo "== clFFT's client: its own check of each transform, native and through Wormhole =="
# With one profiling pass (the default) the client compares its result with
# its reference transform and prints PASS or FAIL.
transforms=("-x 1024" "-x 4096 -o" "-x 64 -y 64 -z 64 --double" "-x 1000 --inv -b 8"
  "-x 256 -y 256 -o --double --inv")
for t in "${transforms[@]}"; do
  line=""
  for setup in native wormhole; do
    log=$WORK/clfft.$setup.log rc=0
    # shellcheck disable=SC2086  # the transform's flags are words
    via "$setup" 300 clFFT-client $t > "$log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ] && grep -q 'Internal Client Test \*\*\*\*\*PASS' "$log"; then
      line="$line $setup PASS"
    else
      line="$line $setup FAILED (exit $rc)"; status=1; tail -n 5 "$log"
    fi
  done
  echo "clFFT-client $t:$line"
done

echo "== CLBlast's xaxpy tuner: configurations whose results match =="
for setup in native wormhole; do
  log=$WORK/tuner.$setup.log rc=0
  # The tuner writes its JSON results into the working directory.
  (cd "$WORK" && via "$setup" 600 clblast_tuner_xaxpy -precision 32) > "$log" 2>&1 || rc=$?
  found=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/^\* Found \([0-9]*\) configuration.*/\1/p')
  matched=$(grep -c 'results match' "$log" || true)
  echo "$setup: exit $rc, $matched of ${found:-?} configurations match"
  if [ "$rc" -ne 0 ] || [ -z "$found" ] || [ "$matched" -ne "$found" ]; then status=1; tail -n 10 "$log"; fi
done
echo "== ffmpeg's OpenCL filters: MD5 of the frames, native and through Wormhole =="
filters=("avgblur_opencl=4" "boxblur_opencl=2" "unsharp_opencl" "sobel_opencl" "nlmeans_opencl"
  "transpose_opencl=dir=clock" "pad_opencl=400:300:10:10"
  "convolution_opencl=0 1 0 1 -4 1 0 1 0:0 1 0 1 -4 1 0 1 0:0 1 0 1 -4 1 0 1 0:0 1 0 1 -4 1 0 1 0")
for f in "${filters[@]}"; do
  args=(-hide_banner -loglevel error -init_hw_device opencl=ocl:0.0 -filter_hw_device ocl
    -f lavfi -i testsrc=size=320x240:rate=10 -frames:v 10
    -vf "format=yuv420p,hwupload,$f,hwdownload,format=yuv420p" -f md5 -)
  a=$(via native 300 ffmpeg "${args[@]}" 2>&1 | tail -n 1 || true)
  b=$(via wormhole 300 ffmpeg "${args[@]}" 2>&1 | tail -n 1 || true)
  [[ "$a" == MD5=* ]] || a=""
  same "${f%%=*}" "$a" "$b"
done

echo "== OpenCV's transparent API (UMat): MD5 of each result, native and through Wormhole =="
# Debian's interpreter, which has Debian's cv2; OpenCV's kernel cache in
# the scratch folder (the remoted run loads what the native one cached).
for setup in native wormhole; do
  log=$WORK/opencv.$setup.log rc=0
  OPENCV_OPENCL_DEVICE=:CPU: OPENCV_OPENCL_CACHE_DIR="$WORK/opencv-cache" \
    via "$setup" 300 /usr/bin/python3 tests/apps/opencv_tapi.py > "$log" 2>&1 || rc=$?
  grep -a '^[A-Za-z]*: (' "$log" > "$log.md5" || true
  echo "$setup: exit $rc, $(wc -l < "$log.md5") results"
  if [ "$rc" -ne 0 ]; then tail -n 5 "$log"; status=1; fi
done
if [ -s "$WORK/opencv.native.log.md5" ] && cmp -s "$WORK/opencv.native.log.md5" "$WORK/opencv.wormhole.log.md5"; then
  echo "opencv: the same results both ways"
else
  echo "opencv: results differ:"; diff "$WORK/opencv.native.log.md5" "$WORK/opencv.wormhole.log.md5" || true; status=1
fi

echo "== OpenMM (python3-simtk): molecular dynamics on its OpenCL platform, native and through Wormhole =="
# 200 seeded Langevin steps of OpenMM's own test system with PME; each run
# checks its forces against OpenMM's Reference platform, and the final
# positions and velocities must be bit for bit the same both ways (the
# potential energy is summed in a varying order, so it is shown, not compared).
for setup in native wormhole; do
  log=$WORK/openmm.$setup.log rc=0
  via "$setup" 600 /usr/bin/python3 tests/apps/openmm_md.py > "$log" 2>&1 || rc=$?
  echo "$setup: exit $rc, $(grep -a '^steps' "$log" || echo 'no result')"
  if [ "$rc" -ne 0 ]; then tail -n 5 "$log"; status=1; fi
done
md5of() { grep -a '^steps' "$1" | sed -n 's/.*state md5 //p'; }
a=$(md5of "$WORK/openmm.native.log") b=$(md5of "$WORK/openmm.wormhole.log")
same "openmm's final state" "$a" "$b"

echo "== hcxkeys: WPA master keys computed with OpenCL, against its CPU tool =="
seq -f 'password%05g' 1 2000 > "$WORK/words.txt"
wlangenpmk -e wormhole -i "$WORK/words.txt" -A "$WORK/pmk.cpu" > /dev/null 2>&1
for setup in native wormhole; do
  out=$WORK/pmk.$setup rc=0
  rm -f "$out"
  via "$setup" 300 wlangenpmkocl -e wormhole -i "$WORK/words.txt" -A "$out" > "$out.log" 2>&1 || rc=$?
  # The OpenCL tool writes keys in batch order; the set must be the CPU's.
  if [ "$rc" -eq 0 ] && [ -s "$WORK/pmk.cpu" ] && [ "$(sort "$out" | md5sum)" = "$(sort "$WORK/pmk.cpu" | md5sum)" ]; then
    echo "$setup: $(wc -l < "$out") keys, the same as the CPU tool's"
  else
    echo "$setup: exit $rc, keys differ from the CPU tool's"; tail -n 5 "$out.log"; status=1
  fi
done

echo "== UFO (ufo-filters): image and tomography pipelines, MD5 of the output, native and through Wormhole =="
# Four deterministic 256x256 float frames in; each pipeline's raw output
# must be the same both ways. (Pipelines that need OpenCL images are left
# out: UFO's image format is not supported by PoCL, natively either. So is
# median-filter: it never writes a 2-pixel border of its output, whose
# contents are then whatever the new buffer held.)
UFO=$WORK/ufo
mkdir -p "$UFO"
/usr/bin/python3 -c '
import sys, numpy as np
y, x = np.mgrid[0:256, 0:256]
for i in range(4):
    a = np.sin(x / 17.0 + i) * np.cos(y / 23.0) + 0.001 * ((x * 7919 + y * 104729 + i * 31) % 1000)
    a.astype(np.float32).tofile("%s/in-%03d.raw" % (sys.argv[1], i))
' "$UFO"
pipelines=("blur size=7 sigma=2" "fft dimensions=2 ! ifft dimensions=2 crop-width=256 crop-height=256"
  "fft dimensions=1 ! filter ! ifft dimensions=1" "flip direction=vertical"
  "crop x=10 y=20 width=100 height=90" "binarize threshold=0.2" "gradient direction=both_abs"
  "clip min=-0.5 max=0.5" "power-spectrum" "zeropad oversampling=2" "bin size=2" "denoise"
  "transpose" "measure metric=mean axis=-1" "opencl-reduce kernel=sum" "stack number=2 ! slice number=2"
  "remove-outliers size=3 threshold=0.1")
for p in "${pipelines[@]}"; do
  sums=()
  for setup in native wormhole; do
    d=$UFO/$setup rc=0
    rm -rf "$d" && mkdir -p "$d"
    read -ra words <<< "$p"
    cmd=(ufo-launch -q read "path=$UFO/in-*.raw" raw-width=256 raw-height=256 raw-bitdepth=32 ! "${words[@]}" ! write "filename=$d/out-%03i.raw")
    UFO_DEVICE_TYPE=cpu via "$setup" 300 "${cmd[@]}" > "$d.log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] || ! ls "$d"/out-* > /dev/null 2>&1; then
      sums+=(""); echo "$setup: exit $rc, no output"; tail -n 3 "$d.log"
    else
      sums+=("$(cat "$d"/out-* | md5sum | cut -c1-12)")
    fi
  done
  same "$p" "${sums[0]}" "${sums[1]}"
done

echo "== gpyfft's own test suite (python3-gpyfft: clFFT through pyopencl), native and through Wormhole =="
for setup in native wormhole; do
  log=$WORK/gpyfft.$setup.log rc=0
  gp=(env PYOPENCL_CTX=0 PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m unittest discover
    -s /usr/lib/python3/dist-packages/gpyfft/test -t /usr/lib/python3/dist-packages)
  via "$setup" 600 "${gp[@]}" > "$log" 2>&1 || rc=$?
  ran=$(grep -ao '^Ran [0-9]* tests' "$log" || true)
  echo "$setup: exit $rc, ${ran:-no tests ran}"
  if [ "$rc" -ne 0 ] || [ -z "$ran" ] || ! grep -qx OK "$log"; then tail -n 10 "$log"; status=1; fi
done

echo "== StarPU's examples (starpu-examples) on OpenCL workers only: native vs Wormhole =="
# StarPU drives each device from its own worker thread. Each example checks
# its own result (exit 0), or skips (77) when it has no OpenCL version;
# every one that passes natively must pass through Wormhole.
SP=/usr/lib/x86_64-linux-gnu/starpu/examples
sp=(env STARPU_NCPU=0 STARPU_NCUDA=0 STARPU_NOPENCL=1 STARPU_OPENCL_ON_CPUS=1 STARPU_SILENT=1 STARPU_HOME="$WORK/starpu")
npass=0 wpass=0 ntests=0
for bin in "$SP"/*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  case $bin in *.sh | *.py) continue ;; esac
  t=${bin##*/} nrc=0 wrc=0
  (cd "$WORK" && via native 120 "${sp[@]}" "$bin") > "$WORK/starpu.$t.native.log" 2>&1 || nrc=$?
  (cd "$WORK" && via wormhole 120 "${sp[@]}" "$bin") > "$WORK/starpu.$t.wormhole.log" 2>&1 || wrc=$?
  ntests=$((ntests + 1))
  [ "$nrc" -eq 0 ] && npass=$((npass + 1))
  [ "$wrc" -eq 0 ] && wpass=$((wpass + 1))
  if [ "$nrc" -eq 0 ] && [ "$wrc" -ne 0 ]; then
    echo "$t: passes natively, exit $wrc through Wormhole:"; tail -n 5 "$WORK/starpu.$t.wormhole.log"; status=1
  elif [ "$nrc" -ne "$wrc" ]; then
    echo "$t: exit $nrc natively, $wrc through Wormhole"
  fi
done
echo "StarPU: $npass of $ntests pass natively, $wpass through Wormhole"
[ "$ntests" -gt 50 ] || { echo "StarPU: expected its examples in $SP"; status=1; }

PIG=/usr/lib/x86_64-linux-gnu/piglit/bin
result() { grep -ao '"result": "[a-z]*"' "$1" | tail -n 1 | cut -d'"' -f4; }
# piglit_api NAME ICD: the API tests on the device of ICD, natively and
# through a private Wormhole server on it.
piglit_api() {
  local name=$1 icd=$2 npass=0 wpass=0 ntests=0 bin t n w nr wr
  echo "== piglit's OpenCL API tests on $name: native vs Wormhole =="
  for bin in "$PIG"/cl-api-* "$PIG"/cl-custom-* "$PIG"/cl-program-*; do
    t=${bin##*/}
    # The tester needs a test file; the others run alone.
    [ "$t" = cl-program-tester ] && continue
    n=$WORK/piglit.$name.$t.native.log w=$WORK/piglit.$name.$t.wormhole.log
    (cd "$WORK" && POCL_ICD=$icd via native 300 "$bin") > "$n" 2>&1 || true
    (cd "$WORK" && POCL_ICD=$icd via wormhole 300 "$bin") > "$w" 2>&1 || true
    nr=$(result "$n") wr=$(result "$w")
    ntests=$((ntests + 1))
    [ "$nr" = pass ] && npass=$((npass + 1))
    [ "$wr" = pass ] && wpass=$((wpass + 1))
    if [ "$nr" = pass ] && [ "$wr" != pass ]; then
      echo "$t: passes natively, ${wr:-no result} through Wormhole:"; grep -a -i "fail\|error" "$w" | head -n 10
      status=1
    elif [ "$nr" != "$wr" ]; then
      echo "$t: ${nr:-no result} natively, ${wr:-no result} through Wormhole"
    fi
  done
  echo "piglit on $name: $npass of $ntests pass natively, $wpass through Wormhole"
  [ "$ntests" -gt 40 ] || { echo "piglit: expected its OpenCL tests in $PIG"; status=1; }
}
piglit_api PoCL "$POCL_ICD"
# Another vendor's implementation behind the same server: Oclgrind, a
# simulator (it crashes natively in some tests; those are not compared).
echo /usr/lib/oclgrind/liboclgrind-rt-icd.so > "$WORK/oclgrind.icd"
piglit_api Oclgrind "$WORK/oclgrind.icd"

echo "== piglit's OpenCL program tests: native vs Wormhole =="
PIGT=/usr/lib/x86_64-linux-gnu/piglit
dirs=("$PIGT/tests/cl/program")
[ "${1:-}" = --all ] && dirs+=("$PIGT/generated_tests/cl")
npass=0 wpass=0 ntests=0
while IFS= read -r f; do
  n=$WORK/piglit-program.native.log w=$WORK/piglit-program.wormhole.log
  (cd "$WORK" && via native 120 "$PIG/cl-program-tester" "$f") > "$n" 2>&1 || true
  (cd "$WORK" && via wormhole 120 "$PIG/cl-program-tester" "$f") > "$w" 2>&1 || true
  nr=$(result "$n") wr=$(result "$w")
  ntests=$((ntests + 1))
  [ "$nr" = pass ] && npass=$((npass + 1))
  [ "$wr" = pass ] && wpass=$((wpass + 1))
  if [ "$nr" = pass ] && [ "$wr" != pass ]; then
    echo "${f#"$PIGT"/}: passes natively, ${wr:-no result} through Wormhole:"; grep -a -i "fail\|error" "$w" | head -n 10
    status=1
  elif [ "$nr" != "$wr" ]; then
    echo "${f#"$PIGT"/}: ${nr:-no result} natively, ${wr:-no result} through Wormhole"
  fi
done < <(find "${dirs[@]}" \( -name '*.cl' -o -name '*.program_test' \) | sort)
echo "piglit programs: $npass of $ntests pass natively, $wpass through Wormhole"
[ "$ntests" -gt 100 ] || { echo "piglit: expected its program tests under $PIGT"; status=1; }
exit $status
