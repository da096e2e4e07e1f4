//! libcuda.so.1 for a client without the NVIDIA driver: put it on the
//! library path next to Wormhole's libcudart.so.13 or .12. It answers the
//! few driver calls a framework makes itself (PyTorch: a device's primary
//! context state, the current context) from the libcudart stand-in's one
//! client (see `driver.api` and wormhole-cudart's `driver` module); every
//! other driver function is missing. Where the machine has NVIDIA's
//! driver, use that instead: this library does not forward the driver API.

use wormhole_cuda_forward::driver::fallback_status;
use wormhole_cuda_forward::Forward;

include!(concat!(env!("OUT_DIR"), "/forward.rs"));

static FORWARD: Forward = Forward::new(
    wormhole_cuda_api::forward::DRIVER,
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
pub static wormhole_cudart_stub: u32 = 1;
