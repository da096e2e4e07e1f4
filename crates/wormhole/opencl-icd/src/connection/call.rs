//! A call being marshalled ([`Call`]), and whether it waits for its answer
//! or is batched: a call is deferred once a call of its shape (all that can
//! make it fail) has succeeded. Also what a queue known to be drained lets
//! this side answer alone.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_client::{force_sync, Held, Sent, Shape};
use wormhole_opencl_api::{func, CallbackKind, Kind, CL_OUT_OF_RESOURCES, CL_SUCCESS};
use wormhole_wire::Encoder;

use super::reply::Reply;
use super::{conn, count_caller, fresh_id, lost, report_once, Chan, Conn, FORK_GEN, PREFIX};
use crate::objects::{obj, Obj};

/// Writes a status to an `errcode_ret` argument, which may be NULL.
pub use wormhole_client::store as set_errcode;

/// The shape of every `clGet*Info` function.
pub type InfoFn = unsafe extern "C" fn(*mut c_void, u32, usize, *mut c_void, *mut usize) -> i32;

/// One fixed-size answer of an info query (through the channel): `f` is
/// one of our stubs, `T` the type the API gives `param` (the library writes
/// at most its size; a larger answer is its error, not an overflow).
pub fn info_value<T: Copy + Default>(f: InfoFn, obj: *mut c_void, param: u32) -> Result<T, i32> {
    let mut v = T::default();
    // SAFETY: room for one `T` at `v`, its size given; no size_ret.
    let s = unsafe {
        f(
            obj,
            param,
            std::mem::size_of::<T>(),
            (&mut v as *mut T).cast(),
            std::ptr::null_mut(),
        )
    };
    if s == CL_SUCCESS {
        Ok(v)
    } else {
        Err(s)
    }
}

/// A shape value (from a `shape=` expression of the description) that
/// makes the call wait for its answer, whatever calls of its shape did
/// before: its failure must reach the application from the call itself. A
/// value that merely happens to equal it only costs a round trip.
pub const ANSWER_NEEDED: u64 = u64::MAX;

/// A call being marshalled; holds the channel.
pub struct Call<'a> {
    guard: parking_lot::MutexGuard<'a, Chan>,
    pub enc: Encoder,
    /// Bulk bytes to stream after the frame.
    raw: Option<(*const u8, usize)>,
    /// What can make the call fail (see `finish_async`).
    shape: Shape,
    /// The first handles the call names, for `handle`'s aliasing check.
    named: [u64; 4],
    /// The in-order queue the call names first, and the event it creates:
    /// an enqueue whose completion, awaited, drains that queue.
    enqueued: (u64, u64),
    /// Wait for the answer even if the shape is known ([`ANSWER_NEEDED`]).
    must_answer: bool,
    /// The call can change no queue's work (see `Chan::inert`).
    inert: bool,
}

