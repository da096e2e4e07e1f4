//! Maps: the application's mappings of buffers and images (its own copy,
//! the buffer's memory in the arena, or its USE_HOST_PTR memory), and their
//! unmaps. A non-blocking map while a user event is open completes later
//! ([`map_pending`]): the server maps without waiting, the application gets
//! its pointer at once, and the bytes are fetched once the map ran.
#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

use wormhole_opencl_api::{
    func, Kind, CL_INVALID_VALUE, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION,
    CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES, CL_SUCCESS,
};
use wormhole_transport::copy::copy_bulk;

use crate::connection::{fresh_id, set_errcode, Call, Reply};
use crate::host_images::{self, Reshape};
use crate::objects::obj;
use crate::overrides::settle_for;
use crate::waits;

const CL_COMMAND_MAP_BUFFER: u32 = 0x11FB;
const CL_COMMAND_MAP_IMAGE: u32 = 0x11FC;

/// Memory allocated here for a mapping, freed when its last holder (the
/// mapping, and a map completing later that fills it) lets it go.
pub(crate) struct Block {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: plain heap memory owned by the block; who writes it when is the
// map protocol's business (the fill before the application may look, the
// application after), as for any mapping.
unsafe impl Send for Block {}
// SAFETY: a shared `&Block` exposes only `ptr` and `layout`, both fixed after `new`; the heap bytes
// behind `ptr` pass between threads under the map protocol, as for Send.
unsafe impl Sync for Block {}

impl Block {
    fn new(len: usize) -> Result<Arc<Block>, i32> {
        let layout =
            std::alloc::Layout::from_size_align(len.max(1), 128).map_err(|_| CL_INVALID_VALUE)?;
        // SAFETY: a non-zero-sized layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(CL_OUT_OF_HOST_MEMORY);
        }
        Ok(Arc::new(Block { ptr, layout }))
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

/// One mapping handed to the application.
struct Mapped {
    id: u64,
    len: usize,
    flags: u64,
    /// Allocated here, or `None`: the application's host memory (or the
    /// arena).
    owned: Option<Arc<Block>>,
    /// The buffer's own storage, in memory shared with the server: nothing
    /// to write back.
    direct: bool,
    /// A USE_HOST_PTR image's mapping: how the server's bytes lie in the
    /// application's memory, and the server's bytes as they came (the
    /// bytes between the mapped rows go back unchanged).
    image: Option<(Reshape, Vec<u8>)>,
    /// A map completing later whose bytes are not here yet: an unmap now
    /// writes nothing back (the application has not seen the mapping).
    pending: bool,
}

fn maps() -> std::sync::MutexGuard<'static, HashMap<usize, Vec<Mapped>>> {
    static M: OnceLock<Mutex<HashMap<usize, Vec<Mapped>>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Where the application's mapping is.
#[derive(Clone, Copy)]
enum Dest {
    /// Memory allocated for it here (or the arena, when the server maps
    /// there).
    Fresh,
    /// The application's USE_HOST_PTR buffer, at the map's offset.
    Host(*mut u8),
    /// The application's USE_HOST_PTR image, at the origin's offset.
    Image(*mut u8, Reshape),
}

impl Dest {
    /// The mapping's memory here, and the block that holds it if it was
    /// allocated for it.
    fn place(self, len: usize) -> Result<(*mut u8, Option<Arc<Block>>), i32> {
        match self {
            Dest::Fresh => {
                let b = Block::new(len)?;
                Ok((b.ptr, Some(b)))
            }
            Dest::Host(p) | Dest::Image(p, _) => Ok((p, None)),
        }
    }

    fn reshape(self) -> Option<Reshape> {
        match self {
            Dest::Image(_, r) => Some(r),
            _ => None,
        }
    }
}

/// What a successful map's reply says: whether the mapped bytes follow,
/// how long the mapping is, and where it lies in the arena, if there.
struct MapReply {
    raw: bool,
    len: usize,
    shared: Option<*mut u8>,
}

fn read_map_reply(r: &mut Reply<'_>) -> Result<MapReply, i32> {
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
            crate::connection::arena()
                .and_then(|a| a.ptr_at(at, len))
                .ok_or(CL_OUT_OF_RESOURCES)?,
        ),
    };
    Ok(MapReply { raw, len, shared })
}

