//! The forwarders and their exports, versioned libcuda.so.1.
fn main() {
    wormhole_apigen::build_forwarding_stand_in(
        "driver.api",
        wormhole_cuda_api::DRIVER_DESCRIPTION,
        "libcuda.so.1",
    );
}
