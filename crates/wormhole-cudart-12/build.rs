//! The ELF exports: every described function under its CUDA name with the
//! symbol version libcudart.so.12, and that soname.
fn main() {
    wormhole_apigen::build_client_stand_in(
        "cuda.api",
        wormhole_cuda_api::DESCRIPTION,
        "wormhole_cudart",
        "libcudart.so.12",
    );
}
