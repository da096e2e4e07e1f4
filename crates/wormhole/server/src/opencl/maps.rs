#![allow(non_snake_case)]
//! Maps and unmaps: the server maps blocking (or, for arena memory, lets the
//! client wait on the map's event), keeps a reference on the object for the
//! mapping's life, and streams the mapped bytes to the client after the reply.

use std::ffi::c_void;

use wormhole_opencl_api::{
    image_window, triple, Kind, CL_INVALID_MEM_OBJECT, CL_INVALID_VALUE,
    CL_MAP_WRITE_INVALIDATE_REGION, CL_SUCCESS,
};
use wormhole_wire::{Decoder, Encoder};

use super::bulk::Bulk;
use super::extents::image_box_ok;
use super::ffi;
use super::tenant::{bad, check_count, opt_vec_ptr, NewSlot, Tenant};
use super::{CL_INVALID_EVENT_WAIT_LIST, CL_TRUE};

/// A buffer or image region mapped for a client.
pub struct Mapping {
    mem: usize,
    pub(super) ptr: usize,
    pub(super) len: u64,
}

impl Mapping {
    /// The memory object mapped (the library's handle).
    pub fn mem(&self) -> usize {
        self.mem
    }
}

/// Unmaps whatever the client left mapped, through `queue` (the harness's
/// teardown; a tenant process just exits). Mappings of objects in another
/// context fail to unmap here and are forgotten.
///
/// # Safety
/// `queue` is a live command queue.
pub unsafe fn unmap_all(tenant: &mut Tenant, queue: *mut c_void) {
    for (_, mapping) in tenant.mappings.drain() {
        // SAFETY: `mapping.ptr` is the pointer the library returned when
        // mapping `mapping.mem`, which the mapping holds a reference on;
        // `queue` is live (this function's contract).
        unsafe {
            ffi::clEnqueueUnmapMemObject(
                queue,
                mapping.mem as *mut c_void,
                mapping.ptr as *mut c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            );
        }
        // SAFETY: the mapping's own reference, taken when it was made.
        unsafe { super::release_real(Kind::Mem, mapping.mem as *mut c_void) };
    }
    // SAFETY: `queue` is a live command queue (this function's contract:
    // the harness's own).
    unsafe { ffi::clFinish(queue) };
}

/// The tail every enqueue shares: the wait list's length and events, and
/// the slot for the command's event.
pub(super) fn wait_list_and_event(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
) -> Result<(u32, Option<Vec<*mut c_void>>, NewSlot), i32> {
    let num_events = request.u32().map_err(bad)?;
    let wait_list = tenant.handles(request, Kind::Event, CL_INVALID_EVENT_WAIT_LIST)?;
    check_count(
        wait_list.as_deref(),
        num_events as u64,
        CL_INVALID_EVENT_WAIT_LIST,
    )?;
    Ok((num_events, wait_list, tenant.out_new(request)?))
}

/// Records a mapping and arranges for its current contents to stream after
/// the reply, unless the application will overwrite them all
/// (WRITE_INVALIDATE_REGION) or the mapping lies in memory the client maps
/// too. The reply says whether they follow, how long the mapping is, and
/// where in the arena it lies (`u64::MAX`: not there).
fn publish_mapping(
    tenant: &mut Tenant,
    reply: &mut Encoder,
    tail: MapTail,
    mem: *mut c_void,
    ptr: *mut c_void,
    len: u64,
    flags: u64,
) {
    let MapTail {
        id,
        shared_ok,
        pending,
        ..
    } = tail;
    // The mapping holds a reference on the memory object, so that the
    // client releasing it cannot free the mapped memory, nor let a new
    // object reuse its address, while we may still write into it on unmap.
    super::retain_real(Kind::Mem, mem);
    tenant.mappings.insert(
        id,
        Mapping {
            mem: mem as usize,
            ptr: ptr as usize,
            len,
        },
    );
    // Memory the client maps too needs no bytes sent: it uses it directly.
    // A pending map's bytes are not there yet: the client fetches them.
    let direct = tenant
        .shared
        .as_ref()
        .filter(|_| shared_ok && !pending)
        .and_then(|sb| sb.arena().offset_of(ptr as *const u8, len as usize));
    let send = !pending && flags & CL_MAP_WRITE_INVALIDATE_REGION == 0 && direct.is_none();
    reply.bool(send);
    reply.u64(len);
    reply.u64(direct.unwrap_or(u64::MAX));
    if send {
        tenant.bulk = Some(Bulk::Send {
            ptr: ptr as usize,
            len: len as usize,
        });
    }
}

