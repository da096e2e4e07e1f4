//! Whether a buffer's creation may be batched, as far as memory goes.
//!
//! A batched `clCreateBuffer` returns its handle before the server has
//! made the buffer; if the device (or the tenant's quota, which the device
//! then reports as its size) has no room for it, the failure surfaces at a
//! later call, where the application is not looking for it. So once the
//! buffers the application holds, with the new one, pass half of the
//! smallest `CL_DEVICE_GLOBAL_MEM_SIZE` of the context's devices, each
//! creation waits for its answer and fails where it would natively. Half,
//! because the server still counts buffers the application released while
//! commands that use them are pending.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use wormhole_opencl_api::{Kind, CL_SUCCESS};

use crate::gen;
use crate::rt::obj;

const CL_CONTEXT_DEVICES: u32 = 0x1081;
const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;

/// Below this much in all (the least global memory the embedded profile
/// allows), the devices are not asked.
const SMALL: u64 = 1 << 20;

/// Bytes in buffers from `clCreateBuffer` that the application holds.
static HELD: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set for the next call this thread makes: it must wait for its answer.
    static ANSWER_NEXT: Cell<bool> = const { Cell::new(false) };
}

/// Counts a buffer the application now holds.
pub fn created(size: u64) {
    HELD.fetch_add(size, Ordering::Relaxed);
}

/// Stops counting a buffer the application released for the last time.
pub fn released(size: u64) {
    // Never below zero, even if counts raced.
    let _ = HELD.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
        Some(h.saturating_sub(size))
    });
}

/// Whether the next call of this thread must wait for its answer (and
/// forget that it must).
pub fn take_answer_next() -> bool {
    ANSWER_NEXT.with(|a| a.replace(false))
}

/// Before `clCreateBuffer` of `size` bytes in `ctx`: makes that creation
/// wait for its answer if it could run out of memory (see the module).
pub fn before_create(ctx: *mut c_void, size: usize) {
    let need = HELD.load(Ordering::Relaxed).saturating_add(size as u64);
    if need <= SMALL {
        return;
    }
    let Some(budget) = budget(ctx) else { return };
    if need > budget / 2 {
        ANSWER_NEXT.with(|a| a.set(true));
    }
}

/// After it: the flag is not left for another call.
pub fn after_create() {
    ANSWER_NEXT.with(|a| a.set(false));
}

/// The smallest global memory of the context's devices (`None`: not
/// known), asked once per context.
fn budget(ctx: *mut c_void) -> Option<u64> {
    let c = obj(ctx, Kind::Context).ok()??;
    match c.mem_budget.load(Ordering::Relaxed) {
        0 => {}
        u64::MAX => return None,
        b => return Some(b),
    }
    let b = ask_budget(ctx);
    c.mem_budget.store(b.unwrap_or(u64::MAX), Ordering::Relaxed);
    b
}

fn ask_budget(ctx: *mut c_void) -> Option<u64> {
    let mut n = 0usize;
    // SAFETY: a size query: no value buffer, a usize out-value.
    let s =
        unsafe { gen::clGetContextInfo(ctx, CL_CONTEXT_DEVICES, 0, std::ptr::null_mut(), &mut n) };
    let count = n / std::mem::size_of::<*mut c_void>();
    if s != CL_SUCCESS || count == 0 || count > 64 {
        return None;
    }
    let mut devices = vec![std::ptr::null_mut::<c_void>(); count];
    // SAFETY: room for `count` handles, as the size query said.
    let s = unsafe {
        gen::clGetContextInfo(
            ctx,
            CL_CONTEXT_DEVICES,
            count * std::mem::size_of::<*mut c_void>(),
            devices.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if s != CL_SUCCESS {
        return None;
    }
    let mut least = u64::MAX;
    for d in devices {
        let mut m = 0u64;
        // SAFETY: a cl_ulong out-value.
        let s = unsafe {
            gen::clGetDeviceInfo(
                d,
                CL_DEVICE_GLOBAL_MEM_SIZE,
                8,
                (&mut m as *mut u64).cast(),
                std::ptr::null_mut(),
            )
        };
        if s != CL_SUCCESS || m == 0 {
            return None;
        }
        least = least.min(m);
    }
    Some(least)
}
