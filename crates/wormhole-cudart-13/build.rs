//! The ELF exports: every described function under its CUDA name with the
//! symbol version libcudart.so.13, and that soname.
fn main() {
    // Never unloaded: the exit report (WORMHOLE_LOG) is registered with
    // atexit, and the connection's state must outlive any dlclose.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    wormhole_apigen::build_client_stand_in(
        "cuda.api",
        wormhole_cuda_api::DESCRIPTION,
        "wormhole_cudart",
        "libcudart.so.13",
    );
}
