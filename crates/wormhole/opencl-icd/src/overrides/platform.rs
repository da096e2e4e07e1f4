//! The platforms as applications see them: their list and names, and the
//! extension entry point that ICD loaders look up.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void, CStr};

use wormhole_opencl_api::{
    Kind, CL_INVALID_VALUE, CL_PLATFORM_NAME, CL_PLATFORM_NOT_FOUND_KHR, CL_SUCCESS,
};

use crate::connection::conn;
use crate::gen;
use crate::objects::object_for;

/// # Safety
/// As for `clGetPlatformIDs`.
pub unsafe extern "C" fn clGetPlatformIDs(
    n: u32,
    platforms: *mut *mut c_void,
    num: *mut u32,
) -> i32 {
    if (n == 0 && !platforms.is_null()) || (platforms.is_null() && num.is_null()) {
        return CL_INVALID_VALUE;
    }
    let ids: &[u64] = conn().map_or(&[], |c| c.platforms.as_slice());
    if !platforms.is_null() {
        for (i, &id) in ids.iter().take(n as usize).enumerate() {
            // SAFETY: `platforms` is non-NULL and holds `n` entries by clGetPlatformIDs' contract
            // (num_entries); `take(n)` keeps `i < n`.
            unsafe { *platforms.add(i) = object_for(id, Kind::Platform, 0) };
        }
    }
    if !num.is_null() {
        // SAFETY: `num` is non-NULL and a writable cl_uint by clGetPlatformIDs' contract on
        // num_platforms.
        unsafe { *num = ids.len() as u32 };
    }
    if ids.is_empty() {
        CL_PLATFORM_NOT_FOUND_KHR
    } else {
        CL_SUCCESS
    }
}

fn keep_remote_name() -> bool {
    static K: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *K.get_or_init(|| std::env::var("WORMHOLE_PLATFORM_NAME").is_ok_and(|v| v == "remote"))
}
const CL_PLATFORM_ICD_SUFFIX_KHR: u32 = 0x0920;
/// Prefix of our platforms' names, so users see where a platform lives.
pub const NAME_PREFIX: &str = "Wormhole: ";

/// Answers a string query with a value computed here.
///
/// # Safety
/// `value` is NULL or holds `size` bytes; `size_ret` is NULL or a size_t.
unsafe fn answer(s: &[u8], size: usize, value: *mut c_void, size_ret: *mut usize) -> i32 {
    let mut v = s.to_vec();
    v.push(0);
    // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` is NULL or
    // a writable size_t (this function's contract), which is what
    // info_cache::answer needs; it writes no more than `size` bytes.
    unsafe { crate::info_cache::answer(&v, size, value, size_ret) }
}

/// # Safety
/// As for `clGetPlatformInfo`.
pub unsafe extern "C" fn clGetPlatformInfo(
    p: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    match param {
        CL_PLATFORM_ICD_SUFFIX_KHR => {
            // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` NULL or a writable
            // size_t by clGetPlatformInfo's contract, which is answer's.
            unsafe { answer(b"WH", size, value, size_ret) }
        }
        // WORMHOLE_PLATFORM_NAME=remote keeps the remote name, for programs
        // that key workarounds on it (pyopencl's PoCL checks, say).
        CL_PLATFORM_NAME if !keep_remote_name() => {
            let mut n = 0usize;
            // SAFETY: size query.
            let s = unsafe { gen::clGetPlatformInfo(p, param, 0, std::ptr::null_mut(), &mut n) };
            if s != CL_SUCCESS {
                return s;
            }
            let mut buf = vec![0u8; n];
            // SAFETY: buffer of `n` bytes.
            let s = unsafe {
                gen::clGetPlatformInfo(p, param, n, buf.as_mut_ptr().cast(), std::ptr::null_mut())
            };
            if s != CL_SUCCESS {
                return s;
            }
            let remote = buf.split(|&b| b == 0).next().unwrap_or(&[]);
            let name = [NAME_PREFIX.as_bytes(), remote].concat();
            // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` NULL or a writable
            // size_t by clGetPlatformInfo's contract, which is answer's.
            unsafe { answer(&name, size, value, size_ret) }
        }
        // SAFETY: the arguments are the application's, passed unchanged: clGetPlatformInfo's
        // contract is the generated forwarder's.
        _ => unsafe { gen::clGetPlatformInfo(p, param, size, value, size_ret) },
    }
}

