//! User events, waits and clFinish, and the settling of a wait list before
//! a call the server runs blocking.
#![allow(non_snake_case)]

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{Kind, CL_SUCCESS};

use crate::gen;
use crate::later::fail_later_transfers;
use crate::objects::obj;
use crate::waits;

/// Before a call the server runs blocking: when waits leave the channel
/// free ([`waits::free_channel`]), wait here first, so that the process's
/// other threads (one of which may set a user event this waits for) reach
/// the server meanwhile. That includes transfers the application made
/// non-blocking: the server runs every read, rectangle and image transfer,
/// and buffer writes of [`BULK_MIN`] or more, blocking all the same (only
/// smaller buffer writes it keeps and runs as asked), and every map, so the
/// calling thread waits for its answer either way. But not a non-blocking one while a user
/// event is open: this very thread may set that event once we return, so
/// such transfers complete later instead.
///
/// # Safety
/// `wl` holds `n` events (the caller's contract).
unsafe fn settle(q: *mut c_void, n: u32, wl: *const *mut c_void) -> Result<(), i32> {
    if !waits::free_channel() {
        return Ok(());
    }
    // On an out-of-order queue a command waits for its wait list only; a
    // marker without one would wait for every command before it.
    let in_order =
        || matches!(obj(q, Kind::Queue), Ok(Some(o)) if o.in_order.load(Ordering::Relaxed));
    if n == 0 && !in_order() {
        return Ok(());
    }
    // SAFETY: `wl` is NULL or holds `n` events (this fn's contract, the enqueue's event_wait_list);
    // waits::settle only passes it to the marker's forwarder, which refuses a NULL list with `n >
    // 0`.
    unsafe { waits::settle(q, n, wl) }.map(|_| ())
}

/// [`settle`] before a call the server runs blocking, which the
/// application made blocking (`blocking` non-zero: a failure of what it
/// waits for is its error) or not (that failure is the forwarded call's to
/// report, as it was before; and nothing is settled while a user event is
/// open).
///
/// # Safety
/// `wl` holds `n` events (the caller's contract).
pub(crate) unsafe fn settle_for(
    blocking: u32,
    q: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
) -> Result<(), i32> {
    if blocking != 0 {
        // SAFETY: `wl` is NULL or holds `n` events (this fn's contract, the enqueue's
        // event_wait_list), which settle needs.
        return unsafe { settle(q, n, wl) };
    }
    if !waits::user_events_open() {
        // SAFETY: `wl` is NULL or holds `n` events (this fn's contract, the enqueue's
        // event_wait_list), which settle needs.
        let _ = unsafe { settle(q, n, wl) };
    }
    Ok(())
}

/// # Safety
/// As for `clCreateUserEvent`.
pub unsafe extern "C" fn clCreateUserEvent(ctx: *mut c_void, err: *mut i32) -> *mut c_void {
    // SAFETY: the arguments are the application's, passed unchanged: clCreateUserEvent's contract
    // (`err` NULL or writable) is the generated forwarder's.
    let e = unsafe { gen::clCreateUserEvent(ctx, err) };
    if let Ok(Some(o)) = obj(e, Kind::Event) {
        o.user_pending.store(true, Ordering::Relaxed);
        waits::user_event_opened();
    }
    e
}

/// # Safety
/// As for `clSetUserEventStatus`.
pub unsafe extern "C" fn clSetUserEventStatus(ev: *mut c_void, status: i32) -> i32 {
    // SAFETY: the arguments are the application's, passed unchanged: clSetUserEventStatus's
    // contract is the generated forwarder's.
    let s = unsafe { gen::clSetUserEventStatus(ev, status) };
    if s == CL_SUCCESS {
        if let Ok(Some(o)) = obj(ev, Kind::Event) {
            if o.user_pending.swap(false, Ordering::Relaxed) {
                waits::user_event_set();
            }
        }
        crate::event_state::note_status(ev, status);
        if status < 0 {
            fail_later_transfers();
        }
    }
    s
}

