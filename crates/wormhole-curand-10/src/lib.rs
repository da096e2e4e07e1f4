//! libcurand.so.10, forwarded: put it ahead of NVIDIA's on the library
//! path next to Wormhole's libcudart.so.13 or .12 (one soname serves both
//! majors, so the client is looked for in whichever is loaded, 13 first;
//! see wormhole-cuda-forward). cuRAND calls share that library's
//! connection, handles and device allocations.

use wormhole_cuda_forward::rand::fallback_status;
use wormhole_cuda_forward::Forward;

include!(concat!(env!("OUT_DIR"), "/forward.rs"));

static FORWARD: Forward = Forward::new(
    wormhole_cuda_api::forward::RAND,
    FINGERPRINT,
    FORWARD_LEN,
    &["libcudart.so.13", "libcudart.so.12"],
);

fn table(i: usize) -> Option<usize> {
    FORWARD.entry(i)
}

/// Present only in Wormhole's stand-ins, so a server never loads one as
/// NVIDIA's library.
#[no_mangle]
pub static wormhole_cudart_stub: u32 = 10;
