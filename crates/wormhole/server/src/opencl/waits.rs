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
pub unsafe fn clFinish(tenant: &mut Tenant, queue: *mut c_void) -> i32 {
    if tenant.replies_held {
        // SAFETY: `queue` is a live queue from the tenant's table (the
        // decoder refused NULL), what `finish::finish` needs.
        if let Some(wait) = unsafe { super::finish::finish(queue) } {
            tenant.reply_when = Some(wait);
            return CL_SUCCESS;
        }
    }
    // SAFETY: `queue` is a live queue from the tenant's table.
    unsafe { ffi::clFinish(queue) }
}

/// `clWaitForEvents`: where the channel can hold the reply back, the
/// events' completion publishes it (`finish.rs`); elsewhere the wait is
/// made here.
///
/// # Safety
/// `list` is NULL or points to `num_events` live events from the tenant's table.
pub unsafe fn clWaitForEvents(
    tenant: &mut Tenant,
    num_events: u32,
    list: *const *mut c_void,
) -> i32 {
    if tenant.replies_held && num_events > 0 && !list.is_null() {
        // SAFETY: `list` is non-NULL (checked above), so the decoder's
        // vector of at least `num_events` events (`check_count`).
        let events = unsafe { std::slice::from_raw_parts(list, num_events as usize) };
        // SAFETY: every entry is a live event from the tenant's table (the
        // decoder's `handles` refused NULL and unknown ids).
        if let Some(wait) = unsafe { super::finish::wait_for_events(events) } {
            tenant.reply_when = Some(wait);
            return CL_SUCCESS;
        }
    }
    // SAFETY: `list` is NULL or at least `num_events` events from the
    // tenant's table; the library refuses a NULL list itself.
    unsafe { ffi::clWaitForEvents(num_events, list) }
}
