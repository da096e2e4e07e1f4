//! libcublas.so.13, forwarded: put it (as `libcublas.so.13`) ahead of
//! NVIDIA's on the library path next to Wormhole's libcudart.so.13. Every
//! function jumps to the CUDA client in that library (see
//! wormhole-cuda-forward), so cuBLAS calls share its connection, handles
//! and device allocations.

use wormhole_cuda_forward::blas::{fallback_errstr, fallback_status};
use wormhole_cuda_forward::Forward;

include!(concat!(env!("OUT_DIR"), "/forward.rs"));

static FORWARD: Forward = Forward::new(
    wormhole_cuda_api::forward::BLAS,
    FINGERPRINT,
    FORWARD_LEN,
    &["libcudart.so.13"],
);

fn table(i: usize) -> Option<usize> {
    FORWARD.entry(i)
}

/// Present only in Wormhole's stand-ins, so a server never loads one as
/// NVIDIA's library.
#[no_mangle]
pub static wormhole_cudart_stub: u32 = 13;
