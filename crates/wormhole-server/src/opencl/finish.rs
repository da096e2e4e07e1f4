//! `clFinish` answered by the library's own thread.
//!
//! A blocking `clFinish` run on the tenant's thread costs two thread hops
//! after the last command: the library's worker wakes the tenant's thread,
//! which writes the reply and wakes the client. Natively there is one: the
//! worker wakes the application. Over shared memory the tenant instead
//! enqueues a marker, writes the reply into the ring unpublished
//! ([`Channel::send_held`]) and goes back to waiting for requests; the
//! marker's `CL_COMPLETE` callback, on the worker that completes it,
//! publishes the reply and wakes the client itself. On a virtual machine
//! whose idle vCPUs halt, a hop is tens of microseconds.
//!
//! The client holds its channel until the reply comes, so no request can
//! arrive while one is owed; if one does all the same (a broken client),
//! the tenant waits for the marker and publishes first, keeping replies in
//! order. PoCL 3.1 calls no callback for a command that failed, so while a
//! reply is owed the tenant also looks at the marker's status now and then
//! and publishes the reply itself once the marker has ended either way.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wormhole_opencl_api::CL_SUCCESS;
use wormhole_transport::shm::HeldReply;
use wormhole_transport::{Channel, TransportError};

use super::{ffi, info_value};

const CL_COMPLETE: i32 = 0;
const CL_EVENT_COMMAND_EXECUTION_STATUS: u32 = 0x11D3;

/// The first and the longest pause between looks at an owed reply's marker.
const FIRST_LOOK: Duration = Duration::from_millis(1);
const LONGEST_LOOK: Duration = Duration::from_millis(100);

/// The reply until one side takes it: the marker's callback or the tenant.
type Slot = Mutex<Option<HeldReply>>;

/// Takes the reply out of `slot` and publishes it, unless the other side
/// did already.
fn publish(slot: &Slot) {
    let held = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(r) = held {
        r.publish();
    }
}

/// The marker's `CL_COMPLETE` callback, on the library's thread.
unsafe extern "C" fn marker_done(_ev: *mut c_void, _status: i32, data: *mut c_void) {
    // SAFETY: `data` is the reference `Owed::hand_over` made with
    // `Arc::into_raw` for this one registration; a callback runs at most
    // once, so it is taken back exactly once.
    let slot = unsafe { Arc::from_raw(data as *const Slot) };
    publish(&slot);
}

/// A `clFinish` reply that the completion of `marker` publishes.
pub struct Owed {
    marker: *mut c_void,
    slot: Arc<Slot>,
}

impl Owed {
    /// Hands `reply` to `marker`'s completion. If the callback cannot be
    /// registered, waits for the marker and publishes the reply now.
    ///
    /// # Safety
    /// `marker` is an event of the tenant's own, whose reference the
    /// returned value takes over.
    pub unsafe fn hand_over(marker: *mut c_void, reply: HeldReply) -> Owed {
        let slot = Arc::new(Mutex::new(Some(reply)));
        let data = Arc::into_raw(slot.clone());
        // SAFETY: `marker` is a live event (the caller's contract) and
        // `marker_done` has OpenCL's event-callback signature; `data` is
        // taken back by the callback, or below if it is never registered.
        let r = unsafe {
            ffi::clSetEventCallback(
                marker,
                CL_COMPLETE,
                marker_done as *mut c_void,
                data as *mut c_void,
            )
        };
        if r != CL_SUCCESS {
            // SAFETY: never registered, so the reference is still ours.
            drop(unsafe { Arc::from_raw(data) });
            // SAFETY: one live event.
            unsafe { ffi::clWaitForEvents(1, &marker) };
            publish(&slot);
        }
        Owed { marker, slot }
    }