impl<'a> Call<'a> {
    pub fn begin(func: u32) -> Result<Call<'static>, i32> {
        let conn = conn().ok_or(CL_OUT_OF_RESOURCES)?;
        Call::on(conn, func)
    }

    pub(super) fn on(conn: &'a Conn, func: u32) -> Result<Call<'a>, i32> {
        count_caller();
        let mut guard = conn.state.lock();
        if FORK_GEN.load(Ordering::Relaxed) != conn.fork_gen {
            report_once(
                "OpenCL used in a child after fork(): the parent's connection is not shared",
            );
            return Err(CL_OUT_OF_RESOURCES);
        }
        let enc = guard.request(func).map_err(lost)?;
        Ok(Call {
            guard,
            enc,
            raw: None,
            shape: Shape::new(func),
            named: [0; 4],
            enqueued: (0, 0),
            must_answer: false,
            inert: matches!(func, func::clRetainEvent | func::clReleaseEvent),
        })
    }

    /// Adds a value to the call's shape.
    pub fn shape(&mut self, v: u64) {
        if v == ANSWER_NEEDED {
            self.must_answer = true;
        } else {
            self.shape.add(v);
        }
    }

    /// The object of a release: shaped by NULL-ness only (see the
    /// generator), since a live handle's release cannot fail on the server.
    pub fn released_handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let id = self.guard.checked.obj(p, kind)?.map_or(0, |o| o.id);
        self.shape(u64::from(id != 0));
        self.enc.u64(id);
        Ok(())
    }

    pub fn handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let o = self.guard.checked.obj(p, kind)?;
        let id = o.map_or(0, |o| o.id);
        if let (Kind::Queue, Some(o), 0) = (kind, o, self.enqueued.0) {
            if o.in_order.load(Ordering::Relaxed) {
                self.enqueued.0 = id;
            }
        }
        self.shape(o.map_or(0, |o| o.shape_key()));
        // Whether a handle repeats an earlier one of the same call (a copy
        // from a buffer to itself can fail where one to another cannot).
        if let Some(i) = self.named.iter().position(|&n| n == id && id != 0) {
            self.shape(0x5a4d_0000 + i as u64);
        }
        if let Some(slot) = self.named.iter_mut().find(|n| **n == 0) {
            *slot = id;
        }
        self.enc.u64(id);
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or points to `n` handles.
    pub unsafe fn handles(
        &mut self,
        p: *const *mut c_void,
        n: usize,
        kind: Kind,
    ) -> Result<(), i32> {
        if p.is_null() {
            self.enc.bool(false);
            return Ok(());
        }
        self.enc.bool(true);
        self.enc.u64(n as u64);
        // Which objects a list names does not change what can fail (each
        // is checked here); how many it names may, and so may a NULL among
        // them, which only the library refuses.
        self.shape(n as u64);
        let mut nulls = 0u64;
        for i in 0..n {
            // SAFETY: `p` is non-NULL and holds `n` handles (this fn's contract: an event_wait_list
            // and its num_events_in_wait_list, or a like list); `i < n`.
            let h = unsafe { *p.add(i) };
            nulls += u64::from(h.is_null());
            self.enc
                .u64(self.guard.checked.obj(h, kind)?.map_or(0, |o| o.id));
        }
        if nulls != 0 {
            self.shape(u64::MAX - nulls);
        }
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or points to `size` readable bytes.
    pub unsafe fn in_bytes(&mut self, p: *const c_void, size: u64) {
        if p.is_null() {
            self.enc.opt_bytes(None);
            return;
        }
        // SAFETY: `p` is non-NULL and holds `size` readable bytes (this fn's contract: an argument
        // the OpenCL call sizes by its companion size argument).
        let s = unsafe { std::slice::from_raw_parts(p as *const u8, size as usize) };
        // Small values (work sizes, origins, patterns) can make a call
        // fail; for large data only the length can.
        self.shape(s.len() as u64);
        if s.len() > 32 {
            self.enc.opt_bytes(Some(s));
            return;
        }
        // Encoded as `opt_bytes` would, word by word in the same pass that
        // shapes them: these are a launch's sizes, on every call.
        self.enc.u8(1);
        self.enc.u64(s.len() as u64);
        let mut words = s.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            self.enc.u64(v);
            self.shape(v);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.enc.raw(rest);
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            self.shape(u64::from_le_bytes(a));
        }
    }

    /// # Safety
    /// `p` is NULL or a NUL-terminated string.
    pub unsafe fn str(&mut self, p: *const std::ffi::c_char) {
        // SAFETY: `p` is NULL or NUL-terminated (this fn's contract: a name or options string
        // the OpenCL call requires NUL-terminated), alive for the call.
        unsafe { wormhole_client::put_c_str(&mut self.enc, &mut self.shape, p) }
    }

    /// A slot for a new handle returned through a pointer.
    pub fn out_new(&mut self, p: *mut *mut c_void) -> Option<u64> {
        let id = wormhole_client::put_new_slot(&mut self.enc, !p.is_null(), fresh_id)?;
        self.enqueued.1 = id;
        Some(id)
    }

    pub fn new_id(&mut self) -> u64 {
        let id = fresh_id();
        self.enc.u64(id);
        id
    }

    pub fn callback(
        &mut self,
        kind: CallbackKind,
        pfn: *mut c_void,
        user_data: *mut c_void,
    ) -> Result<crate::callbacks::Pending, i32> {
        crate::callbacks::put(self, kind, pfn, user_data)
    }

    /// Streams `len` bytes at `p` after the frame (a bulk transfer).
    ///
    /// # Safety
    /// `p` holds `len` readable bytes until the call is finished.
    pub unsafe fn attach_raw(&mut self, p: *const u8, len: usize) {
        self.raw = Some((p, len));
    }

    /// The bytes `attach_raw` named.
    fn raw(raw: Option<(*const u8, usize)>) -> Option<&'a [u8]> {
        // SAFETY: `attach_raw`'s contract: readable until the call is done.
        raw.map(|(p, len)| unsafe { std::slice::from_raw_parts(p, len) })
    }

    /// Sends the request and waits for the reply.
    pub fn finish(self) -> Result<Reply<'a>, i32> {
        let Call {
            guard,
            enc,
            raw,
            enqueued,
            inert,
            ..
        } = self;
        let mut held = Held::exchange(guard, enc, Self::raw(raw), PREFIX).map_err(lost)?;
        held.guard.note_sent(inert, enqueued);
        Ok(Reply { held })
    }

    /// Queues a call the description marks async: it stays in the ring
    /// until the next synchronisation point (or, with `wake`, the server is
    /// woken now, as clFlush must), and CL_SUCCESS is returned.
    ///
    /// A call is deferred only once a call of the same shape (the same
    /// function, handles, scalars and small values: all that can make it
    /// fail) has succeeded synchronously. So the first of a kind reports its
    /// own error as natively, and the thousandth repetition in a loop costs
    /// no round trip; a deferred call that fails all the same is reported by
    /// the next `syncpoint` call. With WORMHOLE_SYNC set, every call is made
    /// synchronously.
    pub fn finish_async(self, wake: bool) -> Result<i32, i32> {
        self.defer_or_exchange(wake, true)
    }

    /// As [`Call::finish_async`], for a call that creates an object under an
    /// id this side chose: made synchronously, it reports only its own
    /// status (the object exists exactly when that is CL_SUCCESS), leaving
    /// an earlier deferred failure for the next synchronisation point.
    pub fn finish_async_create(self) -> Result<i32, i32> {
        self.defer_or_exchange(false, false)
    }

    fn defer_or_exchange(self, wake: bool, report_deferred: bool) -> Result<i32, i32> {
        let Call {
            guard,
            enc,
            raw,
            shape,
            enqueued,
            must_answer,
            inert,
            ..
        } = self;
        let raw = Self::raw(raw);
        match Held::send(guard, enc, raw, shape, must_answer, wake, PREFIX).map_err(lost)? {
            Sent::Answered(mut held) => {
                held.guard.note_sent(inert, enqueued);
                let own = held.status;
                let status = if report_deferred {
                    held.status_with_deferred()
                } else {
                    own
                };
                held.learn(shape, own);
                Ok(status)
            }
            Sent::Posted(mut guard) => {
                guard.note_sent(inert, enqueued);
                Ok(CL_SUCCESS)
            }
        }
    }
}

