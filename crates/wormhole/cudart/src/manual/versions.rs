//! Versions and the driver's entry points: the runtime's version is the
//! stand-in's major, the driver's the server's (0 without one), and no
//! driver symbol is ever found (the driver API is not forwarded).

use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering;

use wormhole_cuda_api::*;

use super::put;
use crate::state::{self, note};

/// # Safety
/// `v` is NULL or writable.
pub unsafe extern "C" fn cudaRuntimeGetVersion(v: *mut i32) -> i32 {
    if v.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: `v` is non-NULL (checked above), and a non-NULL one is a
    // writable int: cudaRuntimeGetVersion's contract.
    unsafe { *v = runtime_version(state::MAJOR.load(Ordering::Relaxed)) };
    cudaSuccess
}

/// The native runtime answers 0 with success where there is no driver;
/// with no server, so do we.
///
/// # Safety
/// `v` is NULL or writable.
pub unsafe extern "C" fn cudaDriverGetVersion(v: *mut i32) -> i32 {
    // SAFETY: `v` is NULL or a writable int (cudaDriverGetVersion's
    // contract), which the stub checks for NULL before writing.
    let s = unsafe { crate::gen::cudaDriverGetVersion(v) };
    if s == state::NO_SERVER && !v.is_null() {
        // SAFETY: `v` is non-NULL (checked in this condition), and then a
        // writable int: cudaDriverGetVersion's contract.
        unsafe { *v = 0 };
        return cudaSuccess;
    }
    s
}

/// No driver symbol is ever found (the driver API is not forwarded).
///
/// # Safety
/// `symbol` is NULL or a C string; `func` and `status` are NULL or writable.
pub unsafe extern "C" fn cudaGetDriverEntryPoint(
    symbol: *const c_char,
    func: *mut *mut c_void,
    _flags: u64,
    status: *mut i32,
) -> i32 {
    if symbol.is_null() || func.is_null() {
        return note(cudaErrorInvalidValue);
    }
    /// cudaDriverEntryPointSymbolNotFound.
    const NOT_FOUND: i32 = 1;
    // SAFETY: `func` is non-NULL (checked above) and `status` NULL (which
    // `put` leaves alone) or not; non-NULL ones are a writable pointer slot
    // and int: cudaGetDriverEntryPoint's contract.
    unsafe {
        func.write(std::ptr::null_mut());
        put(status, NOT_FOUND);
    }
    cudaSuccess
}

/// As cudaGetDriverEntryPoint, for any version.
///
/// # Safety
/// As cudaGetDriverEntryPoint.
pub unsafe extern "C" fn cudaGetDriverEntryPointByVersion(
    symbol: *const c_char,
    func: *mut *mut c_void,
    _version: u32,
    flags: u64,
    status: *mut i32,
) -> i32 {
    // SAFETY: `symbol` is NULL or a C string, `func` and `status` NULL or
    // writable: the ByVersion call's contract, cudaGetDriverEntryPoint's.
    unsafe { cudaGetDriverEntryPoint(symbol, func, flags, status) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_version_is_the_stand_ins_major() {
        let mut version = 0;
        // SAFETY: `version` is writable.
        assert_eq!(unsafe { cudaRuntimeGetVersion(&mut version) }, cudaSuccess);
        assert_eq!(
            version,
            runtime_version(state::MAJOR.load(Ordering::Relaxed))
        );
        // SAFETY: NULL is refused.
        let status = unsafe { cudaRuntimeGetVersion(std::ptr::null_mut()) };
        assert_eq!(status, cudaErrorInvalidValue);
    }

    #[test]
    fn no_driver_symbol_is_found() {
        let mut function = std::ptr::NonNull::<c_void>::dangling().as_ptr();
        let mut found = -1;
        // SAFETY: a C string and two writable outputs.
        let status = unsafe {
            cudaGetDriverEntryPoint(c"cuMemAlloc".as_ptr(), &mut function, 0, &mut found)
        };
        assert_eq!(status, cudaSuccess);
        assert!(function.is_null());
        assert_eq!(found, 1, "cudaDriverEntryPointSymbolNotFound");
        // SAFETY: NULL is refused before anything is written.
        let status =
            unsafe { cudaGetDriverEntryPoint(std::ptr::null(), &mut function, 0, &mut found) };
        assert_eq!(status, cudaErrorInvalidValue);
    }
}
