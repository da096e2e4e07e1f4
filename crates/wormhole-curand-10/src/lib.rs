//! libcurand.so.10, forwarded: put it ahead of NVIDIA's on the library
//! path next to Wormhole's libcudart.so.13 or .12 (one soname serves both
//! majors, so the client is looked for in whichever is loaded, 13 first;
//! see wormhole-cuda-forward). cuRAND calls share that library's
//! connection, handles and device allocations.

use wormhole_cuda_forward::rand::fallback_status;

wormhole_cuda_forward::stand_in!(
    wormhole_cuda_api::forward::RAND,
    &["libcudart.so.13", "libcudart.so.12"],
    10
);