/// # Safety
/// `name` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn clGetExtensionFunctionAddress(name: *const c_char) -> *mut c_void {
    if name.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `name` is non-NULL (checked above) and NUL-terminated by
    // clGetExtensionFunctionAddress's contract (this fn's).
    match unsafe { CStr::from_ptr(name) }.to_bytes() {
        b"clIcdGetPlatformIDsKHR" => crate::clIcdGetPlatformIDsKHR as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

/// # Safety
/// As for `clGetExtensionFunctionAddress`.
pub unsafe extern "C" fn clGetExtensionFunctionAddressForPlatform(
    _p: *mut c_void,
    name: *const c_char,
) -> *mut c_void {
    // SAFETY: `name` is NULL or NUL-terminated by clGetExtensionFunctionAddressForPlatform's
    // contract, clGetExtensionFunctionAddress's.
    unsafe { clGetExtensionFunctionAddress(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_computed_string_is_answered_as_the_library_would() {
        let mut buf = [0xAAu8; 8];
        let mut n = 0usize;
        // SAFETY: `buf` holds 8 bytes; `n` is a size_t.
        let s = unsafe { answer(b"WH", buf.len(), buf.as_mut_ptr().cast(), &mut n) };
        assert_eq!(s, CL_SUCCESS);
        assert_eq!(&buf[..4], b"WH\0\xAA", "NUL-terminated, nothing past it");
        assert_eq!(n, 3);
        // Too small a buffer: refused, untouched, as natively.
        let mut small = [0xAAu8; 2];
        // SAFETY: `small` holds 2 bytes.
        let s = unsafe { answer(b"WH", 2, small.as_mut_ptr().cast(), std::ptr::null_mut()) };
        assert_eq!(s, CL_INVALID_VALUE);
        assert_eq!(small, [0xAA; 2]);
        // A size query alone.
        n = 0;
        // SAFETY: no value; `n` is a size_t.
        let s = unsafe { answer(b"Wormhole", 0, std::ptr::null_mut(), &mut n) };
        assert_eq!((s, n), (CL_SUCCESS, 9));
    }

    #[test]
    fn platform_ids_refuse_what_the_api_forbids_before_connecting() {
        let mut slot = std::ptr::null_mut();
        // SAFETY: one writable handle slot; no count.
        let s = unsafe { clGetPlatformIDs(0, &mut slot, std::ptr::null_mut()) };
        assert_eq!(s, CL_INVALID_VALUE, "room for none, yet a list");
        assert!(slot.is_null());
        // SAFETY: neither list nor count.
        let s = unsafe { clGetPlatformIDs(1, std::ptr::null_mut(), std::ptr::null_mut()) };
        assert_eq!(s, CL_INVALID_VALUE, "nowhere to answer");
    }

    #[test]
    fn loaders_find_our_entry_point_and_nothing_else() {
        let ours = crate::clIcdGetPlatformIDsKHR as *mut c_void;
        // SAFETY: NUL-terminated names, or NULL.
        unsafe {
            assert_eq!(
                clGetExtensionFunctionAddress(c"clIcdGetPlatformIDsKHR".as_ptr()),
                ours
            );
            let p = std::ptr::null_mut();
            let name = c"clIcdGetPlatformIDsKHR".as_ptr();
            assert_eq!(clGetExtensionFunctionAddressForPlatform(p, name), ours);
            assert!(clGetExtensionFunctionAddress(c"clGetPlatformIDs".as_ptr()).is_null());
            assert!(clGetExtensionFunctionAddress(std::ptr::null()).is_null());
        }
    }
}
