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
    n: u32,
    event: NewSlot,
}

/// Decodes a bulk request. The size comes first so that, once it is known,
/// the incoming bytes can always be drained, whatever else is wrong.
fn bulk_args(t: &mut Tenant, d: &mut Decoder<'_>, incoming: bool) -> Result<BulkArgs, i32> {
    let size = match d.usize() {
        Ok(s) => s,
        Err(_) => {
            // Without the size the stream cannot be followed any further.
            t.broken = true;
            return Err(CL_INVALID_VALUE);
        }
    };
    if incoming {
        t.bulk = Some(Bulk::Drain(size as u64));
    }
    let queue = t.handle(d, Kind::Queue)?;
    let mem = t.handle(d, Kind::Mem)?;
    let offset = d.usize().map_err(bad)?;
    let (n, wait, event) = wait_list_and_event(t, d)?;
    d.finish().map_err(bad)?;
    Ok(BulkArgs {
        size,
        queue,
        mem,
        offset,
        wait,
        n,
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
            n: 0,
            wait: None,
            event: self.event,
            mapping: None,
        }
    }
}

fn map_for(a: &BulkArgs, flags: u64) -> Result<*mut c_void, i32> {
    let mut err = 0;
    // SAFETY: handles from the table; the wait list holds `n` events. A
    // blocking map returns memory valid until the unmap.
    let p = unsafe {
        ffi::clEnqueueMapBuffer(
            a.queue,
            a.mem,
            CL_TRUE,
            flags,
            a.offset,
            a.size,
            a.n,
            opt_vec_ptr(&a.wait),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    if err != CL_SUCCESS {
        return Err(err);
    }
    if p.is_null() {
        return Err(wormhole_opencl_api::CL_OUT_OF_RESOURCES);
    }
    Ok(p)
}

/// Request: size, queue, buffer, offset, wait list, event; `size` bytes follow.
pub fn d_whEnqueueWriteBufferBulk(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let a = bulk_args(t, d, true)?;
    let ptr = map_for(&a, CL_MAP_WRITE_INVALIDATE_REGION)?;
    let len = a.size;
    t.bulk = Some(Bulk::In {
        len,
        then: a.unmap(ptr),
    });
    e.u8(1);
    Ok(CL_SUCCESS)
}

/// Request: size, queue, buffer, offset, wait list, event. Reply: whether
/// `size` bytes follow it.
pub fn d_whEnqueueReadBufferBulk(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let a = bulk_args(t, d, false)?;
    e.u8(1);
    match map_for(&a, wormhole_opencl_api::CL_MAP_READ) {
        Ok(ptr) => {
            e.bool(true);
            let len = a.size;
            t.bulk = Some(Bulk::Out {
                len,
                then: a.unmap(ptr),
            });
            Ok(CL_SUCCESS)
        }
        Err(s) => {
            e.bool(false);
            Ok(s)
        }
    }
}

/// Completes an incoming bulk transfer (before the reply); returns the
/// call's final status.
pub fn finish_bulk_in(
    t: &mut Tenant,
    chan: &mut dyn Channel,
    status: i32,
) -> Result<i32, TransportError> {
    match t.bulk.take() {
        Some(Bulk::Drain(mut n)) => {
            let mut scratch = vec![0u8; 1 << 20];
            while n > 0 {
                let k = n.min(scratch.len() as u64) as usize;
                chan.recv_raw(&mut scratch[..k])?;
                n -= k as u64;
            }
            Ok(status)
        }
        Some(Bulk::In { len, then }) => {
            // SAFETY: the mapping spans at least `len` bytes (checked when
            // the transfer was set up) and stays mapped until `then` runs.
            let dst = unsafe { std::slice::from_raw_parts_mut(then.ptr as *mut u8, len) };
            chan.recv_raw(dst)?;
            Ok(then.run(t))
        }
        other => {
            t.bulk = other;
            Ok(status)
        }
    }
}

/// Completes an outgoing bulk transfer (after the reply frame).
pub fn finish_bulk_out(t: &mut Tenant, chan: &mut dyn Channel) -> Result<(), TransportError> {
    let (ptr, len, then) = match t.bulk.take() {
        Some(Bulk::Out { len, then }) => (then.ptr, len, Some(then)),
        Some(Bulk::Send { ptr, len }) => (ptr, len, None),
        other => {
            t.bulk = other;
            return Ok(());
        }
    };
    // SAFETY: the library mapped `len` bytes at `ptr`, valid until unmapped.
    let src = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    chan.send_raw(src)?;
    chan.flush()?;
    if let Some(then) = then {
        then.run(t);
    }
    Ok(())
}

/// Undoes a bulk transfer that will not happen (no channel: the fuzzer and
/// in-process tests): mappings are unmapped, no data moves.
pub fn abandon_bulk(t: &mut Tenant) {
    match t.bulk.take() {
        Some(Bulk::In { then, .. }) | Some(Bulk::Out { then, .. }) => {
            then.run(t);
        }
        Some(Bulk::Drain(_)) | Some(Bulk::Send { .. }) | None => {}
    }
}