    fn settled(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Publishes the reply if the marker has ended (complete, or failed,
    /// when PoCL calls no callback).
    fn look(&self) {
        // SAFETY: the marker is ours until `drop`; the value is a cl_int.
        let st = unsafe {
            info_value::<i32>(
                ffi::clGetEventInfo,
                self.marker,
                CL_EVENT_COMMAND_EXECUTION_STATUS,
            )
        };
        if st.is_none_or(|s| s <= CL_COMPLETE) {
            publish(&self.slot);
        }
    }

    /// Waits for the marker, then publishes the reply if still owed.
    fn settle_now(&self) {
        // SAFETY: one live event, ours.
        unsafe { ffi::clWaitForEvents(1, &self.marker) };
        publish(&self.slot);
    }

    /// Returns once the reply is published: by the callback, by a look at
    /// the marker between waits for the next request, or first thing when
    /// a request comes before it.
    pub fn settle(self, chan: &mut dyn Channel) -> Result<(), TransportError> {
        let mut pause = FIRST_LOOK;
        while !self.settled() {
            if chan.wait_for(pause)? {
                self.settle_now();
                break;
            }
            self.look();
            pause = (pause * 2).min(LONGEST_LOOK);
        }
        Ok(())
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if !self.settled() {
            self.settle_now();
        }
        // SAFETY: the reference `hand_over` took over. The library keeps
        // its own while it runs the callback.
        unsafe { ffi::clReleaseEvent(self.marker) };
    }
}

/// `clFinish` on a channel that can hold a reply back: enqueues a marker
/// and flushes, leaving the wait to [`Owed`]. `None` if that fails (the
/// queue is then finished by the caller, as natively).
///
/// # Safety
/// `queue` is a live command queue.
pub unsafe fn marker_for(queue: *mut c_void) -> Option<*mut c_void> {
    let mut ev = std::ptr::null_mut();
    // SAFETY: the caller's contract; `ev` receives the new event.
    let s = unsafe { ffi::clEnqueueMarkerWithWaitList(queue, 0, std::ptr::null(), &mut ev) };
    if s != CL_SUCCESS || ev.is_null() {
        return None;
    }
    // SAFETY: as above.
    if unsafe { ffi::clFlush(queue) } != CL_SUCCESS {
        // SAFETY: the event just made, ours.
        unsafe { ffi::clReleaseEvent(ev) };
        return None;
    }
    Some(ev)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use wormhole_opencl_api::{func, Kind};
    use wormhole_transport::ring::Handoff;
    use wormhole_transport::shm::{Layout, Region, ShmChannel, Side};
    use wormhole_transport::Channel;

    use super::*;
    use crate::harness::{ids, test_harness, Frame};

    const CL_COMPLETE: i32 = 0;
    /// The tenant's id for the test's user event.
    const GATE: u64 = 100;

    /// A client's and a tenant's end of one region; the tenant's gives up
    /// (PeerGone) once `done` is set.
    fn channels(done: Arc<AtomicBool>) -> (ShmChannel, ShmChannel) {
        let region = Region::create(Layout::default()).expect("region");
        let client = ShmChannel::new(region.clone(), Side::Client, Handoff::Futex, None);
        let alive = Box::new(move || !done.load(Ordering::Relaxed));
        let server = ShmChannel::new(region, Side::Server, Handoff::Futex, Some(alive));
        (client, server)
    }

    /// A user event of the test's own, and a launch of the seeded kernel on
    /// the seeded queue behind it, so that the queue cannot finish until
    /// the test says so.
    fn gated_launch(ctx: *mut c_void) -> (*mut c_void, Vec<Vec<u8>>) {
        let mut err = 0;
        // SAFETY: a live context; `err` receives the status.
        let gate = unsafe { ffi::clCreateUserEvent(ctx, &mut err) };
        assert_eq!(err, CL_SUCCESS, "user event");
        let frames = vec![
            Frame::new(func::clSetKernelArg)
                .h(ids::KERNEL)
                .u32(0)
                .u64(8)
                .u8(2)
                .u8(0)
                .h(ids::BUFFER)
                .done(),
            Frame::new(func::clSetKernelArg)
                .h(ids::KERNEL)
                .u32(1)
                .u64(4)
                .u8(1)
                .bytes(&[9, 0, 0, 0])
                .done(),
            Frame::new(func::clEnqueueNDRangeKernel)
                .h(ids::QUEUE)
                .h(ids::KERNEL)
                .u32(1)
                .opt(None)
                .opt(Some(&4u64.to_le_bytes()))
                .opt(None)
                .u32(1)
                .ids(&[GATE])
                .b(false)
                .done(),
        ];
        (gate, frames)
    }

    fn status(reply: &[u8]) -> i32 {
        i32::from_le_bytes([reply[0], reply[1], reply[2], reply[3]])
    }

    /// The library's thread publishes the reply when the marker completes:
    /// nothing else here could, since the test thread only waits.
    #[test]
    fn the_markers_completion_publishes_the_held_reply() {
        let Some((_turn, h)) = test_harness() else {
            return;
        };
        let mut t = h.tenant();
        let (gate, frames) = gated_launch(h.context());
        t.insert(GATE, Kind::Event, gate)
            .expect("gate in the table");
        let mut enc = wormhole_wire::Encoder::new();
        let mut deferred = 0;
        for f in &frames {
            assert!(crate::serve::handle_frame(
                &mut t,
                f,
                &mut enc,
                &mut deferred
            ));
            assert_eq!(status(enc.as_slice()), CL_SUCCESS);
        }
        let (mut client, mut server) = channels(Arc::new(AtomicBool::new(false)));
        // SAFETY: the seeded queue is live.
        let marker = unsafe { marker_for(h.queue()) }.expect("a marker");
        let held = server
            .send_held(b"finish reply")
            .expect("send")
            .expect("held");
        // SAFETY: the marker just made, handed over.
        let owed = unsafe { Owed::hand_over(marker, held) };
        assert!(
            !client.wait_for(Duration::from_millis(50)).expect("wait"),
            "the reply came before the queue finished"
        );
        // SAFETY: the test's user event, not set before.
        let set = unsafe { ffi::clSetUserEventStatus(gate, CL_COMPLETE) };
        assert_eq!(set, CL_SUCCESS);
        assert!(
            client.wait_for(Duration::from_secs(10)).expect("wait"),
            "the marker's completion did not publish the reply"
        );
        let mut buf = Vec::new();
        client.recv(&mut buf).expect("reply");
        assert_eq!(buf, b"finish reply");
        owed.settle(&mut server).expect("settled");
        t.release_all();
        // SAFETY: the harness's queue.
        unsafe { ffi::clFinish(h.queue()) };
    }

    /// Through the serve loop: a clFinish answers once its queue finished,
    /// and the reply to the request after it comes after it.
    #[test]
    fn a_finish_served_over_shared_memory_answers_in_order() {
        let Some((_turn, h)) = test_harness() else {
            return;
        };
        let mut t = h.tenant();
        t.finish_by_marker = true;
        let (gate, mut frames) = gated_launch(h.context());
        t.insert(GATE, Kind::Event, gate)
            .expect("gate in the table");
        frames.push(Frame::new(func::clFinish).h(ids::QUEUE).done());
        let done = Arc::new(AtomicBool::new(false));
        let (mut client, mut server) = channels(done.clone());
        let gate_addr = gate as usize;
        let c = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut statuses = Vec::new();
            for f in &frames {
                client.send(f).expect("send");
                client.flush().expect("flush");
                if f[..4] == func::clFinish.to_le_bytes() {
                    let early = client.wait_for(Duration::from_millis(50)).expect("wait");
                    assert!(!early, "clFinish answered before its queue finished");
                    // SAFETY: the test's user event, alive until the tenant
                    // is torn down after this thread ends.
                    let s =
                        unsafe { ffi::clSetUserEventStatus(gate_addr as *mut c_void, CL_COMPLETE) };
                    assert_eq!(s, CL_SUCCESS);
                }
                client.recv(&mut buf).expect("reply");
                statuses.push(status(&buf));
            }
            // The next call's reply follows the held one.
            let info = Frame::new(func::clGetEventInfo)
                .h(ids::EVENT)
                .u32(0x11D3)
                .u64(4)
                .b(true)
                .b(false)
                .done();
            client.send(&info).expect("send");
            client.flush().expect("flush");
            client.recv(&mut buf).expect("reply");
            statuses.push(status(&buf));
            let exec_status = i32::from_le_bytes(buf[buf.len() - 4..].try_into().expect("4 bytes"));
            done.store(true, Ordering::Relaxed);
            (statuses, exec_status)
        });
        crate::serve::serve(&mut server, &mut t, None).expect("served");
        let (statuses, exec_status) = c.join().expect("client");
        assert_eq!(statuses, vec![CL_SUCCESS; 5]);
        assert_eq!(
            exec_status, CL_COMPLETE,
            "the event's status, not the finish's reply"
        );
        t.release_all();
        // SAFETY: the harness's queue.
        unsafe { ffi::clFinish(h.queue()) };
    }
}
