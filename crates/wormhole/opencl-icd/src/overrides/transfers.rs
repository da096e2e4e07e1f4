//! Buffer reads and writes: in place in shared memory, through a map, as a
//! bulk stream outside the frame, or completed later behind a user event.
#![allow(non_snake_case)]

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{
    func, Kind, CL_MAP_READ, CL_MAP_WRITE_INVALIDATE_REGION, CL_MEM_HOST_NO_ACCESS,
    CL_MEM_HOST_READ_ONLY, CL_MEM_HOST_WRITE_ONLY, CL_SUCCESS,
};
use wormhole_transport::copy::copy_bulk;

use super::events::settle_for;
use crate::connection::Call;
use crate::gen;
use crate::later::{transfer_after_gate, transfer_later, GatedOp};
use crate::maps::{clEnqueueUnmapMemObject, map_buffer};
use crate::objects::{obj, Placement};
use crate::waits;

/// Transfers at least this large stream through the channel outside the
/// frame (see `whEnqueueWriteBufferBulk`), or, into buffers in memory shared
/// with the server, are a copy here.
const BULK_MIN: usize = 256 << 10;

/// A buffer read or write as the application asked for it: `map_flags` is
/// WRITE_INVALIDATE_REGION for a write, READ for a read.
#[derive(Clone, Copy)]
pub(crate) struct BufTransfer {
    pub q: *mut c_void,
    pub buf: *mut c_void,
    pub map_flags: u64,
    pub offset: usize,
    pub size: usize,
    pub ptr: *mut u8,
    pub n: u32,
    pub wl: *const *mut c_void,
    pub ev: *mut *mut c_void,
}

impl BufTransfer {
    fn write(&self) -> bool {
        self.map_flags != CL_MAP_READ
    }

    /// Maps the transfer's range after its wait list, the map's event at
    /// `done` (NULL: none). The mapping spans `self.size` bytes (map_buffer
    /// fails a reply that says otherwise).
    ///
    /// # Safety
    /// `self.wl` holds `self.n` events; `done` is NULL or a writable
    /// cl_event slot.
    pub unsafe fn map(&self, done: *mut *mut c_void, blocking: bool) -> Result<*mut u8, i32> {
        let t = self;
        // SAFETY: `t.wl` holds `t.n` events and `done` is NULL or writable (this fn's contract).
        unsafe {
            map_buffer(
                t.q,
                t.buf,
                t.map_flags,
                t.offset,
                t.size,
                t.n,
                t.wl,
                done,
                blocking,
            )
        }
        .map(|m| m as *mut u8)
    }
}

/// A buffer whose large transfers should go through a map, because the
/// server may keep it in memory this process maps too (not yet known not
/// to; a USE_HOST_PTR buffer never is).
fn shared_candidate(buf: *mut c_void) -> Option<&'static crate::objects::Obj> {
    crate::connection::arena()?;
    let o = obj(buf, Kind::Mem).ok()??;
    (o.placement() != Placement::Server && o.host_ptr.load(Ordering::Relaxed) == 0).then_some(o)
}

/// A transfer as a blocking map, a copy and an unmap (whose event is the
/// transfer's). The map runs after the wait list and, in order, after
/// earlier commands, as the transfer would; when the buffer lives in shared
/// memory nothing crosses the channel but the two calls. Otherwise the map
/// moved the bytes through the channel: the buffer is remembered as the
/// server's, and later transfers stream (one copy fewer).
///
/// # Safety
/// As for `clEnqueueWriteBuffer` or `clEnqueueReadBuffer`: `t.ptr` holds
/// `t.size` bytes.
unsafe fn transfer_via_map(o: &crate::objects::Obj, t: &BufTransfer) -> i32 {
    // SAFETY: `t.wl` holds `t.n` events by clEnqueueRead/WriteBuffer's contract (this fn's);
    // `done` is NULL.
    let m = match unsafe { t.map(std::ptr::null_mut(), false) } {
        Ok(m) => m,
        Err(e) => return e,
    };
    let shared = crate::connection::arena().is_some_and(|a| a.offset_of(m, t.size).is_some());
    o.set_placement(if shared {
        Placement::Shared
    } else {
        Placement::Server
    });
    // SAFETY: `m` is a non-NULL mapping of `t.size` bytes (map_buffer checked the reply's length
    // against `t.size`), live until the unmap below; the reply
    // is in, so a read's bytes are there; `t.ptr` is the application's, valid for `t.size` bytes by
    // clEnqueueRead/WriteBuffer's contract (this fn's contract); a fresh mapping cannot overlap it.
    unsafe { copy_for(t.map_flags, m, t.ptr, t.size) };
    // SAFETY: our own mapping, given back once.
    unsafe { clEnqueueUnmapMemObject(t.q, t.buf, m.cast(), 0, std::ptr::null(), t.ev) }
}

