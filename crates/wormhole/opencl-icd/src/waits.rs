//! Waiting with the channel free.
//!
//! All of a process's calls share one channel, and the tenant serves it
//! with one thread, so a wait the server runs blocking (`clFinish`,
//! `clWaitForEvents`, a blocking read) holds up every other thread's calls
//! until it returns. Natively the others go on. So a wait is done here
//! first, with the channel free, when a user event is open (only another
//! call can set it: holding the channel could deadlock), and when more than
//! one of the application's threads calls OpenCL and this process's waits
//! have lately been long ([`LONG_WAIT`]): a marker or the events themselves
//! get a `CL_COMPLETE` callback, and the thread sleeps on a condition
//! variable until the server's notification arrives. That costs about a
//! round trip more than a blocking wait, so short waits still block: they
//! delay the other threads by less than it would cost.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wormhole_opencl_api::{CL_COMPLETE, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, CL_SUCCESS};

use crate::gen;

/// Waits are long, for [`free_channel`], when a moving average of the last
/// few reaches this. Well above what a free wait costs more (tens of us).
const LONG_WAIT: Duration = Duration::from_micros(250);

/// User events created and not yet set.
static OPEN_USER_EVENTS: AtomicUsize = AtomicUsize::new(0);

/// A moving average of how long waits took, in ns (each new one weighs 1/4).
static RECENT_WAIT_NS: AtomicU64 = AtomicU64::new(0);

/// A user event was created.
pub fn user_event_opened() {
    OPEN_USER_EVENTS.fetch_add(1, Ordering::Relaxed);
}

/// A user event's status was set (once per event).
pub fn user_event_set() {
    OPEN_USER_EVENTS.fetch_sub(1, Ordering::Relaxed);
}

/// Whether a user event is open.
pub fn user_events_open() -> bool {
    OPEN_USER_EVENTS.load(Ordering::Relaxed) > 0
}

/// Whether the wait about to start should leave the channel free (see the
/// module's text).
pub fn free_channel() -> bool {
    // A thread whose first call is a wait counts as calling too.
    crate::connection::count_caller();
    user_events_open()
        || (crate::connection::several_callers()
            && RECENT_WAIT_NS.load(Ordering::Relaxed) >= LONG_WAIT.as_nanos() as u64)
}

/// Whether a program build should leave the channel free: whenever more
/// than one of the application's threads calls OpenCL, since a build is
/// always long against what leaving the channel free costs.
pub fn free_channel_for_build() -> bool {
    crate::connection::count_caller();
    crate::connection::several_callers()
}

/// Runs a wait and adds how long it took to the average (a race between
/// threads may lose a sample; it is an estimate).
pub fn timed<T>(f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let r = f();
    let d = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let avg = RECENT_WAIT_NS.load(Ordering::Relaxed);
    RECENT_WAIT_NS.store(avg - avg / 4 + d / 4, Ordering::Relaxed);
    r
}

/// An event's execution status (negative: it failed).
pub fn event_status(e: *mut c_void) -> Result<i32, i32> {
    crate::event_state::status(e)
}

/// Whether all `events` completed (`Ok(true)`), or one failed.
fn all_complete(events: &[*mut c_void]) -> Result<bool, i32> {
    let mut done = true;
    for &e in events {
        let st = event_status(e)?;
        if st < 0 {
            return Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
        }
        done &= st == CL_COMPLETE;
    }
    Ok(done)
}

/// Callbacks still to come for one wait.
struct Wake {
    left: Mutex<usize>,
    done: Condvar,
}

/// The `CL_COMPLETE` callback of a wait, run by the notifier thread.
unsafe extern "C" fn woken(_ev: *mut c_void, _status: i32, user_data: *mut c_void) {
    // SAFETY: `user_data` is a reference `wait` made with `Arc::into_raw`
    // for this one registration; a callback runs at most once, so it is
    // taken back exactly once.
    let w = unsafe { Arc::from_raw(user_data as *const Wake) };
    let mut left = w.left.lock().unwrap_or_else(|p| p.into_inner());
    *left = left.saturating_sub(1);
    w.done.notify_all();
}

/// Returns when all `events` completed or one failed
/// (`CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST`), holding the channel
/// only for short calls. The callbacks wake it; the events are also asked
/// now and then, since PoCL 3.1 calls no `CL_COMPLETE` callback for a
/// failed command (that registration's small record then stays behind).
pub fn wait(events: &[*mut c_void]) -> Result<(), i32> {
    let w = Arc::new(Wake {
        left: Mutex::new(events.len()),
        done: Condvar::new(),
    });
    for &e in events {
        let ud = Arc::into_raw(w.clone());
        // SAFETY: `woken` has OpenCL's event-callback signature and takes
        // `ud` back when it runs.
        let s = unsafe {
            gen::clSetEventCallback(e, CL_COMPLETE, woken as *mut c_void, ud as *mut c_void)
        };
        if s != CL_SUCCESS {
            // SAFETY: not registered, so ours to take back.
            drop(unsafe { Arc::from_raw(ud) });
            // The call that follows reports what is wrong with the event;
            // anything else: ask until it is done.
            return poll(events);
        }
    }
    let mut nap = Duration::from_millis(1);
    let mut left = w.left.lock().unwrap_or_else(|p| p.into_inner());
    while *left > 0 {
        let (l, t) = w
            .done
            .wait_timeout(left, nap)
            .unwrap_or_else(|p| p.into_inner());
        left = l;
        if t.timed_out() && *left > 0 {
            drop(left);
            if all_complete(events)? {
                return Ok(());
            }
            nap = (nap * 2).min(Duration::from_millis(20));
            left = w.left.lock().unwrap_or_else(|p| p.into_inner());
        }
    }
    Ok(())
}

/// Waits for `events` by asking their status with short calls, sleeping in
/// between (from 50 us up to 5 ms).
fn poll(events: &[*mut c_void]) -> Result<(), i32> {
    let mut nap = Duration::from_micros(50);
    while !all_complete(events)? {
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(5));
    }
    Ok(())
}

/// Waits with the channel free until everything enqueued on `q` so far,
/// and the `n` events of `wl`, are done (a marker stands for them), or one
/// of them failed. `Ok(false)`: the marker was refused, so nothing was
/// waited for; the call that follows reports what is wrong itself.
///
/// # Safety
/// `wl` holds `n` events (the caller's contract).
pub unsafe fn settle(q: *mut c_void, n: u32, wl: *const *mut c_void) -> Result<bool, i32> {
    let mut marker = std::ptr::null_mut();
    // SAFETY: `wl` is NULL or holds `n` events (this fn's contract, the enqueue's event_wait_list),
    // which the marker's forwarder reads (it encodes a NULL list as absent); `marker` is a local
    // out-slot.
    let s = unsafe { gen::clEnqueueMarkerWithWaitList(q, n, wl, &mut marker) };
    if s != CL_SUCCESS {
        return Ok(false);
    }
    let r = timed(|| wait(&[marker]));
    // SAFETY: our own reference to the marker.
    unsafe { gen::clReleaseEvent(marker) };
    r.map(|()| true)
}
