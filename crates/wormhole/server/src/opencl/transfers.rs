#![allow(non_snake_case)]
//! Buffer reads and writes whose data travels in the request or reply:
//! small reads completed from the library's thread, small non-blocking
//! writes run on a kept copy of their data.

use std::ffi::c_void;

use wormhole_opencl_api::CL_SUCCESS;

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
    t: &mut Tenant,
    queue: *mut c_void,
    buffer: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    n: u32,
    wait_list: *const *mut c_void,
    event: *mut *mut c_void,
) -> i32 {
    if t.replies_held && !ptr.is_null() && size > 0 && size <= super::finish::HELD_READ_MAX {
        // SAFETY: the caller's contract.
        let w =
            unsafe { super::finish::read_buffer(queue, buffer, offset, size, n, wait_list, event) };
        if let Some(w) = w {
            t.reply_when = Some(w);
            return CL_SUCCESS;
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        ffi::clEnqueueReadBuffer(
            queue, buffer, blocking, offset, size, ptr, n, wait_list, event,
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
const CL_COMPLETE: i32 = 0;

/// A non-blocking write's data, kept until its command ran.
struct KeptWrite {
    data: Box<[u8]>,
    held: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The `CL_COMPLETE` callback of a kept write (on the library's thread).
unsafe extern "C" fn kept_write_done(_ev: *mut c_void, _status: i32, user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Box::into_raw` made for this one
    // registration, and a callback runs once: taken back exactly once.
    let k = unsafe { Box::from_raw(user_data as *mut KeptWrite) };
    k.held
        .fetch_sub(k.data.len() as u64, std::sync::atomic::Ordering::Relaxed);
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
    t: &mut Tenant,
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *const c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    use std::sync::atomic::Ordering;
    let held = &t.kept_writes;
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
        // SAFETY: forwarded contract; blocking, so `ptr` outlives the call.
        return unsafe { ffi::clEnqueueWriteBuffer(q, buf, CL_TRUE, offset, size, ptr, n, wl, ev) };
    }
    // SAFETY: `ptr` holds `size` bytes (the caller's contract).
    let data: Box<[u8]> = unsafe { std::slice::from_raw_parts(ptr as *const u8, size) }.into();
    let mut own: *mut c_void = std::ptr::null_mut();
    // SAFETY: forwarded contract; `data` is handed to the callback below,
    // which frees it only once the command completed.
    let s = unsafe {
        ffi::clEnqueueWriteBuffer(
            q,
            buf,
            CL_FALSE,
            offset,
            size,
            data.as_ptr().cast(),
            n,
            wl,
            &mut own,
        )
    };
    if s != CL_SUCCESS {
        held.fetch_sub(size as u64, Ordering::Relaxed);
        return s;
    }
    let k = Box::into_raw(Box::new(KeptWrite {
        data,
        held: held.clone(),
    }));
    // SAFETY: `own` is the command's event; `kept_write_done` has OpenCL's
    // event-callback signature and takes `k` back.
    let r = unsafe {
        ffi::clSetEventCallback(own, CL_COMPLETE, kept_write_done as *mut c_void, k.cast())
    };
    if r != CL_SUCCESS {
        // No word of when the library is done with the data: wait for it.
        // SAFETY: one event, ours; then `k` was never registered, so ours.
        unsafe {
            ffi::clWaitForEvents(1, &own);
            kept_write_done(own, CL_COMPLETE, k.cast());
        }
    }
    if ev.is_null() {
        // The command keeps its event alive until it completed.
        // SAFETY: our reference, not handed out.
        unsafe { ffi::clReleaseEvent(own) };
    } else {
        // SAFETY: `ev` is the decoder's out-slot.
        unsafe { *ev = own };
    }
    CL_SUCCESS
}
