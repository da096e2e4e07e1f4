//! libcublasLt.so.13: put it ahead of NVIDIA's on the library path (or
//! preload it) next to Wormhole's libcudart.so.13. Each entry point jumps
//! to the client in the libcudart stand-in, which keeps the descriptors
//! and sends matmuls to the server (see `cublaslt.api`); NVIDIA's library,
//! in a client without the device, would crash on its first matmul.

use wormhole_cuda_forward::lt::{fallback_status, fallback_version};

wormhole_cuda_forward::stand_in!(wormhole_cuda_api::forward::LT, &["libcudart.so.13"], 13);
