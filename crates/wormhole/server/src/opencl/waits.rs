#![allow(non_snake_case)]
//! `clFinish` and `clWaitForEvents`: where the channel can hold a reply
//! back, the wait is made by the library's thread (`finish.rs`) instead of
//! blocking the tenant.

use std::ffi::c_void;

use wormhole_opencl_api::CL_SUCCESS;

use super::ffi;
use super::tenant::Tenant;

/// `clFinish`: where the channel can hold the reply back, a marker's
/// completion publishes it (`finish.rs`); elsewhere the queue is finished
/// here.
///
/// # Safety
/// `queue` is a live command queue from the tenant's table.
pub unsafe fn clFinish(t: &mut Tenant, queue: *mut c_void) -> i32 {
    if t.replies_held {
        // SAFETY: the caller's contract.
        if let Some(w) = unsafe { super::finish::finish(queue) } {
            t.reply_when = Some(w);
            return CL_SUCCESS;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { ffi::clFinish(queue) }
}

/// `clWaitForEvents`: where the channel can hold the reply back, the
/// events' completion publishes it (`finish.rs`); elsewhere the wait is
/// made here.
///
/// # Safety
/// `list` is NULL or points to `n` live events from the tenant's table.
pub unsafe fn clWaitForEvents(t: &mut Tenant, n: u32, list: *const *mut c_void) -> i32 {
    if t.replies_held && n > 0 && !list.is_null() {
        // SAFETY: the caller's contract.
        let events = unsafe { std::slice::from_raw_parts(list, n as usize) };
        // SAFETY: as above.
        if let Some(w) = unsafe { super::finish::wait_for_events(events) } {
            t.reply_when = Some(w);
            return CL_SUCCESS;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { ffi::clWaitForEvents(n, list) }
}