/// Whether a buffer mapping's length from the server (`got`) is the size the
/// application asked to map: the client copies that size through the
/// mapping, and writes the mapped bytes into USE_HOST_PTR memory sized by it.
fn mapping_fits(requested: usize, got: usize) -> bool {
    got == requested
}

/// Reads a map's reply and makes the application's mapping: the arena
/// itself, or `dest` with the mapped bytes received (or copied from the
/// arena) into it. `want`: a buffer map's size, which the reply's length
/// must match (a broken reply fails the map); images lay the server's bytes
/// out through their own copy, bounded by its length.
fn finish_map(
    r: &mut Reply<'_>,
    dest: Dest,
    id: u64,
    flags: u64,
    want: Option<usize>,
) -> Result<*mut c_void, i32> {
    let MapReply { raw, len, shared } = read_map_reply(r)?;
    if want.is_some_and(|w| !mapping_fits(w, len)) {
        return Err(CL_OUT_OF_RESOURCES);
    }
    if let (Some(sp), Dest::Fresh) = (shared, dest) {
        remember(sp, Mapped::new(id, len, flags, None, true));
        return Ok(sp.cast());
    }
    let (p, owned) = dest.place(len)?;
    let mut m = Mapped::new(id, len, flags, owned, false);
    // The bytes as the server laid them out: straight into the mapping,
    // unless the application's rows are laid out otherwise.
    let mut server_bytes = match dest.reshape() {
        Some(_) => vec![0u8; len],
        None => Vec::new(),
    };
    let into = if server_bytes.is_empty() {
        p
    } else {
        server_bytes.as_mut_ptr()
    };
    if let Some(sp) = shared {
        // SAFETY: both span `len` bytes (checked against the arena; the
        // application's memory from the offset, as the API promises, or
        // ours).
        unsafe { copy_bulk(into, sp, len) };
    } else if raw {
        // SAFETY: `into` spans `len` bytes: `server_bytes` (allocated with `len`), a block `place`
        // allocated with `len`, or the application's USE_HOST_PTR buffer memory from the map's
        // offset, valid for the mapped size by clCreateBuffer's contract (`len` equals that size,
        // checked above; images never map straight into host memory); recv_raw writes only the
        // slice.
        r.recv_raw(unsafe { std::slice::from_raw_parts_mut(into, len) })?;
    }
    if let Some(rs) = dest.reshape() {
        // SAFETY: `p` holds the host window (the application's image).
        unsafe { rs.scatter(&server_bytes, p) };
        m.image = Some((rs, server_bytes));
    }
    remember(p, m);
    Ok(p.cast())
}

impl Mapped {
    fn new(id: u64, len: usize, flags: u64, owned: Option<Arc<Block>>, direct: bool) -> Mapped {
        Mapped {
            id,
            len,
            flags,
            owned,
            direct,
            image: None,
            pending: false,
        }
    }
}

fn remember(p: *mut u8, m: Mapped) {
    maps().entry(p as usize).or_default().push(m);
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
    let r = if blocking == 0 && waits::user_events_open() {
        // It may wait for a user event that this very thread sets after we
        // return: it completes later, as natively.
        // SAFETY: `wl` holds `n` events and `ev` is NULL or a writable cl_event slot by
        // clEnqueueMapBuffer's contract, which is map_buffer_later's.
        unsafe { map_buffer_later(q, buf, flags, offset, size, n, wl, ev) }
    } else {
        // SAFETY: `wl` holds `n` events by clEnqueueMapBuffer's contract on event_wait_list.
        unsafe { settle_for(blocking, q, n, wl) }.and_then(|()| {
            // SAFETY: `wl` holds `n` events and `ev` is NULL or a writable cl_event slot by
            // clEnqueueMapBuffer's contract, which is map_buffer's.
            unsafe { map_buffer(q, buf, flags, offset, size, n, wl, ev, false) }
        })
    };
    let (v, e) = match r {
        Ok(v) => (v, CL_SUCCESS),
        Err(e) => (std::ptr::null_mut(), e),
    };
    // SAFETY: `err` is NULL or a writable cl_int by clEnqueueMapBuffer's contract on errcode_ret.
    unsafe { set_errcode(err, e) };
    v
}

