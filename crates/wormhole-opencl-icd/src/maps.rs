//! Maps: the application's mappings of buffers and images (its own copy,
//! the buffer's memory in the arena, or its USE_HOST_PTR memory), and their
//! unmaps.
#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use wormhole_opencl_api::{
    func, Kind, CL_INVALID_VALUE, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION,
    CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES, CL_SUCCESS,
};
use wormhole_transport::copy::copy_bulk;

use crate::overrides::settle_for;
use crate::rt::{fresh_id, obj, set_errcode, Call, Reply};

/// One mapping handed to the application.
struct Mapped {
    id: u64,
    len: usize,
    flags: u64,
    /// Allocated here (freed on unmap), or the application's host pointer.
    owned: Option<std::alloc::Layout>,
    /// The buffer's own storage, in memory shared with the server: nothing
    /// to write back.
    direct: bool,
}

fn maps() -> std::sync::MutexGuard<'static, HashMap<usize, Vec<Mapped>>> {
    static M: OnceLock<Mutex<HashMap<usize, Vec<Mapped>>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Where a mapping lives on this side: inside the application's host
/// buffer for USE_HOST_PTR buffers (as the API requires), else fresh memory.
fn map_memory(
    host: usize,
    offset: usize,
    len: usize,
) -> Result<(*mut u8, Option<std::alloc::Layout>), i32> {
    if host != 0 {
        return Ok(((host + offset) as *mut u8, None));
    }
    let layout =
        std::alloc::Layout::from_size_align(len.max(1), 128).map_err(|_| CL_INVALID_VALUE)?;
    // SAFETY: a non-zero-sized layout.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(CL_OUT_OF_HOST_MEMORY);
    }
    Ok((p, Some(layout)))
}

/// Reads a map's reply: whether the mapped bytes follow and the mapping's
/// length; receives the bytes straight into the memory handed to the
/// application.
fn finish_map(
    r: &mut Reply<'_>,
    host: usize,
    offset: usize,
    id: u64,
    flags: u64,
) -> Result<*mut c_void, i32> {
    let raw = r.opt_flag()?;
    let (mut len, mut at) = (0u64, u64::MAX);
    // SAFETY: local out-values.
    unsafe {
        r.out_u64(&mut len)?;
        r.out_u64(&mut at)?;
    }
    let len = usize::try_from(len).map_err(|_| CL_OUT_OF_HOST_MEMORY)?;
    let shared = match at {
        u64::MAX => None,
        at => Some(
            crate::rt::arena()
                .and_then(|a| a.ptr_at(at, len))
                .ok_or(CL_OUT_OF_RESOURCES)?,
        ),
    };
    let (p, owned, direct) = match shared {
        Some(sp) if host == 0 => (sp, None, true),
        _ => {
            let (p, owned) = map_memory(host, offset, len)?;
            if let Some(sp) = shared {
                // A USE_HOST_PTR mapping must be the application's memory.
                // SAFETY: both span `len` bytes (checked against the arena;
                // the host buffer from `offset`, as the API promises).
                unsafe { copy_bulk(p, sp, len) };
            } else if raw {
                // SAFETY: `p` spans `len` bytes (just allocated, or the
                // application's host buffer from `offset`, as the API promises).
                r.recv_raw(unsafe { std::slice::from_raw_parts_mut(p, len) })?;
            }
            (p, owned, false)
        }
    };
    maps().entry(p as usize).or_default().push(Mapped {
        id,
        len,
        flags,
        owned,
        direct,
    });
    Ok(p as *mut c_void)
}

/// # Safety
/// As for `clEnqueueMapBuffer`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueMapBuffer(
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    flags: u64,
    offset: usize,
    size: usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    if let Err(e) = unsafe { settle_for(blocking, q, n, wl) } {
        // SAFETY: forwarded contract.
        unsafe { set_errcode(err, e) };
        return std::ptr::null_mut();
    }
    let r = map_buffer(q, buf, flags, offset, size, n, wl, ev, false);
    let (v, e) = match r {
        Ok(v) => (v, CL_SUCCESS),
        Err(e) => (std::ptr::null_mut(), e),
    };
    // SAFETY: forwarded contract.
    unsafe { set_errcode(err, e) };
    v
}

/// The last byte of a map request: whether we map the arena, and whether
/// the server may answer before the map is done (`defer`: only for arena
/// memory, whose bytes we then read once the map's event completes).
fn map_tail_bits(defer: bool) -> u8 {
    u8::from(crate::rt::arena().is_some()) | if defer { 2 } else { 0 }
}

/// What every map request ends with: the wait list, the event slot, a
/// fresh id for the mapping and [`map_tail_bits`]. Returns the event's id
/// (if asked for) and the mapping's.
///
/// # Safety
/// `wl` holds `n` events.
unsafe fn map_request_tail(
    c: &mut Call<'_>,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    defer: bool,
) -> Result<(Option<u64>, u64), i32> {
    c.enc.u32(n);
    // SAFETY: the caller's contract.
    unsafe { c.handles(wl, n as usize, Kind::Event)? };
    let n_ev = c.out_new(ev);
    let id = fresh_id();
    c.enc.u64(id);
    c.enc.u8(map_tail_bits(defer));
    Ok((n_ev, id))
}

