//! What the client knows of an event for good: its end, and the values
//! that never change.
//!
//! An event's execution status changes until the command completes or
//! fails; from then on it never changes again. So once the server has told
//! this side that an event ended, the status is answered here: a
//! `clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)` whose answer was
//! `CL_COMPLETE` or an error, a `clWaitForEvents` that succeeded (every one
//! of its events is then `CL_COMPLETE`), a callback the server reports with
//! such a status, or a user event the application set. Nothing is inferred
//! from timing or from what a queue probably did: until one of those
//! answers comes, the status is asked of the server as before.
//!
//! An event's queue, context and command type never change either, and are
//! kept like the other objects' cached answers (`info_cache`).

#![allow(non_snake_case)]

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{
    func, Kind, CL_EVENT_COMMAND_EXECUTION_STATUS, CL_EVENT_COMMAND_QUEUE, CL_EVENT_COMMAND_TYPE,
    CL_EVENT_CONTEXT, CL_SUCCESS,
};

use crate::info_cache::{answer, cached_info, CachedQuery};
use crate::objects::{obj, Obj};

const CL_EVENT_REFERENCE_COUNT: u32 = 0x11D2;

/// `Obj::ended` of an event not known to have ended (every execution
/// status is at most `CL_QUEUED`, 3).
pub const NOT_ENDED: i32 = i32::MAX;

/// The status an event ended with, if the server said so.
pub fn ended(o: &Obj) -> Option<i32> {
    match o.ended.load(Ordering::Acquire) {
        NOT_ENDED => None,
        s => Some(s),
    }
}

/// Notes what the server said of `ev`'s status: kept if it is an end
/// (`CL_COMPLETE`, 0, or an error), which no later answer can change.
pub fn note_status(ev: *mut c_void, status: i32) {
    if status > 0 {
        return;
    }
    if let Ok(Some(o)) = obj(ev, Kind::Event) {
        // The first end reported is the end: keep it if another thread
        // noted one already.
        let _ = o
            .ended
            .compare_exchange(NOT_ENDED, status, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A `clWaitForEvents` on `events` succeeded: each is `CL_COMPLETE` (a
/// failed one would have made it return
/// `CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST`).
pub fn note_all_complete(events: &[*mut c_void]) {
    for &e in events {
        note_status(e, 0);
    }
}

/// An event's status: from what this side knows, else from the server.
pub fn status(ev: *mut c_void) -> Result<i32, i32> {
    if let Ok(Some(o)) = obj(ev, Kind::Event) {
        if let Some(s) = ended(o) {
            return Ok(s);
        }
    }
    let s = crate::connection::info_value(
        crate::gen::clGetEventInfo,
        ev,
        CL_EVENT_COMMAND_EXECUTION_STATUS,
    )?;
    note_status(ev, s);
    Ok(s)
}

/// `clGetEventInfo`: an ended event's status, and the values that never
/// change, answered here once known, and the reference count from the
/// application's own; everything else (a status still changing, any invalid
/// argument) asked of the server.
///
/// # Safety
/// As for `clGetEventInfo`.
pub unsafe extern "C" fn clGetEventInfo(
    ev: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // A stand-in event's command type is `later`'s to answer.
    let ask = |size, value, size_ret| {
        // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` NULL or writable: the
        // application's, by clGetEventInfo's contract, or `cached_info`'s own buffer of the size it
        // gives when it learns a value; that is what `answer` needs (it checks `size` before it
        // writes) and what the generated forwarder passes on.
        unsafe {
            match crate::later::stand_in_command_type(ev, param) {
                Some(ty) => answer(&ty.to_ne_bytes(), size, value, size_ret),
                None => crate::gen::clGetEventInfo(ev, param, size, value, size_ret),
            }
        }
    };
    match param {
        CL_EVENT_COMMAND_EXECUTION_STATUS => {
            if let Ok(Some(o)) = obj(ev, Kind::Event) {
                if let Some(s) = ended(o) {
                    // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` NULL or a
                    // writable size_t by clGetEventInfo's contract, which is answer's.
                    return unsafe { answer(&s.to_ne_bytes(), size, value, size_ret) };
                }
            }
            let s = ask(size, value, size_ret);
            if s == CL_SUCCESS && !value.is_null() && size >= 4 {
                // SAFETY: the library wrote a cl_int there.
                let st = unsafe { std::ptr::read_unaligned(value.cast::<i32>()) };
                note_status(ev, st);
            }
            s
        }
        CL_EVENT_REFERENCE_COUNT => {
            // The application's own count, as the peer (PoCL-remote) answers it: the library's
            // may add references of its own, and the value is only ever a hint (the spec says
            // so), stale as soon as it is read.
            match obj(ev, Kind::Event) {
                Ok(Some(o)) if o.app_refs() > 0 => {
                    // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` NULL or a
                    // writable size_t by clGetEventInfo's contract, which is answer's.
                    unsafe { answer(&o.app_refs().to_ne_bytes(), size, value, size_ret) }
                }
                _ => ask(size, value, size_ret),
            }
        }
        CL_EVENT_COMMAND_QUEUE | CL_EVENT_COMMAND_TYPE | CL_EVENT_CONTEXT => {
            let q = CachedQuery {
                func: func::clGetEventInfo,
                obj: ev,
                kind: Kind::Event,
                extra: Some(0),
                param,
                mutable: &[CL_EVENT_REFERENCE_COUNT, CL_EVENT_COMMAND_EXECUTION_STATUS],
            };
            // SAFETY: `value` is NULL or holds `size` bytes and `size_ret` NULL or a writable
            // size_t by clGetEventInfo's contract; `ask` makes the call with such arguments, as
            // cached_info requires.
            unsafe { cached_info(q, size, value, size_ret, &ask) }
        }
        _ => ask(size, value, size_ret),
    }
}