/// The end of a map request: the client's fresh id for the mapping,
/// whether the client maps the arena (else arena memory is sent as bytes),
/// whether a map of arena memory may complete later (the client then
/// learns when from the map's event, and the tenant does not block), and
/// whether any other map may too (`pending`: the client fetches its bytes
/// with `whFetchMapping` once the map's event completed; `pending_maps.rs`).
#[derive(Clone, Copy)]
struct MapTail {
    id: u64,
    shared_ok: bool,
    defer: bool,
    pending: bool,
}

/// Bits of a map request's last byte.
const MAP_SHARED_OK: u8 = 1;
const MAP_DEFER: u8 = 2;
const MAP_PENDING: u8 = 4;

fn map_tail(tenant: &Tenant, request: &mut Decoder<'_>) -> Result<MapTail, i32> {
    let id = request.u64().map_err(bad)?;
    if id == 0 || tenant.mappings.contains_key(&id) {
        return Err(CL_INVALID_VALUE);
    }
    let bits = request.u8().map_err(bad)?;
    if bits & !(MAP_SHARED_OK | MAP_DEFER | MAP_PENDING) != 0 {
        return Err(CL_INVALID_VALUE);
    }
    Ok(MapTail {
        id,
        shared_ok: bits & MAP_SHARED_OK != 0,
        defer: bits & MAP_DEFER != 0,
        pending: bits & MAP_PENDING != 0,
    })
}

/// Maps on the server, blocking, and sends the mapped bytes; the client
/// hands the application its own copy and writes it back on unmap.
/// Request: queue, buffer, flags, offset, size, wait list, event, map id,
/// whether the client maps the arena (else arena memory is sent as bytes).
pub fn d_clEnqueueMapBuffer(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
    reply: &mut Encoder,
) -> Result<i32, i32> {
    let queue = tenant.handle(request, Kind::Queue)?;
    let buf = tenant.handle(request, Kind::Mem)?;
    let flags = request.u64().map_err(bad)?;
    let offset = request.usize().map_err(bad)?;
    let size = request.usize().map_err(bad)?;
    let (num_events, wait_list, mut ev) = wait_list_and_event(tenant, request)?;
    let tail = map_tail(tenant, request)?;
    request.finish().map_err(bad)?;
    // A buffer in the arena may be mapped without waiting: the client sees
    // its memory and copies once the map's event says the data is there.
    let defer = tail.defer
        && tail.shared_ok
        && !ev.ptr().is_null()
        && tenant.shared.as_ref().is_some_and(|sb| sb.holds(buf));
    let tail = MapTail {
        pending: tail.pending && !defer && !ev.ptr().is_null(),
        ..tail
    };
    if !defer && !tail.pending {
        // Blocking on the server, a map gated on an open user event would
        // block the tenant for good.
        super::server_blocking(0, &wait_list)?;
    }
    let mut err = 0;
    // SAFETY: `queue` and `buf` are from the tenant's table (NULL refused);
    // the wait list holds `num_events` events from the table
    // (`wait_list_and_event` checked the count); `ev` is NULL or the
    // decoder's slot; `err` is ours. The library bounds offset + size by
    // the buffer.
    let ptr = unsafe {
        ffi::clEnqueueMapBuffer(
            queue,
            buf,
            if defer || tail.pending { 0 } else { CL_TRUE },
            flags,
            offset,
            size,
            num_events,
            opt_vec_ptr(&wait_list),
            ev.ptr(),
            &mut err,
        )
    };
    if defer && err == CL_SUCCESS {
        let in_arena = tenant
            .shared
            .as_ref()
            .is_some_and(|sb| sb.arena().offset_of(ptr as *const u8, size).is_some());
        if let (false, Some(map_event)) = (in_arena, ev.made()) {
            // A library that does not map USE_HOST_PTR memory in place:
            // the bytes must be there before they are sent.
            // SAFETY: the map's own event, just made.
            err = unsafe { ffi::clWaitForEvents(1, &map_event) };
        }
    }
    tenant.commit_new(&mut ev, Kind::Event, err);
    reply.u8(1);
    if err == CL_SUCCESS && !ptr.is_null() {
        publish_mapping(tenant, reply, tail, buf, ptr, size as u64, flags);
    } else {
        reply.bool(false);
        reply.u64(0);
        reply.u64(u64::MAX);
    }
    Ok(err)
}

