//! Kernel queries and settings (attributes, cache configuration,
//! occupancy), a kernel named to the server by its host stub's address.

use std::ffi::c_void;

use wormhole_cuda_api::*;

use super::registration::is_registered;
use super::status_of;
use crate::call::Call;
use crate::state::note;

/// A kernel is named to the server by its host stub's address, which must
/// have been registered.
fn kernel_call(f: u32, kernel: *const c_void) -> Result<Call<'static>, i32> {
    let id = kernel as usize as u64;
    if !is_registered(id) {
        return Err(cudaErrorInvalidDeviceFunction);
    }
    let mut c = Call::begin(f)?;
    c.enc.u64(id);
    Ok(c)
}

/// # Safety
/// `attr` is NULL or a writable `struct cudaFuncAttributes`.
pub unsafe extern "C" fn cudaFuncGetAttributes(attr: *mut c_void, kernel: *const c_void) -> i32 {
    if attr.is_null() {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let c = kernel_call(func::cudaFuncGetAttributes, kernel)?;
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            let b = r.with(|d| d.bytes().map(<[u8]>::to_vec).map_err(|_| cudaErrorUnknown))?;
            if b.len() != FUNC_ATTRIBUTES_LEN {
                return Err(cudaErrorUnknown);
            }
            // SAFETY: `attr` is non-NULL (checked on entry) and a writable
            // `struct cudaFuncAttributes` (cudaFuncGetAttributes's
            // contract), which is FUNC_ATTRIBUTES_LEN = `b.len()` bytes.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), attr.cast::<u8>(), b.len()) };
        }
        Ok(status)
    })())
}

pub extern "C" fn cudaFuncSetAttribute(kernel: *const c_void, attr: i32, value: i32) -> i32 {
    status_of((|| {
        let mut c = kernel_call(func::cudaFuncSetAttribute, kernel)?;
        c.enc.i32(attr);
        c.enc.i32(value);
        Ok(c.finish()?.status())
    })())
}

pub extern "C" fn cudaFuncSetCacheConfig(kernel: *const c_void, config: i32) -> i32 {
    status_of((|| {
        let mut c = kernel_call(func::cudaFuncSetCacheConfig, kernel)?;
        c.enc.i32(config);
        Ok(c.finish()?.status())
    })())
}

/// # Safety
/// `blocks` is NULL or writable.
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut i32,
    kernel: *const c_void,
    block_size: i32,
    shared: usize,
) -> i32 {
    // SAFETY: `blocks` is NULL or writable, this function's own contract,
    // which is the one below; no flags is cudaOccupancyDefault (0), as
    // natively.
    unsafe {
        cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            blocks, kernel, block_size, shared, 0,
        )
    }
}

/// # Safety
/// `blocks` is NULL or writable.
pub unsafe extern "C" fn cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut i32,
    kernel: *const c_void,
    block_size: i32,
    shared: usize,
    flags: u32,
) -> i32 {
    if blocks.is_null() {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let f = func::cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags;
        let mut c = kernel_call(f, kernel)?;
        c.enc.i32(block_size);
        c.enc.u64(shared as u64);
        c.enc.u32(flags);
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            let n = r.with(|d| d.i32().map_err(|_| cudaErrorUnknown))?;
            // SAFETY: `blocks` was checked non-NULL above, and a non-NULL
            // one is writable by this function's contract (cudaOccupancy's:
            // an int the runtime stores the count in).
            unsafe { *blocks = n };
        }
        Ok(status)
    })())
}