/// The last byte of a map request: whether we map the arena, whether the
/// server may answer before a map of arena memory is done (`defer`: we
/// then read the bytes once the map's event completes), and whether it
/// may for any map (`pending`: we fetch the bytes then, [`map_pending`]).
fn map_tail_bits(defer: bool, pending: bool) -> u8 {
    u8::from(crate::connection::arena().is_some())
        | if defer { 2 } else { 0 }
        | if pending { 4 } else { 0 }
}

/// What every map request ends with: the wait list, the event slot, a
/// fresh id for the mapping and its [`map_tail_bits`]. Returns the event's
/// id (if asked for) and the mapping's.
///
/// # Safety
/// `wl` holds `n` events.
unsafe fn map_request_tail(
    c: &mut Call<'_>,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    bits: u8,
) -> Result<(Option<u64>, u64), i32> {
    c.enc.u32(n);
    // SAFETY: `wl` holds `n` events (this fn's contract), which Call::handles reads.
    unsafe { c.handles(wl, n as usize, Kind::Event)? };
    let n_ev = c.out_new(ev);
    let id = fresh_id();
    c.enc.u64(id);
    c.enc.u8(bits);
    Ok((n_ev, id))
}

/// A buffer's USE_HOST_PTR memory (0: none).
fn host_ptr_of(mem: *mut c_void) -> Result<usize, i32> {
    Ok(obj(mem, Kind::Mem)?.map_or(0, |o| o.host_ptr.load(Ordering::Relaxed)))
}

/// Starts a buffer map request.
fn buffer_map_call(
    q: *mut c_void,
    buf: *mut c_void,
    flags: u64,
    offset: usize,
    size: usize,
) -> Result<Call<'static>, i32> {
    let mut c = Call::begin(func::clEnqueueMapBuffer)?;
    c.handle(q, Kind::Queue)?;
    c.handle(buf, Kind::Mem)?;
    c.enc.u64(flags);
    c.enc.usize(offset);
    c.enc.usize(size);
    Ok(c)
}

/// A buffer map; see [`map_tail_bits`] for `defer`. On success the mapping
/// is non-NULL and spans `size` bytes (a reply saying otherwise fails the
/// map with `CL_OUT_OF_RESOURCES`).
///
/// # Safety
/// `wl` holds `n` events; `ev` is NULL or a writable cl_event slot.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn map_buffer(
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
    let mut c = buffer_map_call(q, buf, flags, offset, size)?;
    // SAFETY: `wl` holds `n` events (this fn's contract).
    let (n_ev, id) = unsafe { map_request_tail(&mut c, n, wl, ev, map_tail_bits(defer, false)) }?;
    let host = host_ptr_of(buf)?;
    let mut r = c.finish()?;
    let status = r.status();
    let p = if r.has_outputs() && status == CL_SUCCESS {
        let dest = match host {
            0 => Dest::Fresh,
            h => Dest::Host((h + offset) as *mut u8),
        };
        finish_map(&mut r, dest, id, flags, Some(size))?
    } else {
        std::ptr::null_mut()
    };
    // A success without a mapping is a broken reply: no event, no mapping.
    let status = match (status, p.is_null()) {
        (CL_SUCCESS, true) => CL_OUT_OF_RESOURCES,
        _ => status,
    };
    // SAFETY: `ev` is NULL or a writable cl_event slot (this fn's contract).
    unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
    if status != CL_SUCCESS {
        return Err(status);
    }
    Ok(p)
}

/// A map request sent without waiting for the map: its answer, the map's
/// event (ours) and the mapping's id.
struct Sent {
    reply: MapReply,
    cmd: *mut c_void,
    id: u64,
    /// For images: the server's row and slice pitches.
    pitches: (usize, usize),
}