/// Request: queue, image, flags, origin, region, wait list, event, map id,
/// whether the client maps the arena.
/// Reply adds the row and slice pitches.
pub fn d_clEnqueueMapImage(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
    reply: &mut Encoder,
) -> Result<i32, i32> {
    let queue = tenant.handle(request, Kind::Queue)?;
    let img = tenant.handle(request, Kind::Mem)?;
    let flags = request.u64().map_err(bad)?;
    let origin = request.bytes().map_err(bad)?;
    let region = request.bytes().map_err(bad)?;
    let (num_events, wait_list, mut ev) = wait_list_and_event(tenant, request)?;
    let tail = map_tail(tenant, request)?;
    request.finish().map_err(bad)?;
    let tail = MapTail {
        pending: tail.pending && !ev.ptr().is_null(),
        ..tail
    };
    if !tail.pending {
        // Gated on an open user event, a blocking map would block the
        // tenant for good.
        super::server_blocking(0, &wait_list)?;
    }
    let (o3, r3) = (
        triple(origin).ok_or(CL_INVALID_VALUE)?,
        triple(region).ok_or(CL_INVALID_VALUE)?,
    );
    let (o3, r3) = (o3.map(|x| x as usize), r3.map(|x| x as usize));
    // PoCL maps a box that does not fit the image (an empty one, say);
    // refused here, before the library holds a mapping (and a reference on
    // the image) that we could not describe to the client.
    // SAFETY: `img` is from the tenant's table; `o3` and `r3` are our own
    // arrays of 3 size_t each.
    unsafe { image_box_ok(img, o3.as_ptr().cast(), r3.as_ptr().cast()) }?;
    let (mut row, mut slice, mut err) = (0usize, 0usize, 0i32);
    // SAFETY: `queue` and `img` are from the tenant's table; `o3` and `r3`
    // are our arrays of 3 size_t, a box `image_box_ok` found inside the
    // image; the wait list holds `num_events` events from the table; the
    // other pointers are our locals or the decoder's event slot.
    let ptr = unsafe {
        ffi::clEnqueueMapImage(
            queue,
            img,
            if tail.pending { 0 } else { CL_TRUE },
            flags,
            o3.as_ptr().cast(),
            r3.as_ptr().cast(),
            &mut row,
            &mut slice,
            num_events,
            opt_vec_ptr(&wait_list),
            ev.ptr(),
            &mut err,
        )
    };
    tenant.commit_new(&mut ev, Kind::Event, err);
    reply.u8(1);
    reply.usize(row);
    reply.usize(slice);
    if err != CL_SUCCESS || ptr.is_null() {
        reply.bool(false);
        reply.u64(0);
        reply.u64(u64::MAX);
        return Ok(err);
    }
    let window = super::custom::image_shape(img).and_then(|(ty, elem)| {
        image_window(ty, r3.map(|x| x as u64), elem, row as u64, slice as u64)
    });
    let Some(window) = window else {
        // Mapped, but not in a shape we can hand over: give it back.
        // SAFETY: the library's live mapping of `img`, made just now.
        unsafe {
            ffi::clEnqueueUnmapMemObject(
                queue,
                img,
                ptr,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            );
            if !tail.pending {
                ffi::clFinish(queue);
            }
        }
        reply.bool(false);
        reply.u64(0);
        reply.u64(u64::MAX);
        return Ok(CL_INVALID_VALUE);
    };
    // The bytes between the mapped rows are other pixels, which the
    // client's unmap writes back as they came: they are sent even for a map
    // that will overwrite the rows.
    let sent_flags = flags & !CL_MAP_WRITE_INVALIDATE_REGION;
    publish_mapping(tenant, reply, tail, img, ptr, window.extent, sent_flags);
    Ok(err)
}

