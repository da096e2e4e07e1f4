//! Blocking waits answered by the library's own thread.
//!
//! A blocking `clFinish`, `clWaitForEvents` or small buffer read run on the
//! tenant's thread costs two thread hops after the last command: the library's worker
//! wakes the tenant's thread, which writes the reply and wakes the client.
//! Natively there is one: the worker wakes the application. Over shared
//! memory the tenant instead writes the reply into the ring unpublished
//! ([`Channel::send_held`]) and goes back to waiting for requests; the
//! `CL_COMPLETE` callback of the last event to complete (a marker, for
//! `clFinish`; the read's own, whose data it copies into the reply)
//! publishes the reply and wakes the client itself, from the worker that
//! completed it. On a virtual machine whose idle vCPUs halt, a
//! hop is tens of microseconds.
//!
//! The client holds its channel until the reply comes, so no request can
//! arrive while one is owed; if one does all the same (a broken client),
//! the tenant waits for the events and publishes first, keeping replies in
//! order. PoCL 3.1 calls no callback for a command that failed, so while a
//! reply is owed the tenant also looks at the events' status now and then
//! and publishes the reply itself once all have ended either way.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wormhole_opencl_api::{
    CL_COMPLETE, CL_EVENT_COMMAND_EXECUTION_STATUS, CL_EVENT_COMMAND_QUEUE, CL_EVENT_CONTEXT,
    CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, CL_SUCCESS,
};
use wormhole_transport::shm::HeldReply;
use wormhole_transport::{Channel, TransportError};
use wormhole_wire::Encoder;

use super::{ffi, info_value};

/// The first and the longest pause between looks at an owed reply's events.
const FIRST_LOOK: Duration = Duration::from_millis(1);
const LONGEST_LOOK: Duration = Duration::from_millis(100);

/// What a reply waits for: events the tenant holds a reference to each
/// of (given back when it is dropped), and the status the reply takes
/// instead of its own if one of them failed (`None`: its own stands, as
/// `clFinish`'s does).
pub struct Wait {
    events: Vec<*mut c_void>,
    on_failure: Option<i32>,
    /// Data the events bring (a read's), which ends the reply: copied into
    /// it unless one of them failed.
    fill: Option<Vec<u8>>,
}

impl Wait {
    /// Blocks until every event has ended.
    fn block(&self) {
        let n = u32::try_from(self.events.len()).unwrap_or(u32::MAX);
        // SAFETY: `n` live events of ours.
        unsafe { ffi::clWaitForEvents(n, self.events.as_ptr()) };
    }

    /// Once every event has ended (complete, or failed, when PoCL calls no
    /// callback), whether one failed; `None` while one runs. An event whose
    /// status cannot be had counts as failed.
    fn ended(&self) -> Option<bool> {
        let st: Vec<Option<i32>> = self.events.iter().map(|&e| status(e)).collect();
        st.iter()
            .all(|s| s.is_none_or(|s| s <= CL_COMPLETE))
            .then(|| st.iter().any(|s| s.is_none_or(|s| s < 0)))
    }

    /// Waits for the events on this thread, where no reply can be held, and
    /// completes the encoded reply `enc` as its publication would.
    pub fn wait_here(mut self, enc: &mut Encoder) {
        self.block();
        let failed = self.ended() != Some(false);
        let len = enc.len() as u64;
        for (at, bytes) in completion(len, failed, self.on_failure, self.fill.take()) {
            enc.patch_bytes(at as usize, &bytes);
        }
    }
}

/// What stands before a read's data in its reply: the tag byte of an
/// optional value and the data's length word.
const DATA_PREFIX: u64 = 1 + 8;

