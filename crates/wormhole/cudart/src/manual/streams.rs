//! Stream capture (never forwarded: no stream ever captures) and host
//! functions run in stream order, in the calling thread.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_cuda_api::*;

use super::put;
use crate::state::{self, note};

thread_local! {
    /// cudaStreamCaptureMode of this thread (cudaStreamCaptureModeGlobal).
    static CAPTURE_MODE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// # Safety
/// `mode` is NULL or a readable and writable int.
pub unsafe extern "C" fn cudaThreadExchangeStreamCaptureMode(mode: *mut i32) -> i32 {
    if mode.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: checked non-NULL; the caller's contract.
    let wanted = unsafe { *mode };
    if !(0..=2).contains(&wanted) {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: as above.
    unsafe { *mode = CAPTURE_MODE.with(|m| m.replace(wanted)) };
    cudaSuccess
}

/// What every form of cudaStreamGetCaptureInfo answers: the stream checked
/// by the server (as cudaStreamIsCapturing), then "not capturing", id 0,
/// no graph and no dependencies (capture is never forwarded).
///
/// # Safety
/// Each pointer is NULL or valid for a write of its type.
unsafe fn capture_info(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    if status.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: `status` is valid for a write (checked non-NULL, the caller's
    // contract).
    let r = unsafe { crate::gen::cudaStreamIsCapturing(stream, status) };
    if r != cudaSuccess {
        return r;
    }
    // SAFETY: each is NULL or writable, the caller's contract.
    unsafe {
        put(id, 0);
        put(graph, std::ptr::null_mut());
        put(deps, std::ptr::null());
        put(edges, std::ptr::null());
        put(ndeps, 0);
    }
    cudaSuccess
}

/// # Safety
/// CUDA 13: seven parameters, each output NULL or writable. CUDA 12: the
/// legacy three (`stream`, `status`, `id`); the others are not read.
pub unsafe extern "C" fn cudaStreamGetCaptureInfo(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    use std::ptr::null_mut;
    // SAFETY: the caller's contract for its major; CUDA 12 callers passed
    // only three arguments, so the other registers hold nothing of theirs.
    unsafe {
        if state::MAJOR.load(Ordering::Relaxed) >= 13 {
            capture_info(stream, status, id, graph, deps, edges, ndeps)
        } else {
            capture_info(
                stream,
                status,
                id,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            )
        }
    }
}

/// # Safety
/// Each output NULL or writable (CUDA 12's six-parameter form).
pub unsafe extern "C" fn cudaStreamGetCaptureInfo_v2(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { capture_info(stream, status, id, graph, deps, std::ptr::null_mut(), ndeps) }
}

/// # Safety
/// Each output NULL or writable (CUDA 12's seven-parameter form).
pub unsafe extern "C" fn cudaStreamGetCaptureInfo_v3(
    stream: *mut c_void,
    status: *mut i32,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    ndeps: *mut usize,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { capture_info(stream, status, id, graph, deps, edges, ndeps) }
}

/// Runs a host function in stream order: once the stream's earlier work is
/// done, in the calling thread (which the native runtime leaves free; see
/// cuda.api). Not run when waiting for the stream failed.
///
/// # Safety
/// `func` is NULL or a function that may be called with `data`.
pub unsafe extern "C" fn cudaLaunchHostFunc(
    stream: *mut c_void,
    func: crate::HostFn,
    data: *mut c_void,
) -> i32 {
    let Some(f) = func else {
        return note(cudaErrorInvalidValue);
    };
    // SAFETY: the stream is a handle, checked by the client and the server.
    let r = unsafe { crate::gen::cudaStreamSynchronize(stream) };
    if r != cudaSuccess {
        return r;
    }
    // SAFETY: the caller's contract.
    unsafe { f(data) };
    cudaSuccess
}

/// The older form: the callback also gets the stream and its status (it is
/// called even when waiting for the stream failed); `flags` must be 0.
///
/// # Safety
/// `callback` is NULL or a function that may be called with these arguments.
pub unsafe extern "C" fn cudaStreamAddCallback(
    stream: *mut c_void,
    callback: crate::StreamCallback,
    data: *mut c_void,
    flags: u32,
) -> i32 {
    let (Some(f), 0) = (callback, flags) else {
        return note(cudaErrorInvalidValue);
    };
    // SAFETY: the stream is a handle, checked by the client and the server.
    let r = unsafe { crate::gen::cudaStreamSynchronize(stream) };
    // SAFETY: the caller's contract.
    unsafe { f(stream, r, data) };
    cudaSuccess
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capture_mode_is_per_thread_and_checked() {
        // cudaStreamCaptureModeRelaxed.
        let mut mode = 2;
        // SAFETY: `mode` is a readable and writable int.
        let status = unsafe { cudaThreadExchangeStreamCaptureMode(&mut mode) };
        assert_eq!(status, cudaSuccess);
        assert_eq!(mode, 0, "the default, global, comes back");
        let other = std::thread::spawn(|| {
            let mut mode = 1;
            // SAFETY: as above.
            let status = unsafe { cudaThreadExchangeStreamCaptureMode(&mut mode) };
            (status, mode)
        })
        .join()
        .expect("the thread ends");
        assert_eq!(other, (cudaSuccess, 0), "another thread has its own");
        let mut bad = 3;
        // SAFETY: as above.
        let status = unsafe { cudaThreadExchangeStreamCaptureMode(&mut bad) };
        assert_eq!((status, bad), (cudaErrorInvalidValue, 3));
        let mut back = 0;
        // SAFETY: as above, a local int.
        let status = unsafe { cudaThreadExchangeStreamCaptureMode(&mut back) };
        assert_eq!(status, cudaSuccess);
        assert_eq!(back, 2, "the refused exchange changed nothing");
    }

    #[test]
    fn host_functions_must_be_given() {
        // SAFETY: refused before the stream is used.
        let status =
            unsafe { cudaLaunchHostFunc(std::ptr::null_mut(), None, std::ptr::null_mut()) };
        assert_eq!(status, cudaErrorInvalidValue);
        unsafe extern "C" fn callback(_: *mut c_void, _: i32, _: *mut c_void) {}
        // SAFETY: refused (flags must be 0) before the callback is called.
        let status = unsafe {
            cudaStreamAddCallback(
                std::ptr::null_mut(),
                Some(callback),
                std::ptr::null_mut(),
                1,
            )
        };
        assert_eq!(status, cudaErrorInvalidValue);
    }
}
