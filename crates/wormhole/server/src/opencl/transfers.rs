#![allow(non_snake_case)]
//! Buffer reads and writes whose data travels in the request or reply:
//! small reads completed from the library's thread, small non-blocking
//! writes run on a kept copy of their data.

use std::ffi::c_void;

use wormhole_opencl_api::{CL_COMPLETE, CL_SUCCESS};

use super::ffi;
use super::tenant::Tenant;
use super::CL_TRUE;

/// A buffer read (run blocking, the data in the reply). Where the channel
/// can hold the reply back, a small read completes it from the library's
/// thread (`finish.rs`) instead of blocking the tenant.
///
/// # Safety
/// As for the library's function, with handles from the tenant's table.
#[allow(clippy::too_many_arguments)]
pub unsafe fn clEnqueueReadBuffer(
    tenant: &mut Tenant,
    queue: *mut c_void,
    buffer: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    num_events: u32,
    wait_list: *const *mut c_void,
    event: *mut *mut c_void,
) -> i32 {
    if tenant.replies_held && !ptr.is_null() && size > 0 && size <= super::finish::HELD_READ_MAX {
        // SAFETY: `queue` and `buffer` are from the tenant's table, the
        // wait list holds `num_events` events from it (the decoder's
        // `check_count`), `event` is NULL or the decoder's slot: what
        // `finish::read_buffer` needs (it reads into memory of its own).
        let wait = unsafe {
            super::finish::read_buffer(queue, buffer, offset, size, num_events, wait_list, event)
        };
        if let Some(wait) = wait {
            tenant.reply_when = Some(wait);
            return CL_SUCCESS;
        }
    }
    // SAFETY: handles and wait list as just above; `ptr` is NULL or the
    // decoder's `out_buf` of `size` bytes, and `blocking` is CL_TRUE
    // (`server_blocking`), so the library is done with it on return. The
    // library bounds offset + size by the buffer.
    unsafe {
        ffi::clEnqueueReadBuffer(
            queue, buffer, blocking, offset, size, ptr, num_events, wait_list, event,
        )
    }
}

/// Non-blocking writes up to this size (the ones whose data travels in the
/// request) are copied and left to run; larger ones come as bulk transfers.
const KEPT_WRITE_MAX: usize = 256 << 10;
/// The most bytes of such copies one tenant holds at once; past it, writes
/// run blocking as before, so a client cannot grow the tenant without bound.
const KEPT_WRITES_CAP: u64 = 16 << 20;
const CL_FALSE: u32 = 0;

/// A non-blocking write's data, kept until its command ran.
struct KeptWrite {
    data: Box<[u8]>,
    held: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The `CL_COMPLETE` callback of a kept write (on the library's thread).
unsafe extern "C" fn kept_write_done(_ev: *mut c_void, _status: i32, user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Box::into_raw` made for this one
    // registration, and a callback runs once: taken back exactly once.
    let kept_write = unsafe { Box::from_raw(user_data as *mut KeptWrite) };
    kept_write.held.fetch_sub(
        kept_write.data.len() as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// A buffer write. Its data lives in the request's frame, which the next
/// request reuses, so the server used to run every write blocking: a
/// non-blocking write behind a long kernel then held the tenant, and every
/// later call of the client's threads, until the kernel ended. A small
/// non-blocking write now has its data copied and runs as asked; the copy
/// goes when the library reports the command complete. (PoCL 3.1 calls no
/// callback for a failed command: that copy stays, counted against
/// [`KEPT_WRITES_CAP`].)
///
/// # Safety
/// Pointer arguments as for `clEnqueueWriteBuffer`, `ptr` holding `size`
/// bytes when not NULL (the decoder checked), handles from the tenant's table.
#[allow(clippy::too_many_arguments)]
pub unsafe fn clEnqueueWriteBuffer(
    tenant: &mut Tenant,
    queue: *mut c_void,
    buffer: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *const c_void,
    num_events: u32,
    wait_list: *const *mut c_void,
    event: *mut *mut c_void,
) -> i32 {
    use std::sync::atomic::Ordering;
    let held = &tenant.kept_writes;
    let kept = blocking == 0
        && !ptr.is_null()
        && size > 0
        && size <= KEPT_WRITE_MAX
        && held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                (h + size as u64 <= KEPT_WRITES_CAP).then_some(h + size as u64)
            })
            .is_ok();
    if !kept {
        // SAFETY: `queue` and `buffer` are from the tenant's table, the wait
        // list holds `num_events` events from it (`check_count`), `event`
        // is NULL or the decoder's slot; `ptr` is NULL or holds `size` bytes
        // of the request (`check_len`), read before a blocking call returns.
        return unsafe {
            ffi::clEnqueueWriteBuffer(
                queue, buffer, CL_TRUE, offset, size, ptr, num_events, wait_list, event,
            )
        };
    }
    // SAFETY: `ptr` is non-NULL (`kept` checked), so it holds at least
    // `size` bytes of the request (the decoder's `check_len`).
    let data: Box<[u8]> = unsafe { std::slice::from_raw_parts(ptr as *const u8, size) }.into();
    let mut own: *mut c_void = std::ptr::null_mut();
    // SAFETY: handles and wait list as for the blocking write above;
    // `data` is our copy of `size` bytes, handed to the callback below,
    // which frees it only once the command completed; `own` is our local.
    let status = unsafe {
        ffi::clEnqueueWriteBuffer(
            queue,
            buffer,
            CL_FALSE,
            offset,
            size,
            data.as_ptr().cast(),
            num_events,
            wait_list,
            &mut own,
        )
    };
    if status != CL_SUCCESS {
        held.fetch_sub(size as u64, Ordering::Relaxed);
        return status;
    }
    let kept_write = Box::into_raw(Box::new(KeptWrite {
        data,
        held: held.clone(),
    }));
    // SAFETY: `own` is the command's event; `kept_write_done` has OpenCL's
    // event-callback signature and takes `kept_write` back.
    let registered = unsafe {
        ffi::clSetEventCallback(
            own,
            CL_COMPLETE,
            kept_write_done as *mut c_void,
            kept_write.cast(),
        )
    };
    if registered != CL_SUCCESS {
        // No word of when the library is done with the data: wait for it.
        // SAFETY: one event, ours; then `kept_write` was never registered,
        // so ours to take back.
        unsafe {
            ffi::clWaitForEvents(1, &own);
            kept_write_done(own, CL_COMPLETE, kept_write.cast());
        }
    }
    if event.is_null() {
        // The command keeps its event alive until it completed.
        // SAFETY: our reference, not handed out.
        unsafe { ffi::clReleaseEvent(own) };
    } else {
        // SAFETY: `event` is non-NULL, so the decoder's out-slot.
        unsafe { *event = own };
    }
    CL_SUCCESS
}