/// Request: map id, whether written-back bytes follow and how many, queue,
/// mem, wait list, event; the bytes stream after the frame, straight into
/// the mapping, and the unmap runs once they are in (`finish_bulk_in`).
pub fn d_clEnqueueUnmapMemObject(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
    reply: &mut Encoder,
) -> Result<i32, i32> {
    let (id, has_data, len) = match (request.u64(), request.bool(), request.u64()) {
        (Ok(id), Ok(has), Ok(len)) => (id, has, len),
        _ => {
            // Without these the stream cannot be followed any further.
            tenant.broken = true;
            return Err(CL_INVALID_VALUE);
        }
    };
    if has_data {
        tenant.bulk = Some(Bulk::Drain(len));
    }
    let queue = tenant.handle(request, Kind::Queue)?;
    let mem = tenant.handle(request, Kind::Mem)?;
    let (num_events, wait_list, ev) = wait_list_and_event(tenant, request)?;
    request.finish().map_err(bad)?;
    if mem.is_null() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    let mapping = match tenant.mappings.get(&id) {
        Some(mapping) if mapping.mem == mem as usize => mapping,
        _ => return Err(CL_INVALID_VALUE),
    };
    if len > mapping.len {
        return Err(CL_INVALID_VALUE);
    }
    let ptr = mapping.ptr;
    reply.u8(1);
    let unmap = Unmap {
        queue: queue as usize,
        mem: mem as usize,
        ptr,
        num_events,
        wait: wait_list,
        event: ev,
        mapping: Some(id),
    };
    if has_data {
        tenant.bulk = Some(Bulk::In {
            len: len as usize,
            then: unmap,
        });
        // The status is the unmap's, known once the data is in.
        Ok(CL_SUCCESS)
    } else {
        Ok(unmap.run(tenant))
    }
}

/// An unmap to run once a bulk transfer is through.
pub struct Unmap {
    pub(super) queue: usize,
    pub(super) mem: usize,
    pub(super) ptr: usize,
    pub(super) num_events: u32,
    pub(super) wait: Option<Vec<*mut c_void>>,
    pub(super) event: NewSlot,
    /// The client's mapping, forgotten when the unmap succeeds.
    pub(super) mapping: Option<u64>,
}

impl Unmap {
    pub(super) fn run(mut self, tenant: &mut Tenant) -> i32 {
        // SAFETY: `ptr` is the library's live mapping of `mem` (the
        // tenant's mapping of that object, or the one `map_for` just made);
        // the wait list holds `num_events` events from the table.
        let status = unsafe {
            ffi::clEnqueueUnmapMemObject(
                self.queue as *mut c_void,
                self.mem as *mut c_void,
                self.ptr as *mut c_void,
                self.num_events,
                opt_vec_ptr(&self.wait),
                self.event.ptr(),
            )
        };
        tenant.commit_new(&mut self.event, Kind::Event, status);
        if let (Some(id), CL_SUCCESS) = (self.mapping, status) {
            if let Some(mapping) = tenant.mappings.remove(&id) {
                // SAFETY: the mapping's own reference, taken when it was made.
                unsafe { super::release_real(Kind::Mem, mapping.mem as *mut c_void) };
            }
        }
        status
    }
}