/// Copies between a mapping and the application's memory, in the
/// direction the map's flags say.
///
/// # Safety
/// Both point to `size` bytes of distinct memory.
pub(crate) unsafe fn copy_for(map_flags: u64, mapped: *mut u8, app: *mut u8, size: usize) {
    // SAFETY: both pointers span `size` bytes of distinct memory (this fn's contract); copy_bulk
    // reads only `size` bytes of its source and writes only `size` of its destination.
    unsafe {
        if map_flags == CL_MAP_READ {
            copy_bulk(app, mapped, size);
        } else {
            copy_bulk(mapped, app as *const u8, size);
        }
    }
}

/// What a buffer read or write does before it is forwarded as such: make
/// it in place (see [`transfer_in_place`]); settle a blocking one (see
/// [`settle_for`]); complete later a non-blocking one that may wait on an
/// open user event; carry a large one into a buffer in shared memory out
/// by map. `None`: forward it.
///
/// # Safety
/// As for `clEnqueueWriteBuffer` or `clEnqueueReadBuffer`.
unsafe fn transfer_shortcut(t: &BufTransfer, blocking: u32) -> Option<i32> {
    // SAFETY: `t` is the application's transfer and this fn carries its contract: `t.ptr` holds
    // `t.size` bytes, readable or writable as the direction needs.
    if let Some(s) = unsafe { transfer_in_place(t) } {
        return Some(s);
    }
    let BufTransfer {
        q,
        buf,
        map_flags,
        offset,
        size,
        ptr,
        n,
        wl,
        ev,
    } = *t;
    if blocking == 0 && waits::user_events_open() && !ptr.is_null() && size > 0 {
        // It may wait for a user event that this very thread sets after we
        // return: it completes later, as natively.
        // SAFETY: `t.ptr` holds `t.size` bytes (this fn's contract) and, this being a non-blocking
        // transfer, stays valid until it completes, which transfer_later and transfer_after_gate
        // require; `wl` holds `n` events by the same contract.
        return Some(unsafe {
            if shared_candidate(buf).is_some() {
                transfer_later(t)
            } else {
                let op = GatedOp::Buffer {
                    write: map_flags != CL_MAP_READ,
                    offset,
                    size,
                };
                transfer_after_gate(q, buf, op, ptr.cast(), n, wl, ev)
            }
        });
    }
    // Writes under BULK_MIN the server keeps, and runs as asked.
    if blocking != 0 || map_flags == CL_MAP_READ || size >= BULK_MIN {
        // SAFETY: `wl` holds `n` events by clEnqueueRead/WriteBuffer's contract on event_wait_list
        // (this fn's contract).
        if let Err(e) = unsafe { settle_for(blocking, q, n, wl) } {
            return Some(e);
        }
    }
    if size < BULK_MIN || ptr.is_null() {
        return None;
    }
    let o = shared_candidate(buf)?;
    // SAFETY: `t.ptr` is non-NULL and holds `t.size` bytes by the transfer's contract (this fn's
    // contract), which is transfer_via_map's.
    Some(unsafe { transfer_via_map(o, t) })
}

