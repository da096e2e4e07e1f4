//! Transfers that complete after the call returns, because what they wait
//! for is gated on a user event that this very thread may set afterwards:
//! the client performs them when the gate opens, behind a barrier that
//! stands for them in the application's queue.

#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use wormhole_opencl_api::{
    Kind, CL_EVENT_COMMAND_TYPE, CL_IMAGE_ARRAY_SIZE, CL_IMAGE_DEPTH, CL_IMAGE_HEIGHT,
    CL_IMAGE_WIDTH, CL_INVALID_CONTEXT, CL_INVALID_MEM_OBJECT, CL_INVALID_OPERATION,
    CL_INVALID_VALUE, CL_MAP_READ, CL_MEM_FLAGS, CL_MEM_HOST_NO_ACCESS, CL_MEM_HOST_READ_ONLY,
    CL_MEM_HOST_WRITE_ONLY, CL_MEM_OBJECT_IMAGE1D_ARRAY, CL_MEM_OBJECT_IMAGE2D_ARRAY, CL_MEM_SIZE,
    CL_MEM_TYPE, CL_SUCCESS,
};

use crate::connection::{fresh_id, info_value};
use crate::gen;
use crate::maps::{clEnqueueUnmapMemObject, Fill};
use crate::objects::obj;
use crate::overrides::{
    clCreateUserEvent, clEnqueueReadBuffer, clEnqueueReadBufferRect, clEnqueueReadImage,
    clEnqueueWriteBuffer, clEnqueueWriteBufferRect, clEnqueueWriteImage, clSetUserEventStatus,
    copy_for, mem_info, BufTransfer, CL_COMPLETE, CL_MEM_OBJECT_BUFFER, CL_QUEUE_CONTEXT,
    CL_QUEUE_DEVICE, CL_TRUE,
};
use crate::waits;