/// What completes a reply of `len` bytes once its events ended: where to
/// write what. A failure changes the status (a reply's first word) and,
/// for a read, turns its data (the reply's end: a tag byte, a length
/// word, the bytes) into none by its tag, as a failed call sends none: the
/// bytes stay behind it, unread. Otherwise a read's data fills its place.
fn completion(
    len: u64,
    failed: bool,
    on_failure: Option<i32>,
    fill: Option<Vec<u8>>,
) -> Vec<(u64, Vec<u8>)> {
    let data_at = |d: &Vec<u8>| len.saturating_sub(d.len() as u64);
    match (failed, on_failure, fill) {
        (true, Some(s), fill) => {
            let mut w = vec![(0, s.to_le_bytes().to_vec())];
            if let Some(d) = fill {
                w.push((data_at(&d).saturating_sub(DATA_PREFIX), vec![0]));
            }
            w
        }
        (false, _, Some(d)) => vec![(data_at(&d), d)],
        _ => Vec::new(),
    }
}

impl Drop for Wait {
    fn drop(&mut self) {
        for &e in &self.events {
            // SAFETY: the reference this `Wait` holds. The library keeps
            // its own while it runs a callback.
            unsafe { ffi::clReleaseEvent(e) };
        }
    }
}

/// The reply until one side takes it (a callback or the tenant), and how
/// its events went.
struct Slot {
    reply: Option<HeldReply>,
    left: usize,
    failed: bool,
    on_failure: Option<i32>,
    fill: Option<Vec<u8>>,
}

impl Slot {
    /// Publishes the reply unless that was done already.
    fn publish(&mut self) {
        if let Some(mut r) = self.reply.take() {
            let len = r.frame_len();
            for (at, bytes) in completion(len, self.failed, self.on_failure, self.fill.take()) {
                r.patch(at, &bytes);
            }
            r.publish();
        }
    }
}

type Shared = Mutex<Slot>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Slot> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// An event's `CL_COMPLETE` callback, on the library's thread.
unsafe extern "C" fn event_done(ev: *mut c_void, st: i32, data: *mut c_void) {
    // SAFETY: `data` is a reference `Owed::hand_over` made with
    // `Arc::into_raw` for this one registration; a callback runs at most
    // once, so it is taken back exactly once.
    let shared = unsafe { Arc::from_raw(data as *const Shared) };
    // The event's own status too: PoCL calls a callback registered on an
    // event that already failed with CL_COMPLETE.
    let failed = st < 0 || status(ev).is_none_or(|s| s < 0);
    let mut s = lock(&shared);
    s.failed |= failed;
    s.left = s.left.saturating_sub(1);
    if s.left == 0 {
        s.publish();
    }
}

/// An event's execution status (negative: it failed; None: not known).
fn status(e: *mut c_void) -> Option<i32> {
    // SAFETY: the caller holds a reference to `e`; the value is a cl_int.
    unsafe { info_value::<i32>(ffi::clGetEventInfo, e, CL_EVENT_COMMAND_EXECUTION_STATUS) }
}

/// A reply that the completion of its events publishes.
pub struct Owed {
    /// The events, whose references it gives back when dropped (after
    /// `Owed`'s own drop has settled the reply).
    wait: Wait,
    shared: Arc<Shared>,
}

impl Owed {
    /// Hands `reply` to the completion of `wait`'s events. If a callback
    /// cannot be registered, waits for the events and publishes now.
    pub fn hand_over(mut wait: Wait, reply: HeldReply) -> Owed {
        let shared = Arc::new(Mutex::new(Slot {
            reply: Some(reply),
            left: wait.events.len(),
            failed: false,
            on_failure: wait.on_failure,
            fill: wait.fill.take(),
        }));
        let owed = Owed { wait, shared };
        for &e in &owed.wait.events {
            let data = Arc::into_raw(owed.shared.clone());
            // SAFETY: `e` is a live event of ours (`Wait`'s contract) and
            // `event_done` has OpenCL's event-callback signature; `data` is
            // taken back by the callback, or below if it is not registered.
            let r = unsafe {
                ffi::clSetEventCallback(
                    e,
                    CL_COMPLETE,
                    event_done as *mut c_void,
                    data as *mut c_void,
                )
            };
            if r != CL_SUCCESS {
                // SAFETY: never registered, so the reference is still ours.
                drop(unsafe { Arc::from_raw(data) });
                owed.settle_now();
                break;
            }
        }
        owed
    }

    fn settled(&self) -> bool {
        lock(&self.shared).reply.is_none()
    }