/// Sends a map request `c` (all but its tail) that the server runs without
/// waiting (`defer`: into the arena if it can); `image` says whether the
/// reply starts with pitches.
///
/// # Safety
/// `wl` holds `n` events.
unsafe fn send_later(
    mut c: Call<'static>,
    n: u32,
    wl: *const *mut c_void,
    defer: bool,
    image: bool,
) -> Result<Sent, i32> {
    let mut cmd = std::ptr::null_mut();
    // SAFETY: `wl` holds `n` events (this fn's contract); `cmd` is our local slot, writable.
    let (n_ev, id) =
        unsafe { map_request_tail(&mut c, n, wl, &mut cmd, map_tail_bits(defer, true)) }?;
    let mut r = c.finish()?;
    let status = r.status();
    let mut pitches = (0usize, 0usize);
    let mut reply = None;
    if r.has_outputs() {
        if image {
            // SAFETY: local out-values.
            unsafe {
                r.out_usize(&mut pitches.0)?;
                r.out_usize(&mut pitches.1)?;
            }
        }
        if status == CL_SUCCESS {
            reply = Some(read_map_reply(&mut r)?);
        }
    }
    // SAFETY: our slot.
    unsafe { r.out_new(n_ev, &mut cmd, Kind::Event, status) };
    drop(r);
    if status != CL_SUCCESS {
        return Err(status);
    }
    match (reply, cmd.is_null()) {
        (Some(reply), false) => Ok(Sent {
            reply,
            cmd,
            id,
            pitches,
        }),
        _ => Err(CL_OUT_OF_RESOURCES),
    }
}