/// What the library would refuse when the transfer is enqueued, checked
/// now against what this side knows of `mem` (cached answers, mostly): the
/// transfer itself is enqueued later, and its own failure would reach the
/// application only through the event. `ctx` is the queue's context.
fn check_gated(ctx: *mut c_void, mem: *mut c_void, op: GatedOp) -> Result<(), i32> {
    let (image, write) = match op {
        GatedOp::Image { write, .. } => (true, write),
        GatedOp::Buffer { write, .. } | GatedOp::Rect { write, .. } => (false, write),
    };
    let ty: u32 = mem_info(mem, CL_MEM_TYPE)?;
    // CL_MEM_OBJECT_IMAGE2D to CL_MEM_OBJECT_IMAGE1D_BUFFER.
    let right_kind = if image {
        (0x10F1..=0x10F6).contains(&ty)
    } else {
        ty == CL_MEM_OBJECT_BUFFER
    };
    if !right_kind {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    let mem_ctx: *mut c_void = mem_info(mem, CL_MEM_CONTEXT)?;
    if mem_ctx != ctx {
        return Err(CL_INVALID_CONTEXT);
    }
    let denied = if write {
        CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS
    } else {
        CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS
    };
    let flags = match obj(mem, Kind::Mem)?.and_then(|o| o.created_flags()) {
        Some(f) => f,
        None => mem_info::<u64>(mem, CL_MEM_FLAGS)?,
    };
    if flags & denied != 0 {
        return Err(CL_INVALID_OPERATION);
    }
    let end = match op {
        GatedOp::Image { origin, region, .. } => return image_box_ok(mem, ty, origin, region),
        GatedOp::Buffer { offset, size, .. } => offset.checked_add(size).map(|e| e as u64),
        GatedOp::Rect { rect: r, .. } => {
            let t = |a: [usize; 3]| a.map(|v| v as u64);
            let [row, slice, ..] = r.pitches;
            wormhole_opencl_api::rect_extent(t(r.region), 1, row as u64, slice as u64)
                .and_then(|ext| ext.end(t(r.buffer_origin), 1))
        }
    };
    let len: usize = mem_info(mem, CL_MEM_SIZE)?;
    match end {
        Some(end) if end <= len as u64 => Ok(()),
        _ => Err(CL_INVALID_VALUE),
    }
}

/// An image transfer's box lies within the image (array layers count as
/// an axis) and is not empty, as the server checks a transfer it runs.
fn image_box_ok(
    image: *mut c_void,
    ty: u32,
    origin: [usize; 3],
    region: [usize; 3],
) -> Result<(), i32> {
    let size = |p: u32| -> Result<usize, i32> {
        info_value::<usize>(gen::clGetImageInfo, image, p).map(|v| v.max(1))
    };
    let (w, h, d, layers) = (
        size(CL_IMAGE_WIDTH)?,
        size(CL_IMAGE_HEIGHT)?,
        size(CL_IMAGE_DEPTH)?,
        size(CL_IMAGE_ARRAY_SIZE)?,
    );
    let dims = match ty {
        CL_MEM_OBJECT_IMAGE1D_ARRAY => [w, layers, 1],
        CL_MEM_OBJECT_IMAGE2D_ARRAY => [w, h, layers],
        _ => [w, h, d],
    };
    for i in 0..3 {
        match origin[i].checked_add(region[i]) {
            Some(end) if region[i] != 0 && end <= dims[i] => {}
            _ => return Err(CL_INVALID_VALUE),
        }
    }
    Ok(())
}

const CL_MEM_CONTEXT: u32 = 0x1106;

/// A handle a queue knows: its context or device.
fn queue_handle(q: *mut c_void, param: u32) -> Result<*mut c_void, i32> {
    // The client library checks `q` before anything is sent.
    info_value(gen::clGetCommandQueueInfo, q, param)
}

/// A transfer that completes after we return: a map the server does not
/// wait for, whose event fires a callback (on the notifier thread) that
/// copies, unmaps and completes a user event standing for the transfer. A
/// barrier on that user event keeps later commands of the queue after the
/// copy, as they would be after the transfer.
///
/// # Safety
/// As for `transfer_via_map`; `t.ptr` stays valid until the transfer
/// completes (the API's rule for non-blocking transfers).
pub(crate) unsafe fn transfer_later(t: &BufTransfer) -> i32 {
    let (q, buf) = (t.q, t.buf);
    let ctx = match queue_handle(q, CL_QUEUE_CONTEXT) {
        Ok(c) => c,
        Err(s) => return s,
    };
    let mut e = CL_SUCCESS;
    // SAFETY: `ctx` is the queue's context.
    let user = unsafe { clCreateUserEvent(ctx, &mut e) };
    if e != CL_SUCCESS {
        return e;
    }
    let mut done_ev = std::ptr::null_mut();
    // SAFETY: `t.wl` holds `t.n` events by the enqueue's contract (this fn's, as for
    // transfer_via_map); `done_ev` is our local slot, writable.
    let m = match unsafe { t.map(&mut done_ev, true) } {
        Ok(m) => m,
        Err(e) => {
            // SAFETY: our user event, never handed out.
            unsafe { drop_user_event(user, e) };
            return e;
        }
    };
    // SAFETY: handles the application holds; our references keep them for
    // the callback.
    unsafe {
        gen::clRetainCommandQueue(q);
        gen::clRetainMemObject(buf);
    }
    // SAFETY: `user` is ours and not set.
    let hold = match unsafe { Hold::behind(q, user, done_ev) } {
        Ok(h) => h,
        Err(s) => {
            // SAFETY: the map and references are ours.
            unsafe {
                clEnqueueUnmapMemObject(
                    q,
                    buf,
                    m.cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
                gen::clReleaseEvent(done_ev);
                gen::clReleaseCommandQueue(q);
                gen::clReleaseMemObject(buf);
                drop_user_event(user, s);
            }
            return s;
        }
    };
    let later = Later::Mapped {
        q: q as usize,
        buf: buf as usize,
        mapped: m as usize,
        app: t.ptr as usize,
        size: t.size,
        map_flags: t.map_flags,
        hold,
    };
    let stands_for = if t.map_flags == CL_MAP_READ {
        CL_COMMAND_READ_BUFFER
    } else {
        CL_COMMAND_WRITE_BUFFER
    };
    // SAFETY: `ev` is the application's out-slot.
    unsafe { later.wait_for(done_ev, t.ev, stands_for) }
}

/// A transfer completing later, by how: a map of a buffer in shared memory
/// to copy from or into ([`transfer_later`]), or a transfer to run once its
/// gate opens ([`transfer_after_gate`]). Addresses are integers: it
/// completes on another thread.
enum Later {
    Mapped {
        q: usize,
        buf: usize,
        mapped: usize,
        app: usize,
        size: usize,
        map_flags: u64,
        hold: Hold,
    },
    Gated {
        ctx: usize,
        dev: usize,
        mem: usize,
        op: GatedOp,
        app: usize,
        hold: Hold,
    },
    /// A map the server enqueued without waiting, whose bytes are fetched
    /// into the application's mapping ([`map_later`]).
    Map { fill: Fill, hold: Hold },
}

/// A transfer to run once its gate opens; the host memory is the
/// application's, at `app` in [`Later::Gated`].
#[derive(Clone, Copy)]
pub(crate) enum GatedOp {
    Buffer {
        write: bool,
        offset: usize,
        size: usize,
    },
    Image {
        write: bool,
        origin: [usize; 3],
        region: [usize; 3],
        row: usize,
        slice: usize,
    },
    Rect {
        write: bool,
        rect: Rect,
    },
}

/// A buffer rectangle transfer's geometry: buffer origin, host origin,
/// region, then buffer row and slice pitch, host row and slice pitch.
#[derive(Clone, Copy)]
pub(crate) struct Rect {
    pub buffer_origin: [usize; 3],
    pub host_origin: [usize; 3],
    pub region: [usize; 3],
    pub pitches: [usize; 4],
}

/// Transfers completing later, by the token their callback carries. PoCL
/// 3.1 calls no `CL_COMPLETE` callback of a failed command, so a user event
/// set to a failure also looks here for the transfers it failed
/// ([`fail_later_transfers`]). Whoever takes an entry out completes it.
fn later_transfers() -> std::sync::MutexGuard<'static, HashMap<u64, Later>> {
    static L: OnceLock<Mutex<HashMap<u64, Later>>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

impl Later {
    fn hold(&self) -> &Hold {
        match self {
            Later::Mapped { hold, .. } | Later::Gated { hold, .. } | Later::Map { hold, .. } => {
                hold
            }
        }
    }

    /// Completes the transfer when `cmd` (held by the hold) completes, and
    /// hands out the hold's barrier as its event, answering
    /// `CL_EVENT_COMMAND_TYPE` with `stands_for`.
    ///
    /// # Safety
    /// `ev` is NULL or an out-slot.
    unsafe fn wait_for(self, cmd: *mut c_void, ev: *mut *mut c_void, stands_for: u32) -> i32 {
        let barrier = self.hold().held[0] as *mut c_void;
        let token = fresh_id();
        later_transfers().insert(token, self);
        // SAFETY: `later_ready` takes the token's entry, at most once.
        let s = unsafe {
            gen::clSetEventCallback(
                cmd,
                CL_COMPLETE,
                later_ready as *mut c_void,
                token as *mut c_void,
            )
        };
        if s != CL_SUCCESS {
            // No way to learn when to complete it: undo, and let the queue
            // go on (the application gets the error, not the event).
            let l = later_transfers().remove(&token);
            if let Some(l) = l {
                // SAFETY: taken out once.
                unsafe { l.finish(CL_COMPLETE) };
            }
            return s;
        }
        // SAFETY: `ev` is NULL or the application's writable cl_event slot (this fn's contract,
        // from the enqueue's); `barrier` is the hold's, a live event of ours.
        unsafe { hand_out(barrier, ev, stands_for) };
        CL_SUCCESS
    }

    /// Performs what is left once `cmd` completed with `status`, then
    /// [`Later::finish`]es with the transfer's status.
    ///
    /// # Safety
    /// Once per transfer, after `cmd` completed or failed.
    unsafe fn complete(self, status: i32) {
        if let Later::Map { fill, hold } = self {
            let s = if status == CL_COMPLETE {
                fill.run()
            } else {
                status
            };
            // SAFETY: once, after the work.
            unsafe { hold.finish(s) };
            return;
        }
        let mut s = status;
        if status == CL_COMPLETE {
            match &self {
                Later::Mapped {
                    mapped,
                    app,
                    size,
                    map_flags,
                    ..
                } => {
                    // SAFETY: the map is done and lasts until the unmap in
                    // `finish`; it spans `size` bytes (map_buffer checked the
                    // reply's length); the application keeps its memory until
                    // the transfer completes.
                    unsafe { copy_for(*map_flags, *mapped as *mut u8, *app as *mut u8, *size) };
                }
                Later::Gated {
                    ctx,
                    dev,
                    mem,
                    op,
                    app,
                    ..
                } => {
                    // SAFETY: what `transfer_after_gate` was given, kept alive
                    // by our references.
                    s = unsafe {
                        transfer_now(
                            *ctx as *mut c_void,
                            *dev as *mut c_void,
                            *mem as *mut c_void,
                            *op,
                            *app as *mut c_void,
                        )
                    };
                }
                Later::Map { .. } => {}
            }
        }
        // SAFETY: once, after the work.
        unsafe { self.finish(s) };
    }

    /// Gives back what the transfer held (its mapping, our references) and
    /// sets its user event: `CL_COMPLETE`, or the transfer's failure. An
    /// undone transfer finishes as complete, so that the queue goes on.
    ///
    /// # Safety
    /// Once per transfer.
    unsafe fn finish(self, status: i32) {
        match self {
            Later::Mapped {
                q,
                buf,
                mapped,
                hold,
                ..
            } => {
                // SAFETY: our mapping, given back once; then our references
                // go.
                unsafe { unmap_held(q, buf, mapped, &hold, status) };
            }
            Later::Gated { ctx, mem, hold, .. } => {
                // SAFETY: set once; then our references go.
                unsafe {
                    hold.finish(status);
                    gen::clReleaseContext(ctx as *mut c_void);
                    gen::clReleaseMemObject(mem as *mut c_void);
                }
            }
            // SAFETY: set once. The mapping stays the application's.
            Later::Map { hold, .. } => unsafe { hold.finish(status) },
        }
    }
}

/// Gives a mapping of ours back, completes the hold with `status`, and
/// lets our references to the queue and buffer go. The unmap gets an event
/// we hold until then, as the hold's commands do.
///
/// # Safety
/// Once per mapping; `q` and `buf` are references of ours.
unsafe fn unmap_held(q: usize, buf: usize, mapped: usize, hold: &Hold, status: i32) {
    let (q, buf) = (q as *mut c_void, buf as *mut c_void);
    let mut unmapped = std::ptr::null_mut();
    // SAFETY: `mapped` is our mapping of `buf`, given back once here (this fn's contract); `q` and
    // `buf` are references of ours, live until released below; `unmapped` is a local slot.
    unsafe {
        let s = clEnqueueUnmapMemObject(
            q,
            buf,
            mapped as *mut c_void,
            0,
            std::ptr::null(),
            &mut unmapped,
        );
        hold.finish(status);
        if s == CL_SUCCESS {
            gen::clReleaseEvent(unmapped);
        }
        gen::clReleaseCommandQueue(q);
        gen::clReleaseMemObject(buf);
    }
}

/// Runs a gated transfer, blocking, on a queue of our own: in order and
/// with no wait list, it runs now.
///
/// # Safety
/// The handles are live; the application keeps the memory at `app` until
/// the transfer completes.
unsafe fn transfer_now(
    ctx: *mut c_void,
    dev: *mut c_void,
    mem: *mut c_void,
    op: GatedOp,
    app: *mut c_void,
) -> i32 {
    let mut e = CL_SUCCESS;
    // SAFETY: the context and device of the application's queue.
    let q = unsafe { gen::clCreateCommandQueue(ctx, dev, 0, &mut e) };
    if e != CL_SUCCESS {
        return e;
    }
    let (none, no_ev) = (std::ptr::null(), std::ptr::null_mut());
    // SAFETY: `app` is the application's memory for this transfer, which by the non-blocking
    // transfer's contract stays valid until it completes, i.e. past this blocking call; the
    // geometry (`offset`/`size`, origins, region, pitches) is what check_gated accepted against the
    // object; `q` is our own queue and `mem` is held by our reference.
    let s = unsafe {
        match op {
            GatedOp::Buffer {
                write: true,
                offset,
                size,
            } => clEnqueueWriteBuffer(q, mem, CL_TRUE, offset, size, app, 0, none, no_ev),
            GatedOp::Buffer {
                write: false,
                offset,
                size,
            } => clEnqueueReadBuffer(q, mem, CL_TRUE, offset, size, app, 0, none, no_ev),
            GatedOp::Rect { write, rect: r } => {
                let (bo, ho, rg) = (
                    r.buffer_origin.as_ptr().cast(),
                    r.host_origin.as_ptr().cast(),
                    r.region.as_ptr().cast(),
                );
                let [brp, bsp, hrp, hsp] = r.pitches;
                if write {
                    clEnqueueWriteBufferRect(
                        q, mem, CL_TRUE, bo, ho, rg, brp, bsp, hrp, hsp, app, 0, none, no_ev,
                    )
                } else {
                    clEnqueueReadBufferRect(
                        q, mem, CL_TRUE, bo, ho, rg, brp, bsp, hrp, hsp, app, 0, none, no_ev,
                    )
                }
            }
            GatedOp::Image {
                write,
                origin,
                region,
                row,
                slice,
            } => {
                let (o, r) = (origin.as_ptr().cast(), region.as_ptr().cast());
                if write {
                    clEnqueueWriteImage(q, mem, CL_TRUE, o, r, row, slice, app, 0, none, no_ev)
                } else {
                    clEnqueueReadImage(q, mem, CL_TRUE, o, r, row, slice, app, 0, none, no_ev)
                }
            }
        }
    };
    // SAFETY: our own queue.
    unsafe { gen::clReleaseCommandQueue(q) };
    s
}

/// The callback of the command a transfer completing later waits for.
unsafe extern "C" fn later_ready(_ev: *mut c_void, status: i32, data: *mut c_void) {
    let l = later_transfers().remove(&(data as u64));
    if let Some(l) = l {
        // SAFETY: taken out once, after its command completed.
        unsafe { l.complete(status) };
    }
}

/// After a user event was set to a failure: completes, with their
/// command's failure, the transfers whose command it failed.
pub(crate) fn fail_later_transfers() {
    let cmds: Vec<(u64, usize)> = later_transfers()
        .iter()
        .map(|(t, l)| (*t, l.hold().held[1]))
        .collect();
    for (token, cmd) in cmds {
        // The hold keeps `cmd` alive.
        if let Ok(st @ ..0) = waits::event_status(cmd as *mut c_void) {
            let l = later_transfers().remove(&token);
            if let Some(l) = l {
                // SAFETY: taken out once; its command failed.
                unsafe { l.complete(st) };
            }
        }
    }
}

/// A transfer that completes after we return, of a buffer that is not in
/// memory shared with the server (over TCP, without shared buffers, on
/// other devices): a marker with the transfer's wait list fires a callback
/// (on the notifier thread) that performs the transfer, blocking, on a queue
/// of our own, and completes a user event standing for it. A barrier on that
/// event keeps later commands of the queue after the transfer.
///
/// # Safety
/// As for `clEnqueueReadBuffer` (`write` false) or `clEnqueueWriteBuffer`;
/// `ptr` stays valid until the transfer completes (the API's rule for
/// non-blocking transfers).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn transfer_after_gate(
    q: *mut c_void,
    mem: *mut c_void,
    op: GatedOp,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    let (ctx, dev) = match (
        queue_handle(q, CL_QUEUE_CONTEXT),
        queue_handle(q, CL_QUEUE_DEVICE),
    ) {
        (Ok(c), Ok(d)) => (c, d),
        (Err(s), _) | (_, Err(s)) => return s,
    };
    if let Err(s) = check_gated(ctx, mem, op) {
        return s;
    }
    let mut marker = std::ptr::null_mut();
    // SAFETY: `wl` holds `n` events by the transfer's contract (this fn's, the OpenCL enqueue's
    // event_wait_list); `marker` is a local out-slot.
    let s = unsafe { gen::clEnqueueMarkerWithWaitList(q, n, wl, &mut marker) };
    if s != CL_SUCCESS {
        return s;
    }
    let mut e = CL_SUCCESS;
    // SAFETY: `ctx` is the queue's context.
    let user = unsafe { clCreateUserEvent(ctx, &mut e) };
    let hold = match e {
        // SAFETY: `user` is ours and not set; `marker` is ours.
        CL_SUCCESS => unsafe { Hold::behind(q, user, marker) },
        e => Err(e),
    };
    let hold = match hold {
        Ok(h) => h,
        Err(s) => {
            // SAFETY: our own references.
            unsafe {
                gen::clReleaseEvent(marker);
                if e == CL_SUCCESS {
                    drop_user_event(user, s);
                }
            }
            return s;
        }
    };
    // SAFETY: handles the application holds; our references keep them for
    // the callback.
    unsafe {
        gen::clRetainContext(ctx);
        gen::clRetainMemObject(mem);
    }
    let later = Later::Gated {
        ctx: ctx as usize,
        dev: dev as usize,
        mem: mem as usize,
        op,
        app: ptr as usize,
        hold,
    };
    // SAFETY: `ev` is the application's out-slot.
    unsafe { later.wait_for(marker, ev, op.command_type()) }
}

/// A map the server enqueued without waiting (its event `cmd`, ours):
/// once it ran, `fill` fetches its bytes into the application's mapping,
/// and only then does the event handed out for it (a barrier behind a
/// user event, which later commands of the queue wait for) complete.
///
/// # Safety
/// `ev` is NULL or the application's out-slot; `cmd` is ours (taken).
pub(crate) unsafe fn map_later(
    q: *mut c_void,
    cmd: *mut c_void,
    fill: Fill,
    ev: *mut *mut c_void,
    stands_for: u32,
) -> i32 {
    let mut e = CL_SUCCESS;
    let user = match queue_handle(q, CL_QUEUE_CONTEXT) {
        // SAFETY: `ctx` is the queue's context.
        Ok(ctx) => unsafe { clCreateUserEvent(ctx, &mut e) },
        Err(s) => {
            e = s;
            std::ptr::null_mut()
        }
    };
    let hold = match e {
        // SAFETY: `user` is ours and not set; `cmd` is ours.
        CL_SUCCESS => unsafe { Hold::behind(q, user, cmd) },
        e => Err(e),
    };
    match hold {
        // SAFETY: `ev` is NULL or the application's writable cl_event slot by
        // clEnqueueMapBuffer/MapImage's contract (this fn's); `cmd` is ours and the hold now keeps
        // it.
        Ok(hold) => unsafe { Later::Map { fill, hold }.wait_for(cmd, ev, stands_for) },
        Err(s) => {
            // SAFETY: our own references.
            unsafe {
                gen::clReleaseEvent(cmd);
                if e == CL_SUCCESS {
                    drop_user_event(user, s);
                }
            }
            s
        }
    }
}

const CL_COMMAND_READ_BUFFER: u32 = 0x11F3;
const CL_COMMAND_WRITE_BUFFER: u32 = 0x11F4;
const CL_COMMAND_READ_IMAGE: u32 = 0x11F6;
const CL_COMMAND_WRITE_IMAGE: u32 = 0x11F7;
const CL_COMMAND_READ_BUFFER_RECT: u32 = 0x1201;
const CL_COMMAND_WRITE_BUFFER_RECT: u32 = 0x1202;

impl GatedOp {
    /// The command type the transfer has natively.
    fn command_type(&self) -> u32 {
        match self {
            GatedOp::Buffer { write: false, .. } => CL_COMMAND_READ_BUFFER,
            GatedOp::Buffer { write: true, .. } => CL_COMMAND_WRITE_BUFFER,
            GatedOp::Image { write: false, .. } => CL_COMMAND_READ_IMAGE,
            GatedOp::Image { write: true, .. } => CL_COMMAND_WRITE_IMAGE,
            GatedOp::Rect { write: false, .. } => CL_COMMAND_READ_BUFFER_RECT,
            GatedOp::Rect { write: true, .. } => CL_COMMAND_WRITE_BUFFER_RECT,
        }
    }
}

/// The user event that stands for a transfer completing later, and the
/// events we hold until it is set: the barrier that keeps the queue's later
/// commands behind it, and the command whose callback completes it. PoCL
/// 3.1 aborts when a command fails whose event nobody holds any more (these
/// fail when what the transfer waits for fails).
struct Hold {
    user: usize,
    held: [usize; 2],
}

impl Hold {
    /// Enqueues the barrier behind `user`; `cmd` is the command whose
    /// callback will set `user` (our reference, which the hold takes).
    ///
    /// # Safety
    /// `user` is a user event of ours, not yet set; `cmd` an event of ours.
    unsafe fn behind(q: *mut c_void, user: *mut c_void, cmd: *mut c_void) -> Result<Hold, i32> {
        let on = [user];
        let mut barrier = std::ptr::null_mut();
        // SAFETY: one event in the list; a valid out-slot.
        let s = unsafe { gen::clEnqueueBarrierWithWaitList(q, 1, on.as_ptr(), &mut barrier) };
        if s != CL_SUCCESS {
            return Err(s);
        }
        Ok(Hold {
            user: user as usize,
            held: [barrier as usize, cmd as usize],
        })
    }

    /// Sets the user event (`CL_COMPLETE`, or the transfer's failure) and
    /// lets every reference go.
    ///
    /// # Safety
    /// Once per hold.
    unsafe fn finish(&self, status: i32) {
        let status = if status == CL_SUCCESS {
            CL_COMPLETE
        } else {
            status.min(-1)
        };
        // SAFETY: `user` is our user event, not yet set, and `held` our references to the barrier
        // and the command; this fn runs once per hold (its contract), so each is set or released
        // once.
        unsafe {
            drop_user_event(self.user as *mut c_void, status);
            for e in self.held {
                gen::clReleaseEvent(e as *mut c_void);
            }
        }
    }
}

/// Hands `barrier` out as the transfer's event. A barrier, not the user
/// event behind it: a command's event passes through every execution
/// state, and callbacks the application registers for `CL_RUNNING` fire
/// (PoCL fires none on a user event, which goes from submitted to
/// complete), and it belongs to the application's queue. Its command type
/// is answered as the transfer's ([`clGetEventInfo`]).
///
/// # Safety
/// `barrier` is an event of ours; `ev` is NULL or an out-slot.
unsafe fn hand_out(barrier: *mut c_void, ev: *mut *mut c_void, stands_for: u32) {
    if !ev.is_null() {
        if let Ok(Some(o)) = obj(barrier, Kind::Event) {
            o.stands_for.store(stands_for, Ordering::Relaxed);
        }
        // SAFETY: the application's own reference to the barrier.
        unsafe {
            gen::clRetainEvent(barrier);
            *ev = barrier;
        }
    }
}

/// The `CL_EVENT_COMMAND_TYPE` of an event standing for a transfer the
/// client completes itself: the transfer's type, as the transfer's own event
/// natively would answer. `None` for any other event or question.
pub(crate) fn stand_in_command_type(ev: *mut c_void, param: u32) -> Option<u32> {
    match (param, obj(ev, Kind::Event)) {
        (CL_EVENT_COMMAND_TYPE, Ok(Some(o))) => {
            Some(o.stands_for.load(Ordering::Relaxed)).filter(|&t| t != 0)
        }
        _ => None,
    }
}

/// Sets our user event's status and lets our reference go.
///
/// # Safety
/// `user` is a user event of ours, whose status is not set yet.
unsafe fn drop_user_event(user: *mut c_void, status: i32) {
    // SAFETY: `user` is our user event, not yet set (this fn's contract): set once, then our one
    // reference released.
    unsafe {
        clSetUserEventStatus(user, status);
        gen::clReleaseEvent(user);
    }
}
