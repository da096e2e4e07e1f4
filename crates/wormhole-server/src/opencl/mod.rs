//! The OpenCL backend: generated decoders plus the hand-written pieces the
//! description names (custom arguments, overrides, callbacks).
//!
//! Raw pointers that functions here take are opaque OpenCL handles from a
//! tenant's table (or from the library itself), which we pass to the
//! library and never dereference, hence the allowance below.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod callbacks;
pub mod custom;
pub mod overrides;
pub mod tenant;

use std::ffi::c_void;

use wormhole_opencl_api::{func, CallbackKind, Kind, CL_INVALID_OPERATION, CL_SUCCESS};
use wormhole_wire::{Decoder, Encoder};

use tenant::{
    bad, check_count, check_len, cstr, opt_cstr, opt_mut_ptr, opt_mut_vec_ptr, opt_ptr,
    opt_vec_ptr, Tenant,
};

include!(concat!(env!("OUT_DIR"), "/server_gen.rs"));

// What `server=` expressions in the description use.

/// Transfers into or out of a request or reply buffer must complete before
/// the buffer is reused, so the server always runs them blocking; the
/// events they return are then already complete.
const CL_TRUE: u32 = 1;

/// A rectangular transfer's host window starts at the client's host origin,
/// so the library sees a zero origin into it.
const ZERO_ORIGIN: [usize; 3] = [0, 0, 0];

/// The client cannot lend us its memory, so a memory object that would use
/// the host pointer copies it instead; the client keeps the pointer's
/// semantics where it can (maps return it). A combination the API forbids
/// (USE with ALLOC or COPY) goes through unchanged so that the library
/// rejects it as it would natively.
fn host_flags(flags: u64) -> u64 {
    use wormhole_opencl_api::{CL_MEM_ALLOC_HOST_PTR, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
    let exclusive = CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;
    if flags & CL_MEM_USE_HOST_PTR != 0 && flags & exclusive == 0 {
        (flags & !CL_MEM_USE_HOST_PTR) | CL_MEM_COPY_HOST_PTR
    } else {
        flags
    }
}

/// Takes a reference on an object the tenant's table will hold.
pub fn retain_real(kind: Kind, raw: *mut c_void) {
    // SAFETY: `raw` is a live handle of `kind` that the library just gave us.
    unsafe {
        match kind {
            Kind::Context => ffi::clRetainContext(raw),
            Kind::Queue => ffi::clRetainCommandQueue(raw),
            Kind::Mem => ffi::clRetainMemObject(raw),
            Kind::Program => ffi::clRetainProgram(raw),
            Kind::Kernel => ffi::clRetainKernel(raw),
            Kind::Event => ffi::clRetainEvent(raw),
            Kind::Sampler => ffi::clRetainSampler(raw),
            Kind::Platform | Kind::Device => CL_SUCCESS,
        };
    }
}

const CL_PLATFORM_NAME: u32 = 0x0902;

/// The platforms to export: all, or those whose name contains one of
/// `filters`.
pub fn platforms(filters: &[String]) -> Vec<*mut c_void> {
    let mut n = 0u32;
    // SAFETY: valid out-pointer; no array requested.
    if unsafe { ffi::clGetPlatformIDs(0, std::ptr::null_mut(), &mut n) } != CL_SUCCESS || n == 0 {
        return Vec::new();
    }
    let mut v = vec![std::ptr::null_mut(); n as usize];
    // SAFETY: room for `n` handles.
    if unsafe { ffi::clGetPlatformIDs(n, v.as_mut_ptr(), std::ptr::null_mut()) } != CL_SUCCESS {
        return Vec::new();
    }
    v.into_iter()
        .filter(|&p| {
            filters.is_empty()
                || filters
                    .iter()
                    .any(|f| platform_name(p).contains(f.as_str()))
        })
        .collect()
}

pub fn platform_name(p: *mut c_void) -> String {
    let mut buf = vec![0u8; 1024];
    let mut len = 0usize;
    // SAFETY: buffer of the size passed.
    let s = unsafe {
        ffi::clGetPlatformInfo(
            p,
            CL_PLATFORM_NAME,
            buf.len(),
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if s != CL_SUCCESS {
        return String::new();
    }
    buf.truncate(len.saturating_sub(1).min(buf.len()));
    String::from_utf8_lossy(&buf).into_owned()
}
