//! The forwarders and their exports, versioned libcublas.so.12.
fn main() {
    wormhole_apigen::build_forwarding_stand_in(
        "cublas.api",
        wormhole_cuda_api::BLAS_DESCRIPTION,
        "libcublas.so.12",
    );
}
