//! The stream-ordered allocator's default memory pools, as the client keeps
//! them.
//!
//! cudaMallocAsync is the ordinary allocator here (see `cuda.api`): each
//! allocation is the server's cudaMalloc, and each free gives the memory
//! back to the device. So a device's default pool is the client's account
//! of the bytes that cudaMallocAsync calls hold on it. Reserved memory is
//! used memory, and trimming has nothing to release. The reuse and release
//! settings are kept and read back; with nothing cached, they change
//! nothing. Frameworks that ask how much a pool holds (PyTorch's
//! `cudaMallocAsync` backend) so get true figures.
#![allow(non_snake_case)] // the C names of the entry points

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::MutexGuard;

use wormhole_cuda_api::*;

use crate::state::Global;
use crate::state::{note, tracker};

/// The most devices whose pools a client can name.
const MAX_DEVICES: usize = 64;
/// A default pool's handle is the address of its device's byte here:
/// stable for the life of the process, and checkable.
static TAGS: [u8; MAX_DEVICES] = [0; MAX_DEVICES];

/// cudaMemPoolAttr values (driver_types.h).
const ATTR_REUSE_FIRST: i32 = 1; // ReuseFollowEventDependencies
const ATTR_REUSE_LAST: i32 = 3; // ReuseAllowInternalDependencies
const ATTR_RELEASE_THRESHOLD: i32 = 4;
const ATTR_RESERVED_CURRENT: i32 = 5;
const ATTR_RESERVED_HIGH: i32 = 6;
const ATTR_USED_CURRENT: i32 = 7;
const ATTR_USED_HIGH: i32 = 8;

/// cudaMemLocationTypeDevice and cudaMemAccessFlagsProtReadWrite.
const LOCATION_DEVICE: i32 = 1;
const PROT_READ_WRITE: i32 = 3;

#[derive(Clone, Copy)]
struct Pool {
    /// The three reuse policies, each enabled natively by default.
    reuse: [i32; 3],
    release_threshold: u64,
    used: u64,
    used_high: u64,
    reserved_high: u64,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            reuse: [1; 3],
            release_threshold: 0,
            used: 0,
            used_high: 0,
            reserved_high: 0,
        }
    }
}

#[derive(Default)]
struct State {
    pools: HashMap<i32, Pool>,
    /// What cudaMallocAsync allocated: start -> (device, size).
    allocs: HashMap<u64, (i32, u64)>,
}

fn state() -> MutexGuard<'static, State> {
    static S: Global<State> = Global::new();
    S.lock()
}

/// The device of a default pool's handle.
fn device_of(pool: *mut c_void) -> Option<i32> {
    crate::state::slot_of(&TAGS, pool).map(|d| d as i32)
}

/// Counts an allocation cudaMallocAsync made at `start` against its
/// device's pool.
pub fn allocated(start: u64) {
    let Some(a) = tracker().find(start) else {
        return;
    };
    let mut s = state();
    s.allocs.insert(start, (a.device, a.size));
    let p = s.pools.entry(a.device).or_default();
    p.used += a.size;
    p.used_high = p.used_high.max(p.used);
    p.reserved_high = p.reserved_high.max(p.used);
}

/// Forgets a freed allocation (by cudaFree or cudaFreeAsync).
pub fn freed(start: u64) {
    let mut s = state();
    if let Some((device, size)) = s.allocs.remove(&start) {
        let p = s.pools.entry(device).or_default();
        p.used = p.used.saturating_sub(size);
    }
}

/// # Safety
/// `pool` is NULL or writable.
pub unsafe extern "C" fn cudaDeviceGetDefaultMemPool(pool: *mut *mut c_void, device: i32) -> i32 {
    if pool.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let n = match crate::manual::devices::device_count() {
        Ok(n) => n,
        Err(s) => return note(s),
    };
    if device < 0 || device >= n || device as usize >= MAX_DEVICES {
        return note(cudaErrorInvalidDevice);
    }
    // SAFETY: `pool` is non-NULL (checked above), and a non-NULL one is a
    // writable cudaMemPool_t slot: cudaDeviceGetDefaultMemPool's contract.
    // The handle is only ever compared, never written through.
    unsafe { *pool = TAGS.as_ptr().add(device as usize) as *mut c_void };
    cudaSuccess
}

/// # Safety
/// `value` is NULL or holds the attribute's type (int or cuuint64_t).
pub unsafe extern "C" fn cudaMemPoolGetAttribute(
    pool: *mut c_void,
    attr: i32,
    value: *mut c_void,
) -> i32 {
    let Some(device) = device_of(pool).filter(|_| !value.is_null()) else {
        return note(cudaErrorInvalidValue);
    };
    let p = state().pools.get(&device).copied().unwrap_or_default();
    let v = match attr {
        ATTR_REUSE_FIRST..=ATTR_REUSE_LAST => {
            // SAFETY: `value` is non-NULL (checked above) and, for a reuse
            // attribute, points to a writable int: cudaMemPoolGetAttribute's
            // contract.
            unsafe { *(value as *mut i32) = p.reuse[(attr - ATTR_REUSE_FIRST) as usize] };
            return cudaSuccess;
        }
        ATTR_RELEASE_THRESHOLD => p.release_threshold,
        // Nothing is cached: what is reserved is what is used.
        ATTR_RESERVED_CURRENT | ATTR_USED_CURRENT => p.used,
        ATTR_RESERVED_HIGH => p.reserved_high,
        ATTR_USED_HIGH => p.used_high,
        _ => return note(cudaErrorInvalidValue),
    };
    // SAFETY: `value` is non-NULL (checked above) and, for these
    // attributes, points to a writable cuuint64_t: cudaMemPoolGetAttribute's
    // contract.
    unsafe { *(value as *mut u64) = v };
    cudaSuccess
}

