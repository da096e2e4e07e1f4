//! Whether a tenant has work in flight: the queues its commands on tracked
//! objects went to since they were last seen drained. A queue is seen
//! drained when a marker enqueued on it completes (a marker with no wait
//! list waits for every command enqueued before it, in order or not).
//!
//! Residency holds a reference on each such queue, so that its handle
//! stays valid until it is seen drained, even after the client released
//! it. And it holds each marker's event until the marker has completed:
//! PoCL 3.1 aborts the process when a command whose event was released
//! fails later because a command before it failed (docs/wormhole-security.md,
//! "Library gaps"); a marker behind a read gated on a user event that the
//! client sets to an error is such a command. A marker still pending is
//! looked at again next time, not enqueued again.

use std::ffi::c_void;
use std::time::{Duration, Instant};

use wormhole_opencl_api::CL_SUCCESS;

use crate::opencl::{ffi, info_value};

const CL_EVENT_COMMAND_EXECUTION_STATUS: u32 = 0x11D3;

/// Takes residency's reference on a queue it starts tracking.
pub(super) fn hold(q: usize) {
    // SAFETY: `q` is a live queue from the tenant's table (the serving
    // thread is in the call that named it).
    unsafe { ffi::clRetainCommandQueue(q as *mut c_void) };
}

/// Drops the reference [`hold`] took.
pub(super) fn let_go(q: usize) {
    // SAFETY: residency holds a reference on `q` since `hold`.
    unsafe { ffi::clReleaseCommandQueue(q as *mut c_void) };
}

/// Whether a marker's event says nothing before it runs any more:
/// complete (0) or ended in error (< 0).
fn finished(ev: usize) -> bool {
    // SAFETY: a live event of ours (held until it finished); the answer
    // is a cl_int.
    let st = unsafe {
        info_value::<i32>(
            ffi::clGetEventInfo,
            ev as *mut c_void,
            CL_EVENT_COMMAND_EXECUTION_STATUS,
        )
    };
    st.is_some_and(|s| s <= 0)
}

fn release(ev: usize) {
    // SAFETY: our marker's event, finished, released once.
    unsafe { ffi::clReleaseEvent(ev as *mut c_void) };
}

/// A fresh marker on held queue `q`, its event ours.
fn marker(q: usize) -> Option<usize> {
    let mut ev: *mut c_void = std::ptr::null_mut();
    // SAFETY: `q` is held (a live queue); `ev` receives the marker's
    // event, which we keep until it finished.
    let s =
        unsafe { ffi::clEnqueueMarkerWithWaitList(q as *mut c_void, 0, std::ptr::null(), &mut ev) };
    if s != CL_SUCCESS || ev.is_null() {
        return None;
    }
    // SAFETY: `q` is the held live queue the marker was just enqueued on.
    unsafe { ffi::clFlush(q as *mut c_void) };
    Some(ev as usize)
}

/// What a look at the queues found.
pub(super) struct Drained {
    /// Queues that ran everything given to them (their markers released).
    pub done: Vec<usize>,
    /// Queues still at work, with the marker that waits behind it, held.
    pub pending: Vec<(usize, usize)>,
}

/// Looks at `queues` (each held; each with the marker left pending on it
/// last time, if any), waiting at most `wait` for them to drain.
pub(super) fn drained(queues: &[(usize, Option<usize>)], wait: Duration) -> Drained {
    let mut out = Drained {
        done: Vec::new(),
        pending: Vec::new(),
    };
    let mut watching: Vec<(usize, usize)> = Vec::with_capacity(queues.len());
    for &(q, old) in queues {
        match old {
            // Still at work behind the old marker: no new one needed.
            Some(ev) if !finished(ev) => out.pending.push((q, ev)),
            // The old one finished, but commands may have come after it.
            Some(ev) => {
                release(ev);
                match marker(q) {
                    Some(ev) => watching.push((q, ev)),
                    None => log::debug!("residency: no marker on a queue"),
                }
            }
            None => match marker(q) {
                Some(ev) => watching.push((q, ev)),
                None => log::debug!("residency: no marker on a queue"),
            },
        }
    }
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_micros(20);
    loop {
        watching.retain(|&(q, ev)| {
            let f = finished(ev);
            if f {
                release(ev);
                out.done.push(q);
            }
            !f
        });
        if watching.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
    out.pending.extend(watching);
    out
}
