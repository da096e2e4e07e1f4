//! libcublasLt.so.13, refused: put it ahead of NVIDIA's on the library
//! path (or preload it) next to Wormhole's libcudart.so.13. Wormhole does
//! not forward cuBLASLt yet, and NVIDIA's library, in a client without the
//! device, crashes on its first matmul; each entry point here answers
//! CUBLAS_STATUS_NOT_SUPPORTED instead (see `cublaslt.api`).

use wormhole_cuda_forward::lt::{fallback_status, fallback_version};

wormhole_cuda_forward::stand_in!(wormhole_cuda_api::forward::LT, &["libcudart.so.13"], 13);
