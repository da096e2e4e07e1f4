//! The cuBLAS, cuBLASLt, cuRAND and cuSOLVER request path: arbitrary
//! bytes as the arguments of an arbitrary function of theirs (chosen by
//! the first two bytes; cuBLASLt's matmul carries its descriptors and
//! layouts whole), decoded, checked and dispatched by a CUDA tenant seeded
//! with a device allocation, a cuBLAS handle, a cuRAND generator, a
//! cuSOLVER handle, parameters and SVD settings, and a stream, so that
//! valid ids and addresses exist. No library is ever loaded (the seeded
//! handles are stand-ins): a request that passes every check reaches the
//! missing library and is answered as without a driver. What must hold:
//! no panic (the extent arithmetic's overflows included), no hang. That
//! the checks cover every extent is what the unit tests assert.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wormhole_server::cuda::{self, loader, CudaTenant};
use wormhole_wire::{Decoder, Encoder};

const BASE: u64 = 0x7000_0000;

fuzz_target!(|data: &[u8]| {
    loader::forbid_libraries();
    let Some((sel, args)) = data.split_first_chunk::<2>() else {
        return;
    };
    let blas = wormhole_cuda_api::blas::FUNC_NAMES.len() as u32;
    let rand = wormhole_cuda_api::rand::FUNC_NAMES.len() as u32;
    let lt = wormhole_cuda_api::lt::FUNC_NAMES.len() as u32;
    let solver = wormhole_cuda_api::solver::FUNC_NAMES.len() as u32;
    let n = u32::from(u16::from_le_bytes(*sel)) % (blas + rand + lt + solver);
    let func = if n < blas {
        wormhole_cuda_api::blas::func::cublasCreate_v2 + n
    } else if n < blas + rand {
        wormhole_cuda_api::rand::func::curandCreateGenerator + (n - blas)
    } else if n < blas + rand + lt {
        wormhole_cuda_api::lt::func::cublasLtGetVersion + (n - blas - rand)
    } else {
        wormhole_cuda_api::solver::func::cusolverDnCreate + (n - blas - rand - lt)
    };
    let mut t = CudaTenant::new(1 << 20);
    let _ = t.allocs.insert(wormhole_cuda_api::tracker::Alloc {
        start: BASE,
        size: 4096,
        device: 0,
    });
    t.insert_handle(0x100, wormhole_cuda_api::Kind::Cublas, 0x1000);
    t.insert_handle(0x101, wormhole_cuda_api::Kind::Curand, 0x2000);
    t.insert_handle(0x102, wormhole_cuda_api::Kind::Stream, 0x3000);
    t.insert_handle(0x103, wormhole_cuda_api::Kind::Cusolver, 0x4000);
    t.insert_handle(0x104, wormhole_cuda_api::Kind::CusolverParams, 0x5000);
    t.insert_handle(0x105, wormhole_cuda_api::Kind::GesvdjInfo, 0x6000);
    let mut e = Encoder::new();
    let _ = cuda::dispatch(&mut t, func, &mut Decoder::new(args), &mut e);
});
