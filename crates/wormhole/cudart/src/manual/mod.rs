//! The hand-written side of the description: its `manual` and
//! `client-only` functions, with the C signatures the description gives
//! them (and their C names, hence the allowance), one module per concern.
//! The generated stubs reach them all as `overrides::NAME` (the path
//! apigen writes), which this module's re-exports answer.
#![allow(non_snake_case)]

pub mod copies;
pub mod devices;
pub mod errors;
pub mod host_memory;
pub mod kernels;
pub mod launches;
pub mod mem3d;
pub mod memory;
pub mod pools;
pub mod refused;
pub mod registration;
pub mod streams;
pub mod symbols;
pub mod versions;

pub use copies::*;
pub use devices::*;
pub use errors::*;
pub use host_memory::{
    cudaFreeHost, cudaHostAlloc, cudaHostRegister, cudaHostUnregister, cudaMallocHost,
};
pub use kernels::*;
pub use launches::*;
pub use mem3d::{cudaMalloc3D, cudaMemcpy3D, cudaMemcpy3DAsync, cudaMemset3D, cudaMemset3DAsync};
pub use memory::*;
pub use pools::{
    cudaDeviceGetDefaultMemPool, cudaMemPoolGetAttribute, cudaMemPoolSetAccess,
    cudaMemPoolSetAttribute, cudaMemPoolTrimTo,
};
pub use refused::*;
pub use registration::*;
pub use streams::*;
pub use symbols::*;
pub use versions::*;

use crate::state::note;

/// A call's status, recorded as the last error (`Err`: the status of a
/// failure before or in the exchange).
fn status_of(result: Result<i32, i32>) -> i32 {
    match result {
        Ok(status) | Err(status) => note(status),
    }
}

/// Writes `value` through `p` unless it is NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of a `T`.
unsafe fn put<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: non-NULL, and by this function's contract then valid
        // for a write of a `T`.
        unsafe { p.write(value) };
    }
}
