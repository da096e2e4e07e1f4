//! The few driver calls a framework makes itself on a client
//! (`driver.api`), answered here: the libcuda stand-in
//! (`wormhole-cuda-driver-1`) forwards to this table, so it shares this
//! library's connection.
//!
//! The driver API is not forwarded. The client process has no context:
//! its runtime calls run in its tenant's, on the server. So devices and the
//! driver's version are the runtime's answers, and a context is a token,
//! one per device, that this process can retain, release and make
//! current. That is what PyTorch asks before it creates a cuBLAS handle
//! ("is a context current? if not, retain the primary one and make it
//! current"), and what a device's primary context state answers.

#![allow(non_snake_case)] // the C names of the entry points

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use wormhole_cuda_api::driver::*;

/// The most devices whose contexts a client can name.
const MAX_DEVICES: usize = 64;
/// A device's primary context is the address of its entry here: how many
/// times this process retained it.
static PRIMARY: [AtomicU32; MAX_DEVICES] = [const { AtomicU32::new(0) }; MAX_DEVICES];

thread_local! {
    /// The context this thread made current (NULL: none).
    static CURRENT: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
}

/// The device count the runtime reports (asked once), or the driver's
/// failure. PyTorch asks a device's primary context state on every device
/// switch, so this must not cost a round trip.
fn device_count() -> Result<i32, i32> {
    crate::manual::devices::device_count().map_err(from_runtime)
}

/// `dev` if the server has such a device.
fn device(dev: i32) -> Result<usize, i32> {
    let n = device_count()?;
    if dev < 0 || dev >= n || dev as usize >= MAX_DEVICES {
        return Err(CUDA_ERROR_INVALID_DEVICE);
    }
    Ok(dev as usize)
}

/// The device whose primary context `ctx` is.
fn context_device(ctx: *mut c_void) -> Option<usize> {
    crate::state::slot_of(&PRIMARY, ctx)
}

fn status(r: Result<(), i32>) -> i32 {
    r.err().unwrap_or(CUDA_SUCCESS)
}

/// Starts "the driver": succeeds when the runtime can reach a device.
pub extern "C" fn cuInit(flags: u32) -> i32 {
    if flags != 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    status(device_count().and_then(|n| match n {
        0 => Err(CUDA_ERROR_NO_DEVICE),
        _ => Ok(()),
    }))
}

/// The server's driver version, as the runtime reports it.
///
/// # Safety
/// `version` is NULL or writable.
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut i32) -> i32 {
    if version.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: `version` is non-NULL (checked above), and a non-NULL one is a
    // writable int (cuDriverGetVersion's contract), as the runtime call
    // needs.
    from_runtime(unsafe { crate::gen::cudaDriverGetVersion(version) })
}

/// # Safety
/// `count` is NULL or writable.
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut i32) -> i32 {
    if count.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    status(device_count().map(|n| {
        // SAFETY: `count` is non-NULL (checked above), and a non-NULL one is
        // a writable int: cuDeviceGetCount's contract.
        unsafe { *count = n }
    }))
}

/// A CUdevice is its ordinal.
///
/// # Safety
/// `dev` is NULL or writable.
pub unsafe extern "C" fn cuDeviceGet(dev: *mut i32, ordinal: i32) -> i32 {
    if dev.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    status(device(ordinal).map(|d| {
        // SAFETY: `dev` is non-NULL (checked above), and a non-NULL one is a
        // writable CUdevice (an int): cuDeviceGet's contract.
        unsafe { *dev = d as i32 }
    }))
}

/// Active while this process holds a retain of it; no flags are set.
///
/// # Safety
/// `flags` and `active` are NULL or writable.
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: i32,
    flags: *mut u32,
    active: *mut i32,
) -> i32 {
    if flags.is_null() || active.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    status(device(dev).map(|d| {
        let held = PRIMARY[d].load(Ordering::Relaxed) > 0;
        // SAFETY: both are non-NULL (checked above), and non-NULL ones are a
        // writable unsigned int and int: cuDevicePrimaryCtxGetState's
        // contract.
        unsafe {
            *flags = 0;
            *active = held as i32;
        }
    }))
}