/// A non-blocking buffer map while a user event is open. What the library
/// refuses when the map is enqueued, it refuses now (the server enqueues
/// the map as asked). A buffer in the arena is the mapping itself, and the
/// map's own event says when its bytes are there; any other mapping
/// completes later ([`map_pending`]).
///
/// # Safety
/// As for `clEnqueueMapBuffer`.
#[allow(clippy::too_many_arguments)]
unsafe fn map_buffer_later(
    q: *mut c_void,
    buf: *mut c_void,
    flags: u64,
    offset: usize,
    size: usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> Result<*mut c_void, i32> {
    let host = host_ptr_of(buf)?;
    let c = buffer_map_call(q, buf, flags, offset, size)?;
    // SAFETY: `wl` holds `n` events by clEnqueueMapBuffer's contract (this fn's).
    let sent = unsafe { send_later(c, n, wl, host == 0, false) }?;
    if !mapping_fits(size, sent.reply.len) {
        // A broken reply: no mapping for the application.
        // SAFETY: our event for the map, never handed out.
        unsafe { crate::gen::clReleaseEvent(sent.cmd) };
        return Err(CL_OUT_OF_RESOURCES);
    }
    if let Some(sp) = sent.reply.shared {
        remember(sp, Mapped::new(sent.id, sent.reply.len, flags, None, true));
        // SAFETY: our event, handed over or let go.
        unsafe { give_event(sent.cmd, ev) };
        return Ok(sp.cast());
    }
    let dest = match host {
        0 => Dest::Fresh,
        h => Dest::Host((h + offset) as *mut u8),
    };
    // SAFETY: `ev` is NULL or writable by clEnqueueMapBuffer's contract; `sent.cmd` is the map's
    // event send_later just returned, ours; `dest` is our fresh block or the buffer's USE_HOST_PTR
    // memory from `offset` (the server accepted the map, so the range lies within the buffer, whose
    // host memory clCreateBuffer's contract keeps valid).
    unsafe { map_pending(q, buf, sent, flags, dest, ev, CL_COMMAND_MAP_BUFFER) }
}

/// Hands the application our event `e` (or lets it go if it asked for
/// none).
///
/// # Safety
/// `e` is an event of ours; `ev` is NULL or an out-slot.
unsafe fn give_event(e: *mut c_void, ev: *mut *mut c_void) {
    if ev.is_null() {
        // SAFETY: our own reference.
        unsafe { crate::gen::clReleaseEvent(e) };
    } else {
        // SAFETY: `ev` is non-NULL here and a writable cl_event slot by the enqueue's contract
        // (this fn's).
        unsafe { *ev = e };
    }
}

/// The bytes of a map completing later, fetched once the map ran.
pub(crate) struct Fill {
    id: u64,
    at: usize,
    len: usize,
    /// Whether the bytes are wanted (a buffer mapped to be overwritten
    /// whole needs none; an image's mapping always does, see
    /// [`Mapped::image`]).
    wanted: bool,
    reshape: Option<Reshape>,
    /// Keeps memory allocated here alive while it is filled.
    _owned: Option<Arc<Block>>,
}

impl Fill {
    /// Fetches the mapped bytes into the application's mapping (after the
    /// map's command completed), and lets an unmap write them back from
    /// then on. A mapping the application already gave back needs nothing.
    pub(crate) fn run(self) -> i32 {
        let mut server_bytes = Vec::new();
        if self.wanted {
            if self.reshape.is_some() {
                server_bytes = vec![0u8; self.len];
            }
            let into = if self.reshape.is_some() {
                server_bytes.as_mut_ptr()
            } else {
                self.at as *mut u8
            };
            // SAFETY: `into` spans `len` bytes: ours, or the mapping (held by
            // `_owned`, or the application's memory, which the API keeps
            // valid while the object lives; the map's reference keeps it).
            let s = fetch(self.id, unsafe {
                std::slice::from_raw_parts_mut(into, self.len)
            });
            match s {
                Ok(true) => {}
                // Unmapped before the map ran: nothing to fill.
                Ok(false) => return CL_SUCCESS,
                Err(e) => return e,
            }
            if let Some(rs) = self.reshape {
                // SAFETY: `at` holds the host window (the application's image).
                unsafe { rs.scatter(&server_bytes, self.at as *mut u8) };
            }
        }
        let mut all = maps();
        if let Some(m) = all
            .get_mut(&self.at)
            .and_then(|l| l.iter_mut().find(|m| m.id == self.id))
        {
            m.pending = false;
            if let (Some((_, keep)), true) = (m.image.as_mut(), self.wanted) {
                *keep = server_bytes;
            }
        }
        CL_SUCCESS
    }
}

/// Asks the server for mapping `id`'s bytes, into `into`; `Ok(false)`: it
/// has no such mapping any more (the application unmapped it first).
fn fetch(id: u64, into: &mut [u8]) -> Result<bool, i32> {
    let mut c = Call::begin(func::whFetchMapping)?;
    c.enc.u64(id);
    let mut r = c.finish()?;
    if r.has_outputs() && r.opt_flag()? {
        r.recv_raw(into)?;
        return Ok(true);
    }
    match r.status() {
        CL_INVALID_VALUE => Ok(false),
        CL_SUCCESS => Err(CL_OUT_OF_RESOURCES),
        e => Err(e),
    }
}

/// The application's mapping of a map the server enqueued without waiting
/// (`sent`), returned now; its bytes are fetched into it when the map's
/// command completes, and the event the application gets (a barrier
/// standing for the map, `later.rs`) completes only after that.
///
/// # Safety
/// As for `clEnqueueMapBuffer`; `sent.cmd` is our event for the map.
unsafe fn map_pending(
    q: *mut c_void,
    mem: *mut c_void,
    sent: Sent,
    flags: u64,
    dest: Dest,
    ev: *mut *mut c_void,
    stands_for: u32,
) -> Result<*mut c_void, i32> {
    let len = sent.reply.len;
    let mut m = Mapped::new(sent.id, len, flags, None, false);
    m.pending = true;
    let (p, owned) = match dest.place(len) {
        Ok(v) => v,
        Err(e) => {
            // SAFETY: our event and the server's mapping, given back.
            unsafe {
                crate::gen::clReleaseEvent(sent.cmd);
                let _ = send_unmap(
                    q,
                    mem,
                    std::ptr::null_mut(),
                    &mut m,
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
            }
            return Err(e);
        }
    };
    m.owned = owned.clone();
    if let Some(rs) = dest.reshape() {
        m.image = Some((rs, Vec::new()));
    }
    remember(p, m);
    let fill = Fill {
        id: sent.id,
        at: p as usize,
        len,
        // An image's bytes between the mapped rows go back as they came,
        // so they are wanted whatever the flags.
        wanted: stands_for == CL_COMMAND_MAP_IMAGE || flags & CL_MAP_WRITE_INVALIDATE_REGION == 0,
        reshape: dest.reshape(),
        _owned: owned,
    };
    // SAFETY: `ev` is NULL or the application's writable slot by clEnqueueMapBuffer/MapImage's
    // contract (this fn's); `sent.cmd` is our event for the map, whose reference map_later takes.
    let s = unsafe { crate::later::map_later(q, sent.cmd, fill, ev, stands_for) };
    if s != CL_SUCCESS {
        // Nothing will fill it: give the mapping back.
        // SAFETY: our own mapping, just made, pending (nothing written back).
        unsafe {
            clEnqueueUnmapMemObject(q, mem, p.cast(), 0, std::ptr::null(), std::ptr::null_mut())
        };
        return Err(s);
    }
    Ok(p.cast())
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
        // SAFETY: 3 size_t each (checked non-NULL above).
        let (o3, r3) = unsafe {
            (
                (origin as *const [u64; 3]).read_unaligned(),
                (region as *const [u64; 3]).read_unaligned(),
            )
        };
        let later = blocking == 0 && waits::user_events_open();
        if !later {
            // SAFETY: `wl` holds `n` events by clEnqueueMapImage's contract on event_wait_list.
            unsafe { settle_for(blocking, q, n, wl) }?;
        }
        // Asked now: the map's reply holds the channel.
        let host = host_images::layout(image)?;
        let mut c = Call::begin(func::clEnqueueMapImage)?;
        c.handle(q, Kind::Queue)?;
        c.handle(image, Kind::Mem)?;
        c.enc.u64(flags);
        c.enc.bytes(&bytes_of(o3));
        c.enc.bytes(&bytes_of(r3));
        let (p, (row, slice)) = if later {
            // SAFETY: `wl` holds `n` events by clEnqueueMapImage's contract.
            let sent = unsafe { send_later(c, n, wl, false, true) }?;
            let (row, slice) = sent.pitches;
            let (dest, pitches) = match host.map(|h| h.mapping(o3, r3, row, slice)) {
                Some(Ok(h)) => (Dest::Image(h.at, h.reshape), (h.row_pitch, h.slice_pitch)),
                None => (Dest::Fresh, (row, slice)),
                Some(Err(_)) => {
                    // Not a layout we can lay the bytes into: the
                    // application gets a copy, as for other images.
                    (Dest::Fresh, (row, slice))
                }
            };
            // SAFETY: `ev` is NULL or writable by clEnqueueMapImage's contract; `sent.cmd` is our
            // event for the map; `dest` is our fresh block or the window HostLayout::mapping placed
            // in the image's USE_HOST_PTR memory, for an origin/region the server accepted
            // (send_later fails otherwise).
            let p = unsafe { map_pending(q, image, sent, flags, dest, ev, CL_COMMAND_MAP_IMAGE) }?;
            (p, pitches)
        } else {
            // SAFETY: `wl` holds `n` events and `ev` is NULL or a writable slot by
            // clEnqueueMapImage's contract.
            unsafe { map_image_now(c, host, (o3, r3), flags, n, wl, ev) }?
        };
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
    // SAFETY: `err` is NULL or a writable cl_int by clEnqueueMapImage's contract on errcode_ret.
    unsafe { set_errcode(err, e) };
    v
}

fn bytes_of(v: [u64; 3]) -> [u8; 24] {
    let mut b = [0u8; 24];
    for (i, x) in v.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&x.to_ne_bytes());
    }
    b
}

