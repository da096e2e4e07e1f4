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
    // SAFETY: `mode` is non-NULL (checked above), and a non-NULL one is a
    // readable and writable int: cudaThreadExchangeStreamCaptureMode's
    // contract.
    let wanted = unsafe { *mode };
    if !(0..=2).contains(&wanted) {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: the same non-NULL, writable int the read above used.
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
    // SAFETY: `status` is non-NULL (checked above), and a non-NULL one is a
    // writable cudaStreamCaptureStatus: this function's contract, from
    // cudaStreamGetCaptureInfo's; the stub looks `stream` up, unread.
    let r = unsafe { crate::gen::cudaStreamIsCapturing(stream, status) };
    if r != cudaSuccess {
        return r;
    }
    // SAFETY: each output is NULL or writable for its type: this
    // function's contract, from cudaStreamGetCaptureInfo's; `put` skips
    // the NULL ones.
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
    // SAFETY: a CUDA 13 caller's seven outputs are each NULL or writable
    // (CUDA 13's cudaStreamGetCaptureInfo contract); a CUDA 12 caller
    // passed only `stream`, `status` and `id` (NULL or writable by CUDA
    // 12's), so the other four registers hold nothing of theirs and are
    // replaced by NULL, which capture_info skips.
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
    // SAFETY: each output is NULL or writable (CUDA 12's
    // cudaStreamGetCaptureInfo_v2 contract), and `edges`, which this form
    // lacks, is NULL: capture_info's contract.
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
    // SAFETY: each output is NULL or writable (CUDA 12's
    // cudaStreamGetCaptureInfo_v3 contract): capture_info's contract.
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
    // SAFETY: `f` is the application's host function, which
    // cudaLaunchHostFunc's contract lets be called once with `data`; the
    // stream's earlier work is done, as the call's order requires.
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
    // SAFETY: `f` is the application's callback, which
    // cudaStreamAddCallback's contract lets be called once with the
    // stream, its status and `data`, after the stream's earlier work.
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
            // SAFETY: `mode` is this thread's local int, readable and
            // writable.
            let status = unsafe { cudaThreadExchangeStreamCaptureMode(&mut mode) };
            (status, mode)
        })
        .join()
        .expect("the thread ends");
        assert_eq!(other, (cudaSuccess, 0), "another thread has its own");
        let mut bad = 3;
        // SAFETY: `bad` is a local int, readable and writable.
        let status = unsafe { cudaThreadExchangeStreamCaptureMode(&mut bad) };
        assert_eq!((status, bad), (cudaErrorInvalidValue, 3));
        let mut back = 0;
        // SAFETY: `back` is a local int, readable and writable.
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
