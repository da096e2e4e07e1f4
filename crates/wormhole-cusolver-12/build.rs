//! The forwarders and their exports, versioned libcusolver.so.12.
fn main() {
    wormhole_apigen::build_forwarding_stand_in(
        "cusolver.api",
        wormhole_cuda_api::SOLVER_DESCRIPTION,
        "libcusolver.so.12",
    );
}
