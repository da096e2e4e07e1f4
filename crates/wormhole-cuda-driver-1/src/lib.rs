//! libcuda.so.1 for a client without the NVIDIA driver: put it on the
//! library path next to Wormhole's libcudart.so.13 or .12. It answers the
//! few driver calls a framework makes itself (PyTorch: a device's primary
//! context state, the current context) from the libcudart stand-in's one
//! client (see `driver.api` and wormhole-cudart's `driver` module); every
//! other driver function is missing. Where the machine has NVIDIA's
//! driver, use that instead: this library does not forward the driver API.

use wormhole_cuda_forward::driver::fallback_status;

wormhole_cuda_forward::stand_in!(
    wormhole_cuda_api::forward::DRIVER,
    &["libcudart.so.13", "libcudart.so.12"],
    1
);