/// A transfer the client makes itself, without the server: the buffer is
/// one the server placed in the arena and published in its directory, the
/// queue has run everything it was given with nothing sent since, so the
/// transfer would start at once and finish as the copy does, and no wait
/// list or event asks for more. Libraries write each buffer and finish
/// (CLBlast does, around every routine): this spares both round trips,
/// and the queue stays drained for the next one. Anything the library
/// could refuse (another context, a range past the end, a host access the
/// flags deny) goes to the server for its error.
///
/// # Safety
/// `t.ptr` holds `t.size` bytes, readable (write) or writable (read).
unsafe fn transfer_in_place(t: &BufTransfer) -> Option<i32> {
    let BufTransfer {
        q,
        buf,
        offset,
        size,
        ptr,
        n,
        ev,
        ..
    } = *t;
    let write = t.write();
    if n != 0 || !ev.is_null() || ptr.is_null() || size == 0 {
        return None;
    }
    let arena = crate::connection::arena()?;
    let b = obj(buf, Kind::Mem).ok()??;
    let denied = if write {
        CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS
    } else {
        CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS
    };
    if b.created_flags()? & denied != 0 {
        return None;
    }
    let (off, len) = arena.lookup(b.id)?;
    if offset.checked_add(size)? as u64 > len {
        return None;
    }
    let at = arena.ptr_at(off + offset as u64, size)?;
    crate::connection::while_drained(q, |queue, deferred| {
        let ctx = queue.created_in.load(Ordering::Relaxed);
        if ctx == 0 || ctx != b.created_in.load(Ordering::Relaxed) {
            return None;
        }
        if write {
            // Under delay storing the server saves a buffer written in
            // place before it evicts it.
            arena.mark_written(b.id);
        }
        // SAFETY: `at` is `size` bytes of the buffer's storage in the arena (the directory's range,
        // checked above) and `ptr` is the application's, valid for `size` bytes by
        // clEnqueueRead/WriteBuffer's contract (this fn's, non-NULL checked above); the queue runs
        // nothing that could touch the buffer meanwhile.
        unsafe {
            if write {
                copy_bulk(at, ptr, size);
            } else {
                copy_bulk(ptr, at, size);
            }
        }
        // Withdrawn meanwhile (the server evicted it to make room for
        // another tenant): the server does it again, on the buffer's
        // contents restored.
        if !arena.still(b.id, off) {
            return None;
        }
        // A read reports an earlier deferred failure, as the server would.
        Some(if write { CL_SUCCESS } else { deferred() })
    })
}

/// # Safety
/// As for `clEnqueueWriteBuffer`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueWriteBuffer(
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
    let t = BufTransfer {
        q,
        buf,
        map_flags: CL_MAP_WRITE_INVALIDATE_REGION,
        offset,
        size,
        ptr: ptr as *mut u8,
        n,
        wl,
        ev,
    };
    // SAFETY: `ptr` holds `size` readable bytes and `wl` `n` events by clEnqueueWriteBuffer's
    // contract, which transfer_shortcut requires.
    if let Some(s) = unsafe { transfer_shortcut(&t, blocking) } {
        return s;
    }
    if size < BULK_MIN || ptr.is_null() {
        // SAFETY: the arguments are the application's, passed unchanged: clEnqueueWriteBuffer's
        // contract is the generated forwarder's.
        return unsafe {
            gen::clEnqueueWriteBuffer(q, buf, blocking, offset, size, ptr, n, wl, ev)
        };
    }
    let run = || -> Result<i32, i32> {
        let mut c = Call::begin(func::whEnqueueWriteBufferBulk)?;
        c.enc.usize(size);
        c.shape(size as u64);
        c.shape(offset as u64);
        c.handle(q, Kind::Queue)?;
        c.handle(buf, Kind::Mem)?;
        c.enc.usize(offset);
        c.enc.u32(n);
        // SAFETY: by clEnqueueWriteBuffer's contract `wl` holds `n` events and `ptr` `size`
        // readable bytes; it stays valid until `finish_async` returns, which copies the bytes into
        // the channel (blocking or not, the application keeps `ptr` valid at least that long).
        unsafe {
            c.handles(wl, n as usize, Kind::Event)?;
            c.attach_raw(ptr as *const u8, size);
        }
        let n_ev = c.out_new(ev);
        // The data is in the channel when this returns, so the call can be
        // deferred like any other write, blocking or not.
        let status = c.finish_async(false)?;
        if status == CL_SUCCESS {
            // SAFETY: `ev` is NULL or a writable cl_event slot by clEnqueueWriteBuffer's contract.
            unsafe { crate::objects::adopt_new(n_ev, ev, Kind::Event) };
        }
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}

