//! The build script every stand-in shares: what it builds (exports,
//! soname, symbol versions, documentation) is its package's row of the
//! table in `wormhole-cuda-stand-ins`.
fn main() {
    wormhole_cuda_stand_ins::build_script();
}
