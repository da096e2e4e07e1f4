#![allow(non_snake_case)]
//! Maps the client completes later. A non-blocking map that waits for a
//! user event the application has not set (its wait list, or the queue's
//! earlier commands) is enqueued as asked, without waiting: the tenant
//! must go on serving the request that sets the event. The map's reply
//! carries no bytes then (`MAP_PENDING` in `maps::d_clEnqueueMapBuffer`
//! and `d_clEnqueueMapImage`); once the map's event completed, the client
//! asks for them here, copies them where the application's mapping is, and
//! only then completes the event it handed out for the map.

use wormhole_opencl_api::{CL_INVALID_VALUE, CL_SUCCESS};
use wormhole_wire::{Decoder, Encoder};

use super::bulk::Bulk;
use super::tenant::{bad, Tenant};

/// Request: the client's id for the mapping. Reply: whether the mapped
/// bytes follow it (the whole mapping, streamed after the reply). A mapping
/// the client already gave back (an unmap enqueued before the map ran) is
/// `CL_INVALID_VALUE`, with no bytes.
pub fn d_whFetchMapping(t: &mut Tenant, d: &mut Decoder<'_>, e: &mut Encoder) -> Result<i32, i32> {
    let id = d.u64().map_err(bad)?;
    d.finish().map_err(bad)?;
    e.u8(1);
    let Some(m) = t.mappings.get(&id) else {
        e.bool(false);
        return Ok(CL_INVALID_VALUE);
    };
    // The library gave us `len` bytes at `ptr` when it mapped them, and they
    // stay mapped until the client's unmap, which comes after this request.
    let Ok(len) = usize::try_from(m.len) else {
        e.bool(false);
        return Ok(CL_INVALID_VALUE);
    };
    e.bool(true);
    t.bulk = Some(Bulk::Send { ptr: m.ptr, len });
    Ok(CL_SUCCESS)
}