/// Runs `f` on queue `q`'s object with the channel held, if the queue has
/// run everything it was given and nothing has been sent since (as for
/// [`finish_drained`]): a command enqueued now would start at once, and no
/// other thread can send one meanwhile. `f` gets a way to take the failure
/// of an earlier deferred call not yet reported (CL_SUCCESS, 0, if none),
/// to report it or not.
pub fn while_drained<T>(
    q: *mut c_void,
    f: impl FnOnce(&Obj, &mut dyn FnMut() -> i32) -> Option<T>,
) -> Option<T> {
    let conn = conn()?;
    let mut guard = conn.state.lock();
    if FORK_GEN.load(Ordering::Relaxed) != conn.fork_gen || force_sync() {
        return None;
    }
    let o = obj(q, Kind::Queue).ok()??;
    if guard.drained != Some((o.id, guard.epoch())) {
        return None;
    }
    f(o, &mut || guard.take_deferred())
}

/// After a marker with no wait list was sent for queue `q` as event `ev`:
/// whether the queue had run everything it was given, with nothing sent
/// between that and the marker. A marker waits only for its queue's earlier
/// commands, so it is then complete once sent (the server runs it in
/// order all the same), and the queue stays drained. Not on a profiling
/// queue, whose marker's times the server must have before a wait returns.
pub fn marker_on_drained(q: *mut c_void, ev: *mut c_void) -> bool {
    let Some(conn) = conn() else {
        return false;
    };
    let mut guard = conn.state.lock();
    if FORK_GEN.load(Ordering::Relaxed) != conn.fork_gen || force_sync() {
        return false;
    }
    let (Ok(Some(queue)), Ok(Some(event))) = (obj(q, Kind::Queue), obj(ev, Kind::Event)) else {
        return false;
    };
    // Its start and end times are the device's, asked of the server.
    if queue.profiling.load(Ordering::Relaxed) {
        return false;
    }
    let Some((lq, le, at)) = guard.last_enqueued else {
        return false;
    };
    let before = at.checked_sub(1).map(|d| (queue.id, d));
    if (lq, le) != (queue.id, event.id) || guard.drained != before {
        return false;
    }
    if guard.epoch() == at {
        guard.drained = Some((queue.id, at));
    }
    true
}

/// clFinish's answer for a queue that has run everything it was given, with
/// nothing sent to the server since that became known: CL_SUCCESS, or an
/// earlier deferred failure not yet reported, as the server's answer would
/// have been. `None`: the call must go to the server.
pub fn finish_drained(q: *mut c_void) -> Option<i32> {
    while_drained(q, |_, deferred| Some(deferred()))
}

/// The failure of an earlier deferred call not yet reported (CL_SUCCESS if
/// none), now reported.
pub fn take_deferred() -> i32 {
    let Some(conn) = conn() else {
        return CL_OUT_OF_RESOURCES;
    };
    conn.state.lock().take_deferred()
}