/// An image map the server runs before it answers; the mapping and the
/// pitches the application sees (its own for a USE_HOST_PTR image).
///
/// # Safety
/// As for `clEnqueueMapImage`: `wl` holds `n` events.
unsafe fn map_image_now(
    mut c: Call<'static>,
    host: Option<host_images::HostLayout>,
    (origin, region): ([u64; 3], [u64; 3]),
    flags: u64,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> Result<(*mut c_void, (usize, usize)), i32> {
    // SAFETY: `wl` holds `n` events (this fn's contract, clEnqueueMapImage's).
    let (n_ev, id) = unsafe { map_request_tail(&mut c, n, wl, ev, map_tail_bits(false, false)) }?;
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
            let (dest, pitches) = match host.map(|h| h.mapping(origin, region, row, slice)) {
                Some(Ok(h)) => (Dest::Image(h.at, h.reshape), (h.row_pitch, h.slice_pitch)),
                _ => (Dest::Fresh, (row, slice)),
            };
            p = finish_map(&mut r, dest, id, flags, None)?;
            (row, slice) = pitches;
        }
    }
    // SAFETY: `ev` is NULL or a writable cl_event slot by clEnqueueMapImage's contract.
    unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
    if status != CL_SUCCESS {
        return Err(status);
    }
    Ok((p, (row, slice)))
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
        let mut m = {
            let mut all = maps();
            let list = all.get_mut(&(ptr as usize)).ok_or(CL_INVALID_VALUE)?;
            let m = list.pop().ok_or(CL_INVALID_VALUE)?;
            if list.is_empty() {
                all.remove(&(ptr as usize));
            }
            m
        };
        // SAFETY: `wl` holds `n` events and `ev` is NULL or writable by clEnqueueUnmapMemObject's
        // contract; `m` was registered at `ptr` by the map that made it, so `ptr` is `m`'s memory
        // (non-NULL: a key of the table).
        let status = unsafe { send_unmap(q, mem, ptr, &mut m, n, wl, ev) }?;
        if status != CL_SUCCESS {
            maps().entry(ptr as usize).or_default().push(m);
        }
        // Else the mapping's memory goes with `m` (unless a fill still
        // holds it).
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}

