#![allow(non_snake_case)]
//! Bulk transfers: large reads and writes, and mapped bytes, that stream
//! on the channel around the reply instead of inside a frame. The serve
//! loop completes them (`finish_bulk_in`, `finish_bulk_out`).

use std::ffi::c_void;

use wormhole_opencl_api::{Kind, CL_INVALID_VALUE, CL_MAP_WRITE_INVALIDATE_REGION, CL_SUCCESS};
use wormhole_transport::{Channel, TransportError};
use wormhole_wire::{Decoder, Encoder};

use super::ffi;
use super::maps::{wait_list_and_event, Unmap};
use super::tenant::{bad, opt_vec_ptr, NewSlot, Tenant};
use super::CL_TRUE;

/// A bulk transfer the serve loop completes around the reply.
pub enum Bulk {
    /// Discard this many incoming bytes (the request failed validation).
    Drain(u64),
    /// Receive `len` bytes into the mapping `then` names, then unmap it.
    In { len: usize, then: Unmap },
    /// Send a mapped region after the reply, then unmap it.
    Out { len: usize, then: Unmap },
    /// Send a mapped region after the reply; it stays mapped.
    Send { ptr: usize, len: usize },
}

struct BulkArgs {
    size: usize,
    queue: *mut c_void,
    mem: *mut c_void,
    offset: usize,
    wait: Option<Vec<*mut c_void>>,
    num_events: u32,
    event: NewSlot,
}

/// Decodes a bulk request. The size comes first so that, once it is known,
/// the incoming bytes can always be drained, whatever else is wrong.
fn bulk_args(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
    incoming: bool,
) -> Result<BulkArgs, i32> {
    let size = match request.usize() {
        Ok(size) => size,
        Err(_) => {
            // Without the size the stream cannot be followed any further.
            tenant.broken = true;
            return Err(CL_INVALID_VALUE);
        }
    };
    if incoming {
        tenant.bulk = Some(Bulk::Drain(size as u64));
    }
    let queue = tenant.handle(request, Kind::Queue)?;
    let mem = tenant.handle(request, Kind::Mem)?;
    let offset = request.usize().map_err(bad)?;
    let (num_events, wait, event) = wait_list_and_event(tenant, request)?;
    request.finish().map_err(bad)?;
    Ok(BulkArgs {
        size,
        queue,
        mem,
        offset,
        wait,
        num_events,
        event,
    })
}

impl BulkArgs {
    /// The unmap that ends the transfer and yields the command's event.
    fn unmap(self, ptr: *mut c_void) -> Unmap {
        Unmap {
            queue: self.queue as usize,
            mem: self.mem as usize,
            ptr: ptr as usize,
            num_events: 0,
            wait: None,
            event: self.event,
            mapping: None,
        }
    }
}

fn map_for(args: &BulkArgs, flags: u64) -> Result<*mut c_void, i32> {
    let mut err = 0;
    // SAFETY: `queue` and `mem` are from the tenant's table; the wait list
    // holds `num_events` events from the table (`wait_list_and_event`);
    // the library bounds offset + size by the buffer. A blocking map
    // returns memory valid until the unmap.
    let mapped = unsafe {
        ffi::clEnqueueMapBuffer(
            args.queue,
            args.mem,
            CL_TRUE,
            flags,
            args.offset,
            args.size,
            args.num_events,
            opt_vec_ptr(&args.wait),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    if err != CL_SUCCESS {
        return Err(err);
    }
    if mapped.is_null() {
        return Err(wormhole_opencl_api::CL_OUT_OF_RESOURCES);
    }
    Ok(mapped)
}

/// Request: size, queue, buffer, offset, wait list, event; `size` bytes follow.
pub fn d_whEnqueueWriteBufferBulk(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
    reply: &mut Encoder,
) -> Result<i32, i32> {
    let args = bulk_args(tenant, request, true)?;
    let ptr = map_for(&args, CL_MAP_WRITE_INVALIDATE_REGION)?;
    let len = args.size;
    tenant.bulk = Some(Bulk::In {
        len,
        then: args.unmap(ptr),
    });
    reply.u8(1);
    Ok(CL_SUCCESS)
}

/// Request: size, queue, buffer, offset, wait list, event. Reply: whether
/// `size` bytes follow it.
pub fn d_whEnqueueReadBufferBulk(
    tenant: &mut Tenant,
    request: &mut Decoder<'_>,
    reply: &mut Encoder,
) -> Result<i32, i32> {
    let args = bulk_args(tenant, request, false)?;
    reply.u8(1);
    match map_for(&args, wormhole_opencl_api::CL_MAP_READ) {
        Ok(ptr) => {
            reply.bool(true);
            let len = args.size;
            tenant.bulk = Some(Bulk::Out {
                len,
                then: args.unmap(ptr),
            });
            Ok(CL_SUCCESS)
        }
        Err(status) => {
            reply.bool(false);
            Ok(status)
        }
    }
}

/// Completes an incoming bulk transfer (before the reply); returns the
/// call's final status.
pub fn finish_bulk_in(
    tenant: &mut Tenant,
    chan: &mut dyn Channel,
    status: i32,
) -> Result<i32, TransportError> {
    match tenant.bulk.take() {
        Some(Bulk::Drain(mut left)) => {
            let mut scratch = vec![0u8; 1 << 20];
            while left > 0 {
                let chunk = left.min(scratch.len() as u64) as usize;
                chan.recv_raw(&mut scratch[..chunk])?;
                left -= chunk as u64;
            }
            Ok(status)
        }
        Some(Bulk::In { len, then }) => {
            // SAFETY: the mapping spans at least `len` bytes (an unmap's
            // `len` was checked against the mapping's length, a bulk write
            // mapped exactly `len`) and stays mapped until `then` runs.
            let dst = unsafe { std::slice::from_raw_parts_mut(then.ptr as *mut u8, len) };
            chan.recv_raw(dst)?;
            Ok(then.run(tenant))
        }
        other => {
            tenant.bulk = other;
            Ok(status)
        }
    }
}

/// Completes an outgoing bulk transfer (after the reply frame).
pub fn finish_bulk_out(tenant: &mut Tenant, chan: &mut dyn Channel) -> Result<(), TransportError> {
    let (ptr, len, then) = match tenant.bulk.take() {
        Some(Bulk::Out { len, then }) => (then.ptr, len, Some(then)),
        Some(Bulk::Send { ptr, len }) => (ptr, len, None),
        other => {
            tenant.bulk = other;
            return Ok(());
        }
    };
    // SAFETY: the library mapped `len` bytes at `ptr`, valid until unmapped.
    let src = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    chan.send_raw(src)?;
    chan.flush()?;
    if let Some(then) = then {
        then.run(tenant);
    }
    Ok(())
}

/// Undoes a bulk transfer that will not happen (no channel: the fuzzer and
/// in-process tests): mappings are unmapped, no data moves.
pub fn abandon_bulk(tenant: &mut Tenant) {
    match tenant.bulk.take() {
        Some(Bulk::In { then, .. }) | Some(Bulk::Out { then, .. }) => {
            then.run(tenant);
        }
        Some(Bulk::Drain(_)) | Some(Bulk::Send { .. }) | None => {}
    }
}
