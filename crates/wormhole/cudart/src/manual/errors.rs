//! The runtime's last error and its error texts, answered by the client.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use wormhole_cuda_api::errors;

use crate::state::last_error;

pub extern "C" fn cudaGetLastError() -> i32 {
    last_error(true)
}

pub extern "C" fn cudaPeekAtLastError() -> i32 {
    last_error(false)
}

fn error_text(code: i32, name: bool) -> *const c_char {
    static TEXTS: OnceLock<HashMap<(i32, bool), CString>> = OnceLock::new();
    let t = TEXTS.get_or_init(|| {
        let mut m = HashMap::new();
        for &(c, n, s) in errors::ERRORS {
            m.insert((c, true), CString::new(n).unwrap_or_default());
            m.insert((c, false), CString::new(s).unwrap_or_default());
        }
        m.insert(
            (i32::MIN, true),
            CString::new(errors::UNRECOGNIZED).unwrap_or_default(),
        );
        m
    });
    t.get(&(code, name))
        .or_else(|| t.get(&(i32::MIN, true)))
        .map_or(std::ptr::null(), |s| s.as_ptr())
}

pub extern "C" fn cudaGetErrorString(error: i32) -> *const c_char {
    error_text(error, false)
}

pub extern "C" fn cudaGetErrorName(error: i32) -> *const c_char {
    error_text(error, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use wormhole_cuda_api::cudaErrorInvalidValue;

    fn text(p: *const c_char) -> &'static str {
        assert!(!p.is_null());
        // SAFETY: error_text's strings are NUL-terminated and static.
        unsafe { CStr::from_ptr(p) }.to_str().expect("ASCII")
    }

    #[test]
    fn names_and_texts_come_from_the_table() {
        assert_eq!(text(cudaGetErrorName(0)), "cudaSuccess");
        assert_eq!(text(cudaGetErrorString(0)), "no error");
        assert_eq!(
            text(cudaGetErrorName(cudaErrorInvalidValue)),
            "cudaErrorInvalidValue"
        );
        assert_eq!(text(cudaGetErrorName(-12345)), errors::UNRECOGNIZED);
        assert_eq!(text(cudaGetErrorString(-12345)), errors::UNRECOGNIZED);
    }
}