/// A buffer map; see [`map_tail_bits`] for `defer`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map_buffer(
    q: *mut c_void,
    buf: *mut c_void,
    flags: u64,
    offset: usize,
    size: usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    defer: bool,
) -> Result<*mut c_void, i32> {
    let mut c = Call::begin(func::clEnqueueMapBuffer)?;
    c.handle(q, Kind::Queue)?;
    c.handle(buf, Kind::Mem)?;
    c.enc.u64(flags);
    c.enc.usize(offset);
    c.enc.usize(size);
    // SAFETY: the caller's contract: `wl` holds `n` events.
    let (n_ev, id) = unsafe { map_request_tail(&mut c, n, wl, ev, defer) }?;
    let host = obj(buf, Kind::Mem)?.map_or(0, |o| o.host_ptr.load(Ordering::Relaxed));
    let mut r = c.finish()?;
    let status = r.status();
    let p = if r.has_outputs() && status == CL_SUCCESS {
        finish_map(&mut r, host, offset, id, flags)?
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: the caller's contract: `ev` is NULL or writable.
    unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
    if status != CL_SUCCESS {
        return Err(status);
    }
    Ok(p)
}

/// # Safety
/// As for `clEnqueueMapImage`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueMapImage(
    q: *mut c_void,
    image: *mut c_void,
    blocking: u32,
    flags: u64,
    origin: *const c_void,
    region: *const c_void,
    row_pitch: *mut usize,
    slice_pitch: *mut usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    let run = || -> Result<*mut c_void, i32> {
        if origin.is_null() || region.is_null() || row_pitch.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        // SAFETY: forwarded contract.
        unsafe { settle_for(blocking, q, n, wl) }?;
        let mut c = Call::begin(func::clEnqueueMapImage)?;
        c.handle(q, Kind::Queue)?;
        c.handle(image, Kind::Mem)?;
        c.enc.u64(flags);
        // SAFETY: 3 size_t each (checked non-NULL above).
        let (o, rg) = unsafe {
            (
                std::slice::from_raw_parts(origin as *const u8, 24),
                std::slice::from_raw_parts(region as *const u8, 24),
            )
        };
        c.enc.bytes(o);
        c.enc.bytes(rg);
        // SAFETY: forwarded contract: `wl` holds `n` events.
        let (n_ev, id) = unsafe { map_request_tail(&mut c, n, wl, ev, false) }?;
        let mut r = c.finish()?;
        let status = r.status();
        let (mut row, mut slice) = (0usize, 0usize);
        let mut p = std::ptr::null_mut();
        if r.has_outputs() {
            // SAFETY: local out-values.
            unsafe {
                r.out_usize(&mut row)?;
                r.out_usize(&mut slice)?;
            }
            if status == CL_SUCCESS {
                p = finish_map(&mut r, 0, 0, id, flags)?;
            }
        }
        // SAFETY: forwarded contract.
        unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
        if status != CL_SUCCESS {
            return Err(status);
        }
        // SAFETY: checked non-NULL above; slice_pitch may be NULL.
        unsafe {
            *row_pitch = row;
            if !slice_pitch.is_null() {
                *slice_pitch = slice;
            }
        }
        Ok(p)
    };
    let (v, e) = match run() {
        Ok(v) => (v, CL_SUCCESS),
        Err(e) => (std::ptr::null_mut(), e),
    };
    // SAFETY: forwarded contract.
    unsafe { set_errcode(err, e) };
    v
}

/// # Safety
/// As for `clEnqueueUnmapMemObject`.
pub unsafe extern "C" fn clEnqueueUnmapMemObject(
    q: *mut c_void,
    mem: *mut c_void,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    let run = || -> Result<i32, i32> {
        obj(mem, Kind::Mem)?;
        let m = {
            let mut all = maps();
            let list = all.get_mut(&(ptr as usize)).ok_or(CL_INVALID_VALUE)?;
            let m = list.pop().ok_or(CL_INVALID_VALUE)?;
            if list.is_empty() {
                all.remove(&(ptr as usize));
            }
            m
        };
        let mut c = Call::begin(func::clEnqueueUnmapMemObject)?;
        // What the server needs to follow the stream comes first.
        c.enc.u64(m.id);
        let write_back =
            !m.direct && m.flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0;
        c.enc.bool(write_back);
        c.enc.u64(m.len as u64);
        if write_back {
            // SAFETY: the mapping spans `m.len` bytes at `ptr` and stays
            // allocated until the call is finished.
            unsafe { c.attach_raw(ptr as *const u8, m.len) };
        }
        c.handle(q, Kind::Queue)?;
        c.handle(mem, Kind::Mem)?;
        c.enc.u32(n);
        // SAFETY: forwarded contract.
        unsafe { c.handles(wl, n as usize, Kind::Event)? };
        let n_ev = c.out_new(ev);
        let mut r = c.finish()?;
        let status = r.status();
        // SAFETY: forwarded contract.
        unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
        drop(r);
        if status == CL_SUCCESS {
            if let Some(layout) = m.owned {
                // SAFETY: allocated in `map_memory` with this layout; the
                // application gave the mapping back.
                unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
            }
        } else {
            maps().entry(ptr as usize).or_default().push(m);
        }
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}
