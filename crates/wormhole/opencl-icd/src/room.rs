//! Whether a buffer's creation may be batched, as far as memory goes.
//!
//! A batched `clCreateBuffer` returns its handle before the server has
//! made the buffer; if the device (or the tenant's quota, which the device
//! then reports as its size) has no room for it, the failure surfaces at a
//! later call, where the application is not looking for it. So once the
//! buffers and images the application holds, with the new one, pass half of the
//! smallest `CL_DEVICE_GLOBAL_MEM_SIZE` of the context's devices, each
//! creation waits for its answer and fails where it would natively. Half,
//! because the server still counts buffers the application released while
//! commands that use them are pending.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use wormhole_opencl_api::{handle_list, Kind, CL_CONTEXT_DEVICES, CL_DEVICE_GLOBAL_MEM_SIZE};

use crate::connection::info_value;
use crate::gen;
use crate::objects::obj;

/// Below this much in all (the least global memory the embedded profile
/// allows), the devices are not asked.
const SMALL: u64 = 1 << 20;

/// Bytes in memory objects created here (buffers, images) that the
/// application holds.
static HELD: AtomicU64 = AtomicU64::new(0);

/// Counts a memory object the application now holds.
pub fn created(size: u64) {
    HELD.fetch_add(size, Ordering::Relaxed);
}

/// Stops counting a memory object the application released for the last
/// time.
pub fn released(size: u64) {
    // Never below zero, even if counts raced.
    let _ = HELD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
        Some(h.saturating_sub(size))
    });
}

/// What a creation of `size` bytes would bring the buffers held to.
fn need(size: usize) -> u64 {
    HELD.load(Ordering::Relaxed).saturating_add(size as u64)
}

/// Before `clCreateBuffer` of `size` bytes in `ctx`, with the channel free:
/// asks the memory of the context's devices, once per context, if it could
/// matter ([`may_run_out`] runs inside the call, holding the channel, so it
/// cannot ask).
pub fn before_create(ctx: *mut c_void, size: usize) {
    if need(size) <= SMALL {
        return;
    }
    let Ok(Some(c)) = obj(ctx, Kind::Context) else {
        return;
    };
    if c.mem_budget.load(Ordering::Relaxed) == 0 {
        // u64::MAX: asked, not known.
        let b = ask_budget(ctx).unwrap_or(u64::MAX);
        c.mem_budget.store(b, Ordering::Relaxed);
    }
}

/// Whether a `clCreateBuffer` of `size` bytes in `ctx` could run out of
/// memory (see the module), so that it must wait for its answer. Uses only
/// what [`before_create`] learnt.
pub fn may_run_out(ctx: *mut c_void, size: usize) -> bool {
    let need = need(size);
    if need <= SMALL {
        return false;
    }
    let budget = match obj(ctx, Kind::Context) {
        Ok(Some(c)) => c.mem_budget.load(Ordering::Relaxed),
        _ => return false,
    };
    budget != 0 && budget != u64::MAX && need > budget / 2
}

fn ask_budget(ctx: *mut c_void) -> Option<u64> {
    // SAFETY: the generated stub looks `ctx` up among our objects (an unknown
    // handle is refused, never dereferenced); `value` and `size_ret` are as
    // handle_list passes them: NULL or room for `size` bytes, NULL or one
    // usize.
    let devices = handle_list(64, |size, value, size_ret| unsafe {
        gen::clGetContextInfo(ctx, CL_CONTEXT_DEVICES, size, value, size_ret)
    })?;
    let mut least = u64::MAX;
    for d in devices {
        match info_value::<u64>(gen::clGetDeviceInfo, d, CL_DEVICE_GLOBAL_MEM_SIZE) {
            Ok(m) if m > 0 => least = least.min(m),
            _ => return None,
        }
    }
    Some(least)
}