/// # Safety
/// `ctx` is NULL or writable.
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, dev: i32) -> i32 {
    if ctx.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    status(device(dev).map(|d| {
        PRIMARY[d].fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ctx` is non-NULL (checked above), and a non-NULL one is a
        // writable CUcontext slot: cuDevicePrimaryCtxRetain's contract. The
        // token is only ever compared, never written through by anyone.
        unsafe { *ctx = (&PRIMARY[d] as *const AtomicU32).cast_mut().cast() }
    }))
}

pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: i32) -> i32 {
    status(device(dev).and_then(|d| {
        PRIMARY[d]
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| CUDA_ERROR_INVALID_CONTEXT)
    }))
}

/// The pre-11 name of [`cuDevicePrimaryCtxRelease_v2`].
pub extern "C" fn cuDevicePrimaryCtxRelease(dev: i32) -> i32 {
    cuDevicePrimaryCtxRelease_v2(dev)
}

/// # Safety
/// `ctx` is NULL or writable.
pub unsafe extern "C" fn cuCtxGetCurrent(ctx: *mut *mut c_void) -> i32 {
    if ctx.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: `ctx` is non-NULL (checked above), and a non-NULL one is a
    // writable CUcontext slot: cuCtxGetCurrent's contract.
    unsafe { *ctx = CURRENT.with(Cell::get) };
    CUDA_SUCCESS
}

/// NULL, or a primary context this process retained. As natively, a
/// device's primary context made current makes that device the thread's
/// current one for the runtime too.
pub extern "C" fn cuCtxSetCurrent(ctx: *mut c_void) -> i32 {
    if !ctx.is_null() {
        match context_device(ctx) {
            Some(d) if PRIMARY[d].load(Ordering::Relaxed) > 0 => {
                crate::manual::devices::set_thread_device(d as i32);
            }
            _ => return CUDA_ERROR_INVALID_CONTEXT,
        }
    }
    CURRENT.with(|c| c.set(ctx));
    CUDA_SUCCESS
}

/// Writes a result's name or message, or refuses a code it does not know
/// (leaving NULL, as the driver does).
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn describe_into(result: i32, out: *mut *const c_char, name: bool) -> i32 {
    if out.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let s = describe(result).map(|(n, t)| if name { n } else { t });
    // SAFETY: `out` is non-NULL (checked above), and a non-NULL one is a
    // writable `const char *` slot: this function's contract, passed on
    // from cuGetErrorString's and cuGetErrorName's. The strings are static.
    unsafe { *out = s.map_or(std::ptr::null(), |s| s.as_ptr()) };
    match s {
        Some(_) => CUDA_SUCCESS,
        None => CUDA_ERROR_INVALID_VALUE,
    }
}

/// # Safety
/// `out` is NULL or writable.
pub unsafe extern "C" fn cuGetErrorString(result: i32, out: *mut *const c_char) -> i32 {
    // SAFETY: `out` is NULL or a writable `const char *` slot, this
    // function's contract, which is what describe_into needs.
    unsafe { describe_into(result, out, false) }
}

/// # Safety
/// `out` is NULL or writable.
pub unsafe extern "C" fn cuGetErrorName(result: i32, out: *mut *const c_char) -> i32 {
    // SAFETY: `out` is NULL or a writable `const char *` slot, this
    // function's contract, which is what describe_into needs.
    unsafe { describe_into(result, out, true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_primary_context_tokens_name_a_device() {
        let first = (&PRIMARY[0] as *const AtomicU32).cast_mut().cast();
        assert_eq!(context_device(first), Some(0));
        let last = (&PRIMARY[MAX_DEVICES - 1] as *const AtomicU32)
            .cast_mut()
            .cast();
        assert_eq!(context_device(last), Some(MAX_DEVICES - 1));
        let inside = (first as usize + 1) as *mut c_void;
        assert_eq!(context_device(inside), None, "not on an entry");
        let past = (PRIMARY.as_ptr() as usize + std::mem::size_of_val(&PRIMARY)) as *mut c_void;
        assert_eq!(context_device(past), None);
        assert_eq!(context_device(std::ptr::null_mut()), None);
    }

    #[test]
    fn results_have_names_and_messages() {
        let mut p = std::ptr::null();
        // SAFETY: a writable slot.
        assert_eq!(unsafe { cuGetErrorName(101, &mut p) }, CUDA_SUCCESS);
        // SAFETY: the static string just returned.
        let name = unsafe { std::ffi::CStr::from_ptr(p) };
        assert_eq!(name.to_bytes(), b"CUDA_ERROR_INVALID_DEVICE");
        // SAFETY: a writable slot.
        let unknown = unsafe { cuGetErrorString(12345, &mut p) };
        assert_eq!(unknown, CUDA_ERROR_INVALID_VALUE);
        assert!(p.is_null());
        // SAFETY: NULL is refused before any write.
        let to_null = unsafe { cuGetErrorString(0, std::ptr::null_mut()) };
        assert_eq!(to_null, CUDA_ERROR_INVALID_VALUE);
    }
}

/// The generated table of this module's functions (`driver.api`: all
/// answered here).
#[allow(clippy::missing_safety_doc, unused_imports)]
pub mod gen {
    use super as overrides;
    use std::ffi::{c_char, c_void};

    include!(concat!(env!("OUT_DIR"), "/driver_client_gen.rs"));
    include!(concat!(env!("OUT_DIR"), "/driver_forward_gen.rs"));
}
