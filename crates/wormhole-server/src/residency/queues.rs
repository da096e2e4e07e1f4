//! Whether a tenant has work in flight: the queues its commands on tracked
//! objects went to since they were last seen drained. A queue is seen
//! drained when a marker enqueued on it completes (a marker with no wait
//! list waits for every command enqueued before it, in order or not).
//!
//! Residency holds a reference on each such queue, so that its handle
//! stays valid until it is seen drained, even after the client released
//! it.

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

/// Of `queues` (each held), those that ran everything given to them, found
/// within `wait`.
pub(super) fn drained(queues: &[usize], wait: Duration) -> Vec<usize> {
    let mut markers: Vec<(usize, *mut c_void)> = Vec::with_capacity(queues.len());
    for &q in queues {
        let mut ev: *mut c_void = std::ptr::null_mut();
        // SAFETY: `q` is held (a live queue); `ev` receives the marker's
        // event, which we release below.
        let s = unsafe {
            ffi::clEnqueueMarkerWithWaitList(q as *mut c_void, 0, std::ptr::null(), &mut ev)
        };
        if s == CL_SUCCESS && !ev.is_null() {
            // SAFETY: as above.
            unsafe { ffi::clFlush(q as *mut c_void) };
            markers.push((q, ev));
        }
    }
    let deadline = Instant::now() + wait;
    let mut done = Vec::new();
    let mut pause = Duration::from_micros(20);
    loop {
        markers.retain(|&(q, ev)| {
            // SAFETY: a live event of ours; the answer is a cl_int.
            let st = unsafe {
                info_value::<i32>(ffi::clGetEventInfo, ev, CL_EVENT_COMMAND_EXECUTION_STATUS)
            };
            // Complete (0) or ended in error (< 0): nothing runs any more.
            let finished = st.is_some_and(|s| s <= 0);
            if finished {
                // SAFETY: our marker's event, released once.
                unsafe { ffi::clReleaseEvent(ev) };
                done.push(q);
            }
            !finished
        });
        if markers.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(1));
    }
    for (_, ev) in markers {
        // SAFETY: our marker's event, released once; the marker itself
        // completes on its own.
        unsafe { ffi::clReleaseEvent(ev) };
    }
    done
}