    /// Publishes the reply if every event has ended.
    fn look(&self) {
        if let Some(failed) = self.wait.ended() {
            let mut s = lock(&self.shared);
            s.failed |= failed;
            s.publish();
        }
    }

    /// Waits for the events, then publishes the reply if still owed.
    fn settle_now(&self) {
        self.wait.block();
        self.look();
    }

    /// Returns once the reply is published: by a callback, by a look at
    /// the events between waits for the next request, or first thing when
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
    }
}

/// `clFinish` on a channel that can hold a reply back: a marker, flushed,
/// for the reply to wait for. `None` if that fails (the queue is then
/// finished by the caller, as natively).
///
/// # Safety
/// `queue` is a live command queue.
pub unsafe fn finish(queue: *mut c_void) -> Option<Wait> {
    let mut ev = std::ptr::null_mut();
    // SAFETY: `queue` is a table handle, kind Queue (`waits::clFinish`; the
    // decoder refused NULL); no wait list; `ev` is our local for the marker's
    // event.
    let s = unsafe { ffi::clEnqueueMarkerWithWaitList(queue, 0, std::ptr::null(), &mut ev) };
    if s != CL_SUCCESS || ev.is_null() {
        return None;
    }
    // SAFETY: the same live queue from the table.
    if unsafe { ffi::clFlush(queue) } != CL_SUCCESS {
        // SAFETY: the event just made, ours.
        unsafe { ffi::clReleaseEvent(ev) };
        return None;
    }
    Some(Wait {
        events: vec![ev],
        on_failure: None,
        fill: None,
    })
}

