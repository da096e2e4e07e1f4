//! libcudart.so.12, forwarded: link or load this library under that name
//! (`ln -s libwormhole_cudart12.so libcudart.so.12`) ahead of NVIDIA's on
//! the library path, and programs built with CUDA 12's shared runtime run
//! through a Wormhole server. All the logic is in `wormhole-cudart`; this
//! crate adds the exports (see build.rs) and says which version it is.

include!(concat!(env!("OUT_DIR"), "/exports.rs"));

/// Present only in Wormhole's stand-ins, so a server never mistakes one
/// for the real runtime it should load.
#[no_mangle]
pub static wormhole_cudart_stub: u32 = 12;

extern "C" fn init() {
    wormhole_cudart::MAJOR.store(12, std::sync::atomic::Ordering::Relaxed);
}

/// Runs when the library is loaded, before the program's own constructors
/// (which register its kernels).
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
