//! The OpenCL backend: generated decoders plus the hand-written pieces the
//! description names (custom arguments, overrides, callbacks).
//!
//! Raw pointers that functions here take are opaque OpenCL handles from a
//! tenant's table (or from the library itself), which we pass to the
//! library and never dereference, hence the allowance below.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod args;
pub mod builds;
pub mod bulk;
pub mod callbacks;
pub mod custom;
pub mod extents;
pub mod finish;
pub mod includes;
pub mod launch;
pub mod maps;
pub mod objects;
pub mod offered;
pub mod overrides;
pub mod pending_maps;
pub mod programs;
pub mod queries;
pub mod quota;
pub mod retry;
pub mod shared;
pub mod tenant;
pub mod transfers;
pub mod waits;

use std::ffi::c_void;

use wormhole_opencl_api::{
    func, CallbackKind, Kind, CL_EVENT_COMMAND_EXECUTION_STATUS, CL_EVENT_COMMAND_TYPE,
    CL_INVALID_OPERATION, CL_INVALID_VALUE, CL_PLATFORM_NAME, CL_SUCCESS,
};

/// `num_events_in_wait_list` > 0 with no list.
const CL_INVALID_EVENT_WAIT_LIST: i32 = -57;
use wormhole_wire::{Decoder, Encoder};

use custom::NoReply;

use tenant::{
    bad, check_count, check_len, cstr, opt_cstr, opt_mut_ptr, opt_mut_vec_ptr, opt_ptr,
    opt_vec_ptr, Tenant,
};

include!(concat!(env!("OUT_DIR"), "/server_gen.rs"));

// What `server=` expressions in the description use.

// Transfers into or out of a request or reply buffer must complete before
// the buffer is reused, so the server always runs them blocking (CL_TRUE);
// the events they return are then already complete.
use wormhole_opencl_api::CL_TRUE;

/// A rectangular transfer's host window starts at the client's host origin,
/// so the library sees a zero origin into it.
const ZERO_ORIGIN: [usize; 3] = [0, 0, 0];

