//! The cuRAND backend: decoders generated from `curand.api` and the
//! output check it names. libcurand.so.10 is opened at run time; where it
//! is missing every call answers as cuRAND does without a driver
//! (CURAND_STATUS_INITIALIZATION_FAILED: no generator can be created).

use std::ffi::c_void;

use wormhole_cuda_api::rand::{
    func, CURAND_STATUS_INITIALIZATION_FAILED, CURAND_STATUS_NOT_INITIALIZED,
    CURAND_STATUS_OUT_OF_RANGE, CURAND_STATUS_SUCCESS,
};
use wormhole_cuda_api::Kind;
use wormhole_wire::{Decoder, Encoder};

use super::libs::LibTenant as Tenant;
use super::loader::Sonames;

library_backend! {
    generated: "rand_server_gen.rs", checks as rand;
    library: CURAND = Sonames::Fixed(&["libcurand.so.10"]);
    statuses: CURAND_STATUS_INITIALIZATION_FAILED, CURAND_STATUS_OUT_OF_RANGE;
}

/// Nothing is hand-written on the server.
pub mod custom {}
pub mod overrides {}

/// The check `curand.api` names: outputs must be the tenant's.
pub mod checks {
    use super::*;

    pub fn span(t: &Tenant, p: *mut c_void, n: usize, elem: u64) -> Result<(), i32> {
        let bytes = wormhole_cuda_api::extent::span(n as u64, elem)
            .map_err(|_| CURAND_STATUS_OUT_OF_RANGE)?;
        t.owned(p, bytes)
    }
}
