//! libcusolver.so.12 (CUDA 13), forwarded: put it ahead of NVIDIA's on the
//! library path next to Wormhole's libcudart.so.13. Every function jumps to
//! the CUDA client in that library (see wormhole-cuda-forward), so cuSOLVER
//! calls share its connection, handles, streams and device allocations.

use wormhole_cuda_forward::solver::fallback_status;

wormhole_cuda_forward::stand_in!(wormhole_cuda_api::forward::SOLVER, &["libcudart.so.13"], 13);