/// The client cannot lend us its memory, so a memory object that would use
/// the host pointer copies it instead; the client keeps the pointer's
/// semantics where it can (maps return it). A combination the API forbids
/// (USE with ALLOC or COPY) goes through unchanged so that the library
/// rejects it as it would natively.
pub(crate) fn host_flags(flags: u64) -> u64 {
    use wormhole_opencl_api::{CL_MEM_ALLOC_HOST_PTR, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
    let exclusive = CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;
    if flags & CL_MEM_USE_HOST_PTR != 0 && flags & exclusive == 0 {
        (flags & !CL_MEM_USE_HOST_PTR) | CL_MEM_COPY_HOST_PTR
    } else {
        flags
    }
}

const CL_COMMAND_USER: u32 = 0x1204;

/// The blocking flag the server uses for a transfer it must perform
/// blocking (its data travels with the request or the reply). A transfer
/// the application asked for without blocking, gated on a user event that
/// is not yet complete, would block the tenant for good: the event's
/// status can only be set by a later request, which the blocked tenant
/// never reads. Such a transfer fails with CL_INVALID_OPERATION instead of
/// hanging (docs/wormhole-opencl.md, "Differences from native").
pub fn server_blocking(requested: u32, wait_list: &Option<Vec<*mut c_void>>) -> Result<u32, i32> {
    if requested == 0
        && wait_list
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .any(|&e| is_open_user_event(e))
    {
        log::warn!("a non-blocking transfer waits for an incomplete user event: refused");
        return Err(CL_INVALID_OPERATION);
    }
    Ok(CL_TRUE)
}

/// The blocking flag for a buffer write, whose data the server can keep
/// past the request (`transfers::clEnqueueWriteBuffer`): the application's
/// own, after the same refusal as [`server_blocking`] makes.
pub fn write_blocking(requested: u32, wait_list: &Option<Vec<*mut c_void>>) -> Result<u32, i32> {
    server_blocking(requested, wait_list)?;
    Ok(requested)
}

/// What every `clGet*Info` function of the library looks like.
pub type InfoFn = unsafe extern "C" fn(*mut c_void, u32, usize, *mut c_void, *mut usize) -> i32;

/// One fixed-size answer of an info query, if the library gives it.
///
/// # Safety
/// `obj` is an object `f` takes (from a tenant's table or the library), and
/// `T` is the type the API gives `param`.
pub unsafe fn info_value<T: Copy + Default>(f: InfoFn, obj: *mut c_void, param: u32) -> Option<T> {
    let mut v = T::default();
    let size = std::mem::size_of::<T>();
    // SAFETY: `obj` is an object `f` takes and `T` the type the API gives
    // `param` (this function's contract), so the answer has `size` bytes,
    // written into `v`.
    let s = unsafe {
        f(
            obj,
            param,
            size,
            (&mut v as *mut T).cast(),
            std::ptr::null_mut(),
        )
    };
    (s == CL_SUCCESS).then_some(v)
}

/// Whether `e` is a user event whose status has not been set yet.
pub fn is_open_user_event(e: *mut c_void) -> bool {
    // SAFETY: `e` came from the tenant's table (checked by kind); the
    // values are a cl_command_type and a cl_int.
    let (ty, st) = unsafe {
        (
            info_value::<u32>(ffi::clGetEventInfo, e, CL_EVENT_COMMAND_TYPE),
            info_value::<i32>(ffi::clGetEventInfo, e, CL_EVENT_COMMAND_EXECUTION_STATUS),
        )
    };
    ty == Some(CL_COMMAND_USER) && st.is_some_and(|s| s > 0)
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

/// Drops one reference on an object (the inverse of [`retain_real`]).
///
/// # Safety
/// `raw` is a live handle of `kind` on which the caller holds a reference.
pub unsafe fn release_real(kind: Kind, raw: *mut c_void) {
    // SAFETY: `raw` is a live handle of `kind` and the caller gives up a
    // reference it holds on it (this function's contract), so the release
    // cannot free an object someone else still uses through us.
    unsafe {
        match kind {
            Kind::Context => ffi::clReleaseContext(raw),
            Kind::Queue => ffi::clReleaseCommandQueue(raw),
            Kind::Mem => ffi::clReleaseMemObject(raw),
            Kind::Program => ffi::clReleaseProgram(raw),
            Kind::Kernel => ffi::clReleaseKernel(raw),
            Kind::Event => ffi::clReleaseEvent(raw),
            Kind::Sampler => ffi::clReleaseSampler(raw),
            Kind::Device => ffi::clReleaseDevice(raw),
            Kind::Platform => CL_SUCCESS,
        };
    }
}

/// The library's reference count of an object (0 when it cannot say).
///
/// # Safety
/// `raw` is a live handle of `kind`.
pub unsafe fn refcount(kind: Kind, raw: *mut c_void) -> u32 {
    let mut n = 0u32;
    let size = std::mem::size_of::<u32>();
    let out = &mut n as *mut u32 as *mut c_void;
    let null = std::ptr::null_mut();
    // SAFETY: `raw` is a live handle of `kind` (this function's contract),
    // queried with its own kind's function; `n` is a cl_uint.
    unsafe {
        match kind {
            Kind::Context => ffi::clGetContextInfo(raw, 0x1080, size, out, null),
            Kind::Queue => ffi::clGetCommandQueueInfo(raw, 0x1092, size, out, null),
            Kind::Mem => ffi::clGetMemObjectInfo(raw, 0x1105, size, out, null),
            Kind::Program => ffi::clGetProgramInfo(raw, 0x1160, size, out, null),
            Kind::Kernel => ffi::clGetKernelInfo(raw, 0x1192, size, out, null),
            Kind::Event => ffi::clGetEventInfo(raw, 0x11D2, size, out, null),
            Kind::Sampler => ffi::clGetSamplerInfo(raw, 0x1150, size, out, null),
            Kind::Device => ffi::clGetDeviceInfo(raw, 0x1047, size, out, null),
            Kind::Platform => CL_SUCCESS,
        };
    }
    n
}

/// The largest global memory of the devices of `platforms` (0 for none):
/// what a tenant's memory quota is by default (`tenant_memory`).
pub fn largest_device_memory(platforms: &[*mut c_void]) -> u64 {
    const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;
    let mut largest = 0;
    for &p in platforms {
        let mut devices = [std::ptr::null_mut(); 64];
        let mut n = 0u32;
        // SAFETY: room for 64 device handles, as passed.
        let s = unsafe {
            ffi::clGetDeviceIDs(p, u64::from(u32::MAX), 64, devices.as_mut_ptr(), &mut n)
        };
        if s != CL_SUCCESS {
            continue;
        }
        for &d in devices.iter().take(n as usize) {
            // SAFETY: a device the library just named; the answer is one
            // cl_ulong.
            let bytes =
                unsafe { info_value::<u64>(ffi::clGetDeviceInfo, d, CL_DEVICE_GLOBAL_MEM_SIZE) };
            largest = largest.max(bytes.unwrap_or(0));
        }
    }
    largest
}

/// A context and an in-order queue on the first platform's first device,
/// made natively: what the fuzz harness and the in-process benchmarks run
/// a tenant's code on. They live until the process ends.
pub struct FirstDevice {
    /// Every platform the server would load (a tenant table wants them).
    pub platforms: Vec<*mut c_void>,
    pub device: *mut c_void,
    pub context: *mut c_void,
    pub queue: *mut c_void,
}

/// Why [`first_device`] could not make its objects.
#[derive(Debug, thiserror::Error)]
pub enum FirstDeviceError {
    #[error("no OpenCL platform with a device")]
    NoPlatform,
    #[error("{0} failed with {1}")]
    Call(&'static str, i32),
}

/// Makes a [`FirstDevice`].
pub fn first_device() -> Result<FirstDevice, FirstDeviceError> {
    let check = |what, s| match s {
        CL_SUCCESS => Ok(()),
        _ => Err(FirstDeviceError::Call(what, s)),
    };
    let platforms = platforms(&[]);
    let platform = *platforms.first().ok_or(FirstDeviceError::NoPlatform)?;
    let mut device = std::ptr::null_mut();
    // SAFETY: `platform` is one the ICD loader listed; `device` is room for the one handle asked
    // for (every device type), and the count pointer may be NULL.
    let s =
        unsafe { ffi::clGetDeviceIDs(platform, u64::MAX, 1, &mut device, std::ptr::null_mut()) };
    check("clGetDeviceIDs", s)?;
    let mut err = 0;
    // SAFETY: `&device` is an array of the one device just returned (the count passed); no
    // properties and no callback, so the NULL pointers are the spec's "none"; `err` is a live
    // out-parameter.
    let context = unsafe {
        ffi::clCreateContext(
            std::ptr::null(),
            1,
            &device,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    check("clCreateContext", err)?;
    // SAFETY: `context` was just made on `device` (checked above); `err` is a live out-parameter.
    let queue = unsafe { ffi::clCreateCommandQueue(context, device, 0, &mut err) };
    check("clCreateCommandQueue", err)?;
    Ok(FirstDevice {
        platforms,
        device,
        context,
        queue,
    })
}

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
