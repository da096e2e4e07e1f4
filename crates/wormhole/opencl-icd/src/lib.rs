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
mod connection;
mod custom;
mod event_state;
mod host_images;
mod includes;
mod info_cache;
mod later;
mod maps;
mod objects;
mod overrides;
mod room;
mod waits;

use std::ffi::{c_char, c_void};

/// The generated stubs and dispatch table.
#[allow(clippy::missing_safety_doc)]
pub mod gen {
    use std::ffi::{c_char, c_void};

    use wormhole_opencl_api::{func, CallbackKind, Kind, CL_INVALID_OPERATION, CL_SUCCESS};

    use crate::connection::{set_errcode, Call};
    use crate::custom;
    use crate::info_cache::{cached_info, key_of, CachedQuery};
    use crate::objects::{adopt_id, adopt_new, released, retained};
    use crate::overrides;
    use crate::{unsupported_int, unsupported_ptr, unsupported_void};
    use crate::{
        unsupported_ptr_err3, unsupported_ptr_err4, unsupported_ptr_err5, unsupported_ptr_err6,
    };

    include!(concat!(env!("OUT_DIR"), "/client_gen.rs"));
}

extern "C" fn unsupported_int() -> i32 {
    wormhole_opencl_api::CL_INVALID_OPERATION
}

extern "C" fn unsupported_ptr() -> *mut c_void {
    std::ptr::null_mut()
}

extern "C" fn unsupported_void() {}

/// Stubs for creations that are not forwarded, which return NULL and say
/// why through `errcode_ret`, their `N`th argument (`!ptr(N)` in the
/// description): a program that checks the code, and not the handle, must
/// not read success. The arguments before it are all pointers or integers
/// (cl_context, cl_mem_flags, GL and D3D names, ...), which the C calling
/// conventions we run on (x86-64 System V, AArch64) pass in integer
/// registers whatever their width, so each is read as a `usize` and
/// ignored; only `errcode_ret` is touched.
macro_rules! unsupported_ptr_err {
    ($name:ident, $($skip:ident),*) => {
        /// # Safety
        /// The last argument is NULL or the caller's writable `cl_int`.
        unsafe extern "C" fn $name($($skip: usize,)* errcode_ret: *mut i32) -> *mut c_void {
            $(let _ = $skip;)*
            // SAFETY: `errcode_ret` is NULL or the application's writable cl_int by the OpenCL
            // function's contract on errcode_ret, which set_errcode checks for NULL.
            unsafe { connection::set_errcode(errcode_ret, wormhole_opencl_api::CL_INVALID_OPERATION) };
            std::ptr::null_mut()
        }
    };
}

unsupported_ptr_err!(unsupported_ptr_err3, a, b);
unsupported_ptr_err!(unsupported_ptr_err4, a, b, c);
unsupported_ptr_err!(unsupported_ptr_err5, a, b, c, d);
unsupported_ptr_err!(unsupported_ptr_err6, a, b, c, d, e);

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
    // SAFETY: `platforms` is NULL or holds `n` entries and `num` is NULL or
    // writable: clGetPlatformIDs' contract, which the loader keeps for this
    // entry point (this function's), passed on unchanged.
    unsafe { overrides::clGetPlatformIDs(n, platforms, num) }
}

// The two exported entry points below forward to separate, unexported
// overrides, and must stay that way: the dispatch table holds the overrides'
// addresses, and an exported symbol's address is bound to the first
// definition loaded, which is the loader's own `clGetPlatformInfo`; with the
// override exported, the loader's function dispatched to itself for ever.

/// How loaders find `clIcdGetPlatformIDsKHR`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn clGetExtensionFunctionAddress(name: *const c_char) -> *mut c_void {
    // SAFETY: `name` is NULL or NUL-terminated (this function's contract,
    // the loader's call), which the override needs.
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
    // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` is NULL or
    // writable: clGetPlatformInfo's contract (this function's), passed on
    // unchanged to the override, whose contract it is too.
    unsafe { overrides::clGetPlatformInfo(p, param, size, value, size_ret) }
}
