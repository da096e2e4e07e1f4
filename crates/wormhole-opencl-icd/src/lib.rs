//! Wormhole's OpenCL client, an installable client driver (ICD).
//!
//! The system's OpenCL loader (ocl-icd or Khronos) loads this library
//! through `/etc/OpenCL/vendors/wormhole.icd` or `OCL_ICD_VENDORS`, and asks
//! it for platforms with `clIcdGetPlatformIDsKHR`. Ours are the platforms of
//! a Wormhole server: every call an application makes on them is marshalled
//! by a stub generated from the API description (`gen`), sent over shared
//! memory (or TCP) and run by the server. Unmodified programs need neither
//! recompiling nor LD_PRELOAD.
//!
//! The server is found at `WORMHOLE_SERVER` (`unix:PATH`, `tcp:HOST:PORT`
//! or a socket path), else at the default socket. With no server there is
//! no Wormhole platform, and one line on stderr when `WORMHOLE_LOG` is set.

mod callbacks;
mod custom;
mod host_images;
mod info_cache;
mod later;
mod maps;
mod overrides;
mod room;
mod rt;
mod waits;

use std::ffi::{c_char, c_void};

/// The generated stubs and dispatch table.
#[allow(clippy::missing_safety_doc)]
pub mod gen {
    use std::ffi::{c_char, c_void};

    use wormhole_opencl_api::{func, CallbackKind, Kind, CL_INVALID_OPERATION, CL_SUCCESS};

    use crate::custom;
    use crate::info_cache::{cached_info, key_of, CachedQuery};
    use crate::overrides;
    use crate::rt::{adopt_id, adopt_new, released, retained, set_errcode, Call};
    use crate::{unsupported_int, unsupported_ptr, unsupported_void};

    include!(concat!(env!("OUT_DIR"), "/client_gen.rs"));
}

extern "C" fn unsupported_int() -> i32 {
    wormhole_opencl_api::CL_INVALID_OPERATION
}

extern "C" fn unsupported_ptr() -> *mut c_void {
    std::ptr::null_mut()
}

extern "C" fn unsupported_void() {}

/// The ICD entry point: our platforms.
///
/// # Safety
/// As for `clGetPlatformIDs`.
#[no_mangle]
pub unsafe extern "C" fn clIcdGetPlatformIDsKHR(
    n: u32,
    platforms: *mut *mut c_void,
    num: *mut u32,
) -> i32 {
    // SAFETY: same contract.
    unsafe { overrides::clGetPlatformIDs(n, platforms, num) }
}

/// How loaders find `clIcdGetPlatformIDsKHR`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn clGetExtensionFunctionAddress(name: *const c_char) -> *mut c_void {
    // SAFETY: same contract.
    unsafe { overrides::clGetExtensionFunctionAddress(name) }
}

/// Some loaders query platform information through the exported symbol.
///
/// # Safety
/// As for `clGetPlatformInfo`.
#[no_mangle]
pub unsafe extern "C" fn clGetPlatformInfo(
    p: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // SAFETY: same contract.
    unsafe { overrides::clGetPlatformInfo(p, param, size, value, size_ret) }
}
