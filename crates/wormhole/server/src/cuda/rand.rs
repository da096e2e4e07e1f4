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
use wormhole_wire::{Decoder, Encoder, WireError};

use super::libs::LibTenant as Tenant;
use super::loader::{Loader, Sonames};

/// What a call answers without the library.
pub const NO_LIBRARY: i32 = CURAND_STATUS_INITIALIZATION_FAILED;

/// A malformed request.
pub fn bad(_: WireError) -> i32 {
    CURAND_STATUS_OUT_OF_RANGE
}

generated_library!("rand_server_gen.rs", checks as rand);

static CURAND: Loader<ffi::Table> = Loader::new(Sonames::Fixed(&["libcurand.so.10"]), |symbols| {
    // SAFETY: `symbols` are libcurand's, whose functions have the
    // signatures curand.api describes (from its headers).
    unsafe { ffi::Table::load(&|name| symbols.address(name)) }
});

fn table() -> &'static ffi::Table {
    CURAND.get()
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
