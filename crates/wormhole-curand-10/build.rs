//! The forwarders and their exports, versioned libcurand.so.10.
fn main() {
    wormhole_apigen::build_forwarding_stand_in(
        "curand.api",
        wormhole_cuda_api::RAND_DESCRIPTION,
        "libcurand.so.10",
    );
}
