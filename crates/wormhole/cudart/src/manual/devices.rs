//! Devices: their count and properties (asked once), and the current
//! device, kept per host thread by the client as natively, the tenant's
//! switched in the ring ahead of a call from a thread on another device.

use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use wormhole_cuda_api::*;

use super::status_of;
use crate::call::Call;
use crate::state::{self, note};

/// # Safety
/// `prop` is NULL or holds a `cudaDeviceProp` of this library's version.
pub unsafe extern "C" fn cudaGetDeviceProperties(prop: *mut c_void, device: i32) -> i32 {
    if prop.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let major = state::MAJOR.load(Ordering::Relaxed);
    status_of((|| {
        let mut c = Call::begin(func::cudaGetDeviceProperties)?;
        c.enc.u32(major);
        c.enc.i32(device);
        let mut r = c.finish()?;
        let status = r.status();
        if r.has_outputs() {
            // SAFETY: `prop` is non-NULL (checked on entry) and holds a
            // writable cudaDeviceProp of this library's CUDA major,
            // devprop_size(major) bytes: cudaGetDeviceProperties's
            // contract for the headers the application was built with.
            unsafe { r.out_bytes(prop, devprop_size(major) as u64)? };
        }
        Ok(status)
    })())
}

/// CUDA 12's headers rename cudaGetDeviceProperties to this.
///
/// # Safety
/// As for [`cudaGetDeviceProperties`].
pub unsafe extern "C" fn cudaGetDeviceProperties_v2(prop: *mut c_void, device: i32) -> i32 {
    // SAFETY: `prop` is NULL or a writable cudaDeviceProp of this CUDA
    // major: the _v2 name's contract, which is cudaGetDeviceProperties's.
    unsafe { cudaGetDeviceProperties(prop, device) }
}

/// The server's device count, asked once: a process's devices do not
/// change. A failure to initialise (no driver, no device, no server) is
/// kept as natively; any other failure is asked again next time.
pub(crate) fn device_count() -> Result<i32, i32> {
    static N: OnceLock<Result<i32, i32>> = OnceLock::new();
    if let Some(n) = N.get() {
        return *n;
    }
    let mut n = 0;
    // SAFETY: a valid out-pointer.
    let r = match unsafe { crate::gen::cudaGetDeviceCount(&mut n) } {
        0 => Ok(n),
        s => Err(s),
    };
    if matches!(r, Ok(_) | Err(3 | 35 | 100)) {
        let _ = N.set(r);
    }
    r
}

/// Whether the runtime can initialise, as natively calls that need no
/// device round trip still need a driver: the first such call asks the
/// server (its answer, an initialisation failure or success, is kept).
pub(crate) fn init_status() -> i32 {
    match device_count() {
        Err(s @ (3 | 35 | 100)) => s,
        _ => cudaSuccess,
    }
}

