//! The forwarders and their exports, versioned libcublasLt.so.13.
fn main() {
    wormhole_apigen::build_forwarding_stand_in(
        "cublaslt.api",
        wormhole_cuda_api::LT_DESCRIPTION,
        "libcublasLt.so.13",
    );
}