/// # Safety
/// As for `clWaitForEvents`.
pub unsafe extern "C" fn clWaitForEvents(n: u32, list: *const *mut c_void) -> i32 {
    if let Some(s) = wait_known_complete(n, list) {
        return s;
    }
    let s = if waits::free_channel() && n > 0 && !list.is_null() {
        // SAFETY: `list` is non-NULL and `n > 0` (checked above), and holds `n` events by
        // clWaitForEvents' contract on event_list.
        let events = unsafe { std::slice::from_raw_parts(list, n as usize) };
        if let Err(e) = waits::timed(|| waits::wait(events)) {
            return e;
        }
        // The call below then returns at once, with its own status.
        // SAFETY: the arguments are the application's, passed unchanged: clWaitForEvents' contract
        // is the generated forwarder's.
        unsafe { gen::clWaitForEvents(n, list) }
    } else {
        // SAFETY: the arguments are the application's, passed unchanged: clWaitForEvents' contract
        // is the generated forwarder's.
        waits::timed(|| unsafe { gen::clWaitForEvents(n, list) })
    };
    if s == CL_SUCCESS && n > 0 && !list.is_null() {
        // SAFETY: `list` is non-NULL and `n > 0` (checked above), and holds `n` events by
        // clWaitForEvents' contract; the call only read it.
        crate::event_state::note_all_complete(unsafe {
            std::slice::from_raw_parts(list, n as usize)
        });
    }
    s
}

/// A marker: complete at once when its queue had run everything before it
/// (`connection::marker_on_drained`), which the client then knows, so a
/// wait for it needs no round trip.
///
/// # Safety
/// As for `clEnqueueMarkerWithWaitList`.
pub unsafe extern "C" fn clEnqueueMarkerWithWaitList(
    q: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    // SAFETY: the arguments are the application's, passed unchanged to the generated forwarder,
    // whose contract (clEnqueueMarkerWithWaitList's: `wl` holds `n` events, `ev` NULL or
    // writable) is this fn's.
    let s = unsafe { gen::clEnqueueMarkerWithWaitList(q, n, wl, ev) };
    if n == 0 {
        // SAFETY: `ev` is NULL or writable (this fn's contract), and the call just made it.
        unsafe { note_marker(q, ev, s) };
    }
    s
}

/// OpenCL 1.0's marker: as [`clEnqueueMarkerWithWaitList`] with no wait
/// list (its event is not optional).
///
/// # Safety
/// As for `clEnqueueMarker`.
pub unsafe extern "C" fn clEnqueueMarker(q: *mut c_void, ev: *mut *mut c_void) -> i32 {
    // SAFETY: as for clEnqueueMarkerWithWaitList: `ev` is the application's, NULL or writable.
    let s = unsafe { gen::clEnqueueMarker(q, ev) };
    // SAFETY: `ev` is NULL or writable (this fn's contract), and the call just made it.
    unsafe { note_marker(q, ev, s) };
    s
}

/// After a marker with no wait list was enqueued on `q` with status `s`:
/// notes its event complete if the queue had drained before it.
///
/// # Safety
/// `ev` is NULL or the event out-pointer the marker call just wrote.
unsafe fn note_marker(q: *mut c_void, ev: *mut *mut c_void, s: i32) {
    if s != CL_SUCCESS || ev.is_null() {
        return;
    }
    // SAFETY: `ev` is non-NULL and the marker call succeeded, so it wrote the new event there
    // (this fn's contract).
    let e = unsafe { *ev };
    if crate::connection::marker_on_drained(q, e) {
        crate::event_state::note_status(e, CL_SUCCESS);
    }
}

/// A wait for one event this side knows completed (see `event_state`):
/// answered here, with an earlier deferred failure not yet reported, as
/// the server's answer would carry it.
fn wait_known_complete(n: u32, list: *const *mut c_void) -> Option<i32> {
    if n != 1 || list.is_null() {
        return None;
    }
    // SAFETY: `list` is non-NULL and `n == 1`, and it holds `n` events (clWaitForEvents'
    // contract on event_list), so one handle is readable.
    let e = unsafe { *list };
    let o = obj(e, Kind::Event).ok()??;
    (crate::event_state::ended(o)? == CL_SUCCESS).then(crate::connection::take_deferred)
}

/// # Safety
/// As for `clFinish`.
pub unsafe extern "C" fn clFinish(q: *mut c_void) -> i32 {
    // Libraries finish after each read (CLBlast does): the read already
    // waited for everything before it.
    if let Some(s) = crate::connection::finish_drained(q) {
        return s;
    }
    if waits::free_channel() {
        // SAFETY: no wait list.
        if let Ok(true) = unsafe { waits::settle(q, 0, std::ptr::null()) } {
            // Everything enqueued before this call is done: what is left to
            // report is an earlier deferred failure, as the server's answer
            // would. (A failed command is clFinish's to report, or not:
            // that case asks the server, below.)
            return crate::connection::take_deferred();
        }
    }
    // SAFETY: `q` is the application's, passed unchanged: clFinish's contract is the generated
    // forwarder's.
    waits::timed(|| unsafe { gen::clFinish(q) })
}
