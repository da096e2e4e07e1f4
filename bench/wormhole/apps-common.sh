# Sourced by the benchmarks of real programs (clblast.sh, openmm.sh), from
# the repository root: installs PACKAGES beside PoCL, builds the release
# client and server, and sets root, out (created), run (wormhole-run) and
# POCL_ICD.
#
#   bench_setup PACKAGE...
bench_setup() {
  root=$PWD
  out=$root/bench/out
  mkdir -p "$out"
  scripts/need-packages.sh pocl-opencl-icd ocl-icd-opencl-dev "$@"
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
  cargo build --release -q -p wormhole-server -p wormhole-opencl-icd -p wormhole-run
  run=${CARGO_TARGET_DIR:-$root/target}/release/wormhole-run
  POCL_ICD=${POCL_ICD:-/etc/OpenCL/vendors/pocl.icd}
}