/// # Safety
/// `value` is NULL or holds the attribute's type (int or cuuint64_t).
pub unsafe extern "C" fn cudaMemPoolSetAttribute(
    pool: *mut c_void,
    attr: i32,
    value: *mut c_void,
) -> i32 {
    let Some(device) = device_of(pool).filter(|_| !value.is_null()) else {
        return note(cudaErrorInvalidValue);
    };
    let mut s = state();
    let p = s.pools.entry(device).or_default();
    match attr {
        ATTR_REUSE_FIRST..=ATTR_REUSE_LAST => {
            // SAFETY: `value` is non-NULL (checked above) and, for a reuse
            // attribute, points to a readable int: cudaMemPoolSetAttribute's
            // contract.
            let v = unsafe { *(value as *const i32) };
            p.reuse[(attr - ATTR_REUSE_FIRST) as usize] = (v != 0) as i32;
        }
        ATTR_RELEASE_THRESHOLD | ATTR_RESERVED_HIGH | ATTR_USED_HIGH => {
            // SAFETY: `value` is non-NULL (checked above) and, for these
            // attributes, points to a readable cuuint64_t:
            // cudaMemPoolSetAttribute's contract.
            let v = unsafe { *(value as *const u64) };
            match attr {
                ATTR_RELEASE_THRESHOLD => p.release_threshold = v,
                // A high-water mark may only be reset (to the current use).
                _ if v != 0 => return note(cudaErrorInvalidValue),
                ATTR_USED_HIGH => p.used_high = p.used,
                _ => p.reserved_high = p.used,
            }
        }
        _ => return note(cudaErrorInvalidValue),
    }
    cudaSuccess
}

/// The pool's own device keeps read-write access; other devices' access is
/// not offered.
///
/// # Safety
/// `descs` is NULL or points to `count` cudaMemAccessDesc.
pub unsafe extern "C" fn cudaMemPoolSetAccess(
    pool: *mut c_void,
    descs: *const c_void,
    count: usize,
) -> i32 {
    /// cudaMemAccessDesc: a cudaMemLocation (type, id), then the flags.
    #[repr(C)]
    struct AccessDesc {
        kind: i32,
        id: i32,
        flags: i32,
    }
    let Some(device) = device_of(pool) else {
        return note(cudaErrorInvalidValue);
    };
    if count > 0 && descs.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let descs: &[AccessDesc] = if count == 0 {
        &[]
    } else {
        // SAFETY: `descs` is non-NULL (checked above) and points to `count`
        // cudaMemAccessDesc entries: cudaMemPoolSetAccess's contract.
        unsafe { std::slice::from_raw_parts(descs as *const AccessDesc, count) }
    };
    let mut n = 0;
    if descs.iter().any(|d| d.id != device) {
        n = match crate::manual::devices::device_count() {
            Ok(n) => n,
            Err(s) => return note(s),
        };
    }
    for d in descs {
        if d.kind != LOCATION_DEVICE {
            return note(cudaErrorInvalidValue);
        }
        if d.id != device && !(0..n).contains(&d.id) {
            return note(cudaErrorInvalidDevice);
        }
        if d.id != device {
            return note(cudaErrorNotSupported);
        }
        if d.flags != PROT_READ_WRITE {
            return note(cudaErrorInvalidValue);
        }
    }
    cudaSuccess
}

/// Nothing is cached, so nothing is released.
pub extern "C" fn cudaMemPoolTrimTo(pool: *mut c_void, _min_bytes_to_keep: usize) -> i32 {
    match device_of(pool) {
        Some(_) => cudaSuccess,
        None => note(cudaErrorInvalidValue),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_default_pool_handles_name_a_device() {
        assert_eq!(device_of(TAGS.as_ptr() as *mut c_void), Some(0));
        // SAFETY: within the array.
        let last = unsafe { TAGS.as_ptr().add(MAX_DEVICES - 1) } as *mut c_void;
        assert_eq!(device_of(last), Some(MAX_DEVICES as i32 - 1));
        assert_eq!(device_of(std::ptr::null_mut()), None);
        let past = (TAGS.as_ptr() as usize + MAX_DEVICES) as *mut c_void;
        assert_eq!(device_of(past), None);
        let before = (TAGS.as_ptr() as usize - 1) as *mut c_void;
        assert_eq!(device_of(before), None);
    }
}