/// Gives mapping `m` (at `ptr`) back to the server, with the bytes the
/// application wrote into it.
///
/// # Safety
/// As for `clEnqueueUnmapMemObject`; `ptr` is `m`'s memory (NULL only for
/// a pending mapping, which writes nothing back).
unsafe fn send_unmap(
    q: *mut c_void,
    mem: *mut c_void,
    ptr: *mut c_void,
    m: &mut Mapped,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> Result<i32, i32> {
    let mut c = Call::begin(func::clEnqueueUnmapMemObject)?;
    // What the server needs to follow the stream comes first.
    c.enc.u64(m.id);
    let write_back =
        !m.direct && !m.pending && m.flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0;
    c.enc.bool(write_back);
    c.enc.u64(m.len as u64);
    if write_back {
        let from = match m.image.as_mut() {
            Some((rs, server_bytes)) if server_bytes.len() == m.len => {
                // SAFETY: `ptr` holds the host window (the application's
                // image, mapped).
                unsafe { rs.gather(ptr as *const u8, server_bytes) };
                server_bytes.as_ptr()
            }
            _ => ptr as *const u8,
        };
        // SAFETY: `from` spans `m.len` bytes (the mapping, or the server's
        // layout of it, held in `m`) until the call is finished.
        unsafe { c.attach_raw(from, m.len) };
    }
    c.handle(q, Kind::Queue)?;
    c.handle(mem, Kind::Mem)?;
    c.enc.u32(n);
    // SAFETY: `wl` holds `n` events by clEnqueueUnmapMemObject's contract (this fn's; NULL with 0
    // from map_pending).
    unsafe { c.handles(wl, n as usize, Kind::Event)? };
    let n_ev = c.out_new(ev);
    let mut r = c.finish()?;
    let status = r.status();
    // SAFETY: `ev` is NULL or a writable cl_event slot by clEnqueueUnmapMemObject's contract (this
    // fn's).
    unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::mapping_fits;

    #[test]
    fn a_mapping_must_be_the_size_asked_for() {
        assert!(mapping_fits(4096, 4096));
        assert!(!mapping_fits(4096, 4095));
        assert!(!mapping_fits(4096, 4097));
        assert!(!mapping_fits(4096, 0));
    }
}