thread_local! {
    /// This thread's current device, as the runtime keeps one per host
    /// thread (0, the runtime's default, until the thread sets one).
    static THREAD_DEVICE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// The device the tenant's calls now run on: the one the last switch this
/// client sent made current (changed only under the connection's lock).
static TENANT_DEVICE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The calling thread's current device.
pub(crate) fn current_device() -> i32 {
    THREAD_DEVICE.with(std::cell::Cell::get)
}

/// Makes `device` (a valid one) the calling thread's current device.
pub(crate) fn set_thread_device(device: i32) {
    THREAD_DEVICE.with(|d| d.set(device));
}

/// Before a request from this thread: if the tenant's current device is
/// another thread's, a switch to this thread's goes first, in the same
/// ring and without waiting (it is a device this thread's cudaSetDevice
/// found valid). A process whose threads share one device never sends one.
/// Returns the switch's status: cudaSuccess unless WORMHOLE_SYNC=1 made it
/// wait and it failed, which the call it precedes then answers.
pub(crate) fn follow_thread_device(
    link: &mut wormhole_client::Link,
) -> Result<i32, wormhole_client::LinkError> {
    let want = current_device();
    if TENANT_DEVICE.load(Ordering::Relaxed) == want {
        return Ok(cudaSuccess);
    }
    let mut enc = link.request(func::cudaSetDevice)?;
    enc.i32(want);
    if wormhole_client::force_sync() {
        let mut a = link.exchange(enc, None)?;
        link.recycle(&mut a.cursor);
        if a.status != cudaSuccess {
            return Ok(a.status);
        }
    } else {
        link.post(enc, None, false)?;
    }
    TENANT_DEVICE.store(want, Ordering::Relaxed);
    Ok(cudaSuccess)
}

/// # Safety
/// `count` is NULL or writable.
pub unsafe extern "C" fn cudaGetDeviceCount(count: *mut i32) -> i32 {
    if count.is_null() {
        return note(cudaErrorInvalidValue);
    }
    match device_count() {
        Ok(n) => {
            // SAFETY: `count` is non-NULL (checked above), and a non-NULL one
            // is a writable int: cudaGetDeviceCount's contract.
            unsafe { *count = n };
            cudaSuccess
        }
        Err(s) => note(s),
    }
}

/// The calling thread's device: one of the server's (cudaErrorInvalidDevice
/// otherwise, as natively). Nothing is asked of the server: the tenant
/// switches to it with this thread's next call (`follow_thread_device`).
pub extern "C" fn cudaSetDevice(device: i32) -> i32 {
    let init = init_status();
    if init != cudaSuccess {
        return note(init);
    }
    match device_count() {
        Ok(n) if (0..n).contains(&device) => {
            set_thread_device(device);
            cudaSuccess
        }
        Ok(_) => note(cudaErrorInvalidDevice),
        Err(s) => note(s),
    }
}

/// # Safety
/// `device` is NULL or writable.
pub unsafe extern "C" fn cudaGetDevice(device: *mut i32) -> i32 {
    if device.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let init = init_status();
    if init != cudaSuccess {
        return note(init);
    }
    // SAFETY: `device` is non-NULL (checked above), and a non-NULL one is
    // a writable int: cudaGetDevice's contract.
    unsafe { *device = current_device() };
    cudaSuccess
}

/// # Safety
/// `id` is NULL or holds `len` writable bytes.
pub unsafe extern "C" fn cudaDeviceGetPCIBusId(id: *mut c_void, len: i32, device: i32) -> i32 {
    // Otherwise a negative length would reach the server as a huge one.
    if id.is_null() || len < 1 {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: `id` is non-NULL (checked above) and holds `len` writable
    // bytes, `len` at least 1: cudaDeviceGetPCIBusId's contract, which the
    // stub needs for the string it writes.
    unsafe { crate::gen::cudaDeviceGetPCIBusId(id, len, device) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_device_is_per_thread() {
        set_thread_device(1);
        let other = std::thread::spawn(current_device)
            .join()
            .expect("the thread ends");
        assert_eq!(other, 0, "a new thread starts on device 0");
        assert_eq!(current_device(), 1);
        set_thread_device(0);
    }

    #[test]
    fn outputs_and_lengths_are_checked_before_asking() {
        // SAFETY: NULL is refused.
        let status = unsafe { cudaGetDeviceCount(std::ptr::null_mut()) };
        assert_eq!(status, cudaErrorInvalidValue);
        let mut id = [0u8; 16];
        // SAFETY: refused for its length before `id` is touched.
        let status = unsafe { cudaDeviceGetPCIBusId(id.as_mut_ptr().cast(), 0, 0) };
        assert_eq!(status, cudaErrorInvalidValue);
        // SAFETY: NULL is refused.
        let status = unsafe { cudaGetDeviceProperties(std::ptr::null_mut(), 0) };
        assert_eq!(status, cudaErrorInvalidValue);
    }
}