/// `clWaitForEvents` on a channel that can hold a reply back: the events,
/// each retained, with their command queues flushed as the call would.
/// `None` where the call itself would fail at once (events of different
/// contexts, or one the library cannot describe): it is then made as
/// natively, and reports that.
///
/// # Safety
/// `events` are live events from the tenant's table.
pub unsafe fn wait_for_events(events: &[*mut c_void]) -> Option<Wait> {
    let ctx = |e| {
        // SAFETY: `e` is a live event from the table (`Tenant::handles` refused
        // NULL and unknown ids, kind Event); CL_EVENT_CONTEXT answers one
        // cl_context, a usize.
        unsafe { info_value::<usize>(ffi::clGetEventInfo, e, CL_EVENT_CONTEXT) }
    };
    let first = ctx(*events.first()?)?;
    if events.iter().any(|&e| ctx(e) != Some(first)) {
        return None;
    }
    for &e in events {
        // SAFETY: `e` is a live event from the table, as for the context;
        // CL_EVENT_COMMAND_QUEUE answers one cl_command_queue (NULL for a user
        // event).
        let q = unsafe { info_value::<usize>(ffi::clGetEventInfo, e, CL_EVENT_COMMAND_QUEUE) };
        if let Some(q) = q.filter(|&q| q != 0) {
            // SAFETY: the event's own queue, which it keeps alive.
            unsafe { ffi::clFlush(q as *mut c_void) };
        }
    }
    for &e in events {
        // SAFETY: a live event; `Owed` releases this reference.
        unsafe { ffi::clRetainEvent(e) };
    }
    Some(Wait {
        events: events.to_vec(),
        on_failure: Some(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
        fill: None,
    })
}

/// Reads larger than this are run blocking: their replies cross the ring
/// as one record only up to a point, and a small read's wait is what a
/// round trip's latency shows in.
pub const HELD_READ_MAX: usize = 64 << 10;

/// A buffer read on a channel that can hold a reply back: enqueued without
/// blocking, into memory the reply owns until the read's event (its own,
/// or `event`'s if the application asked for one) completes, when the data
/// ends the reply. `None` where the library refuses the read at once: it
/// is then made blocking as natively, and reports that.
///
/// # Safety
/// `queue` and `buffer` are live objects from the tenant's table, the wait
/// list holds `n` live events, and `event` is NULL or where the command's
/// event goes.
pub unsafe fn read_buffer(
    queue: *mut c_void,
    buffer: *mut c_void,
    offset: usize,
    size: usize,
    n: u32,
    wait_list: *const *mut c_void,
    event: *mut *mut c_void,
) -> Option<Wait> {
    let mut data = vec![0u8; size];
    let mut own = std::ptr::null_mut();
    let out = if event.is_null() { &mut own } else { event };
    // SAFETY: `queue` (kind Queue) and `buffer` (kind Mem) are table handles,
    // the wait list NULL or at least `n` table events (`check_count`), `out`
    // our local or the decoder's slot (`out_new`). The library bounds `offset`
    // + `size` by the buffer and writes only into `data`, our `size` bytes,
    // which the returned `Wait` keeps until the read completed (`Owed`
    // publishes or drops it only then).
    let s = unsafe {
        ffi::clEnqueueReadBuffer(
            queue,
            buffer,
            0,
            offset,
            size,
            data.as_mut_ptr().cast(),
            n,
            wait_list,
            out,
        )
    };
    // SAFETY: written by the library on success.
    let ev = unsafe { *out };
    if s != CL_SUCCESS || ev.is_null() {
        return None;
    }
    if !event.is_null() {
        // SAFETY: the application's event, which the table takes; this
        // reference is the wait's.
        unsafe { ffi::clRetainEvent(ev) };
    }
    // SAFETY: the live table queue the read was just enqueued on.
    unsafe { ffi::clFlush(queue) };
    Some(Wait {
        events: vec![ev],
        on_failure: Some(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
        fill: Some(data),
    })
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
    /// The tenant's ids for the test's user event and the launch behind it.
    const GATE: u64 = 100;
    const LAUNCH: u64 = 101;

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
                .b(true)
                .u64(LAUNCH)
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
        let mut deferred = crate::serve::Deferred::default();
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
        let wait = unsafe { finish(h.queue()) }.expect("a marker");
        let held = server
            .send_held(b"finish reply")
            .expect("send")
            .expect("held");
        let owed = Owed::hand_over(wait, held);

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

    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// What the client of [`serve_gated_wait`] saw.
    struct Served {
        /// Every reply's status, the query's last.
        statuses: Vec<i32>,
        /// The queried event's execution status.
        exec_status: i32,
        /// The wait's whole reply.
        wait_reply: Vec<u8>,
    }

    /// Serves, over shared memory, the gated launch and then `wait` (a
    /// blocking wait on it), which must not be answered before the test
    /// sets the gate to `gate_status`; then a query, whose reply must come
    /// after the wait's. Returns every reply's status and the queried
    /// event's execution status.
    fn serve_gated_wait(wait: Vec<u8>, gate_status: i32, gate_first: bool) -> Option<Served> {
        let (_turn, h) = test_harness()?;
        let mut t = h.tenant();
        t.replies_held = true;
        let (gate, mut frames) = gated_launch(h.context());
        t.insert(GATE, Kind::Event, gate)
            .expect("gate in the table");
        let done = Arc::new(AtomicBool::new(false));
        let (mut client, mut server) = channels(done.clone());
        let gate_addr = gate as usize;
        frames.push(wait);
        let last = frames.len() - 1;
        let c = std::thread::spawn(move || {
            // However this thread ends, the tenant's loop ends after it.
            let _done = SetOnDrop(done);
            let mut buf = Vec::new();
            let mut statuses = Vec::new();
            let mut wait_reply = Vec::new();
            let reply = |client: &mut ShmChannel, buf: &mut Vec<u8>| {
                let came = client.wait_for(Duration::from_secs(10)).expect("wait");
                assert!(came, "no reply within 10 s");
                client.recv(buf).expect("reply");
            };
            // SAFETY: the test's user event, alive until the tenant is torn
            // down after this thread ends, and set once.
            let set_gate =
                || unsafe { ffi::clSetUserEventStatus(gate_addr as *mut c_void, gate_status) };
            for (i, f) in frames.iter().enumerate() {
                if i == last && gate_first {
                    assert_eq!(set_gate(), CL_SUCCESS);
                }
                client.send(f).expect("send");
                client.flush().expect("flush");
                if i == last && !gate_first {
                    let early = client.wait_for(Duration::from_millis(50)).expect("wait");
                    assert!(!early, "the wait answered before its gate was set");
                    assert_eq!(set_gate(), CL_SUCCESS);
                }
                reply(&mut client, &mut buf);
                statuses.push(status(&buf));
                if i == last {
                    wait_reply = buf.clone();
                }
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
            reply(&mut client, &mut buf);
            statuses.push(status(&buf));
            let exec_status = i32::from_le_bytes(buf[buf.len() - 4..].try_into().expect("4 bytes"));
            Served {
                statuses,
                exec_status,
                wait_reply,
            }
        });
        crate::serve::serve(&mut server, &mut t, None).expect("served");
        let got = c.join().expect("client");
        t.release_all();
        // SAFETY: the harness's queue.
        unsafe { ffi::clFinish(h.queue()) };
        Some(got)
    }

    /// Through the serve loop: a clFinish answers once its queue finished,
    /// and the reply to the request after it comes after it.
    #[test]
    fn a_finish_served_over_shared_memory_answers_in_order() {
        let finish = Frame::new(func::clFinish).h(ids::QUEUE).done();
        let Some(Served {
            statuses,
            exec_status,
            ..
        }) = serve_gated_wait(finish, CL_COMPLETE, false)
        else {
            return;
        };
        assert_eq!(statuses, vec![CL_SUCCESS; 5]);
        assert_eq!(
            exec_status, CL_COMPLETE,
            "the event's status, not the finish's reply"
        );
    }

    /// A wait on a command that failed, before or after the wait began:
    /// answered with the failure the library reports natively, whether
    /// PoCL calls no callback (the tenant's look at the events then
    /// publishes the reply) or calls one registered after the failure.
    #[test]
    fn a_wait_on_a_failed_command_answers_its_failure() {
        for gate_first in [false, true] {
            let wait = Frame::new(func::clWaitForEvents)
                .u32(1)
                .ids(&[LAUNCH])
                .done();
            let Some(Served { statuses, .. }) = serve_gated_wait(wait, -5, gate_first) else {
                return;
            };
            let failed = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
            assert_eq!(
                statuses,
                vec![CL_SUCCESS, CL_SUCCESS, CL_SUCCESS, failed, CL_SUCCESS],
                "gate set first: {gate_first}"
            );
        }
    }

    /// A wait on a command that completes: answered when it does.
    #[test]
    fn a_wait_on_events_answers_when_they_complete() {
        let wait = Frame::new(func::clWaitForEvents)
            .u32(2)
            .ids(&[LAUNCH, GATE])
            .done();
        let Some(Served { statuses, .. }) = serve_gated_wait(wait, CL_COMPLETE, false) else {
            return;
        };
        assert_eq!(statuses, vec![CL_SUCCESS; 5]);
    }

    /// A read behind the gated launch, held by the tenant: its data (the
    /// byte the kernel wrote) arrives with the reply once the launch ran;
    /// with the launch failed, the reply says so.
    #[test]
    fn a_held_read_brings_the_data_written_before_it() {
        let read = || {
            Frame::new(func::clEnqueueReadBuffer)
                .h(ids::QUEUE)
                .h(ids::BUFFER)
                .u32(1)
                .u64(0)
                .u64(4)
                .b(true)
                .u32(1)
                .ids(&[LAUNCH])
                .b(false)
                .done()
        };
        let Some(ok) = serve_gated_wait(read(), CL_COMPLETE, false) else {
            return;
        };
        assert_eq!(ok.statuses, vec![CL_SUCCESS; 5]);
        let data = &ok.wait_reply[ok.wait_reply.len() - 4..];
        assert_eq!(data[0], 9, "the byte the kernel wrote: {:?}", ok.wait_reply);
        let Some(failed) = serve_gated_wait(read(), -5, false) else {
            return;
        };
        assert_eq!(
            failed.statuses[3],
            CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST
        );
        assert_eq!(failed.statuses[4], CL_SUCCESS, "the next call");
        // Status, deferred status, outputs, then the data's tag: none, as a
        // failed read sends.
        let mut d = wormhole_wire::Decoder::new(&failed.wait_reply[9..]);
        let data = d.opt_bytes().expect("a tag");
        assert_eq!(data, None, "{:?}", failed.wait_reply);
    }
}