/// # Safety
/// As for `clEnqueueReadBuffer`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueReadBuffer(
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    let t = BufTransfer {
        q,
        buf,
        map_flags: CL_MAP_READ,
        offset,
        size,
        ptr: ptr.cast(),
        n,
        wl,
        ev,
    };
    // SAFETY: `ptr` holds `size` writable bytes and `wl` `n` events by clEnqueueReadBuffer's
    // contract, which transfer_shortcut requires.
    if let Some(s) = unsafe { transfer_shortcut(&t, blocking) } {
        return s;
    }
    if size < BULK_MIN || ptr.is_null() {
        // SAFETY: the arguments are the application's, passed unchanged: clEnqueueReadBuffer's
        // contract is the generated forwarder's.
        return unsafe { gen::clEnqueueReadBuffer(q, buf, blocking, offset, size, ptr, n, wl, ev) };
    }
    let run = || -> Result<i32, i32> {
        let mut c = Call::begin(func::whEnqueueReadBufferBulk)?;
        c.enc.usize(size);
        c.handle(q, Kind::Queue)?;
        c.handle(buf, Kind::Mem)?;
        c.enc.usize(offset);
        c.enc.u32(n);
        // SAFETY: `wl` holds `n` events by clEnqueueReadBuffer's contract on event_wait_list.
        unsafe { c.handles(wl, n as usize, Kind::Event)? };
        let n_ev = c.out_new(ev);
        let mut r = c.finish()?;
        let raw_follows = r.has_outputs() && r.opt_flag()?;
        if raw_follows {
            // SAFETY: `ptr` is non-NULL (checked above) and writable for `size` bytes by
            // clEnqueueReadBuffer's contract; recv_raw fills exactly the slice it is given, so
            // nothing past `size` is written.
            r.recv_raw(unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, size) })?;
        }
        let status = r.status_with_deferred();
        // SAFETY: `ev` is NULL or a writable cl_event slot by clEnqueueReadBuffer's contract.
        unsafe { r.out_new(n_ev, ev, Kind::Event, r.status()) };
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read copies the mapping out to the application's memory, a write
    /// the other way; small and large (the streaming path) alike.
    #[test]
    fn copies_follow_the_maps_direction() {
        for size in [7usize, 3 << 20] {
            let pattern: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let mut mapped = vec![0xEEu8; size];
            let mut app = pattern.clone();
            // SAFETY: both hold `size` bytes, distinct.
            unsafe { copy_for(CL_MAP_READ, mapped.as_mut_ptr(), app.as_mut_ptr(), size) };
            assert!(app.iter().all(|&b| b == 0xEE), "read: mapping to app");
            assert!(mapped.iter().all(|&b| b == 0xEE));

            let mut mapped = vec![0xEEu8; size];
            let mut app = pattern.clone();
            let invalidate = CL_MAP_WRITE_INVALIDATE_REGION;
            // SAFETY: both vectors hold `size` bytes and are distinct allocations.
            unsafe { copy_for(invalidate, mapped.as_mut_ptr(), app.as_mut_ptr(), size) };
            assert_eq!(mapped, pattern, "write: app to mapping");
            assert_eq!(app, pattern);
        }
    }
}
