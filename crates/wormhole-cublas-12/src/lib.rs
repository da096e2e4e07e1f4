//! libcublas.so.12, forwarded: put it (as `libcublas.so.12`) ahead of
//! NVIDIA's on the library path next to Wormhole's libcudart.so.12. Every
//! function jumps to the CUDA client in that library (see
//! wormhole-cuda-forward), so cuBLAS calls share its connection, handles
//! and device allocations.

use wormhole_cuda_forward::blas::{fallback_errstr, fallback_status};

wormhole_cuda_forward::stand_in!(wormhole_cuda_api::forward::BLAS, &["libcudart.so.12"], 12);
