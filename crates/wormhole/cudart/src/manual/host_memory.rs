//! "Pinned" host memory, which the client allocates and registers itself.
//!
//! The server cannot pin memory in another process, and every copy goes
//! through the channel anyway, so page-locked memory is ordinary
//! page-aligned memory here. What the client keeps is which ranges the
//! application allocated (cudaMallocHost, cudaHostAlloc) or registered
//! (cudaHostRegister). cudaPointerGetAttributes then reports them as
//! host memory, as natively, and frameworks that check
//! (PyTorch's `Tensor.is_pinned`) see what they asked for. They have no
//! device address: the device cannot reach the client's memory.

#![allow(non_snake_case)] // the C names of the entry points

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::MutexGuard;

use wormhole_cuda_api::*;

use crate::manual::devices::current_device;
use crate::state::note;
use crate::state::Global;

/// cudaErrorHostMemoryAlreadyRegistered, cudaErrorHostMemoryNotRegistered.
const ALREADY_REGISTERED: i32 = 712;
const NOT_REGISTERED: i32 = 713;

/// One range of the application's page-locked memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub size: u64,
    /// The device current when it was allocated or registered.
    pub device: i32,
    /// Registered (cudaHostRegister), not allocated here.
    registered: bool,
}

#[derive(Default)]
struct Ranges(BTreeMap<u64, Range>);

impl Ranges {
    /// The range holding `p`.
    fn find(&self, p: u64) -> Option<Range> {
        let (_, r) = self.0.range(..=p).next_back()?;
        (p - r.start < r.size).then_some(*r)
    }

    /// Whether `[start, start+size)` meets a known range.
    fn overlaps(&self, start: u64, size: u64) -> bool {
        let end = start.saturating_add(size);
        self.find(start).is_some() || self.0.range(start..end).next().is_some()
    }
}

fn ranges() -> MutexGuard<'static, Ranges> {
    static R: Global<Ranges> = Global::new();
    R.lock()
}

/// The page-locked range that holds `p`, if any.
pub fn find(p: u64) -> Option<Range> {
    ranges().find(p)
}

/// # Safety
/// `ptr` is NULL or writable.
pub unsafe extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> i32 {
    if ptr.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let init = crate::manual::devices::init_status();
    if init != cudaSuccess {
        return note(init);
    }
    let mut p = std::ptr::null_mut();
    // SAFETY: posix_memalign writes `p` on success.
    if unsafe { libc::posix_memalign(&mut p, 4096, size.max(1)) } != 0 {
        return note(cudaErrorMemoryAllocation);
    }
    let r = Range {
        start: p as usize as u64,
        size: size.max(1) as u64,
        device: current_device(),
        registered: false,
    };
    ranges().0.insert(r.start, r);
    // SAFETY: `ptr` is non-NULL (checked on entry), and a non-NULL one is a
    // writable `void *` slot: cudaMallocHost's contract.
    unsafe { *ptr = p };
    cudaSuccess
}

/// # Safety
/// As for [`cudaMallocHost`].
pub unsafe extern "C" fn cudaHostAlloc(ptr: *mut *mut c_void, size: usize, _flags: u32) -> i32 {
    // SAFETY: `ptr` is NULL or a writable `void *` slot: cudaHostAlloc's
    // contract, which is cudaMallocHost's (it checks for NULL).
    unsafe { cudaMallocHost(ptr, size) }
}

/// Frees only what [`cudaMallocHost`] allocated; anything else is refused
/// and left alone.
///
/// # Safety
/// `ptr` is NULL or any pointer.
pub unsafe extern "C" fn cudaFreeHost(ptr: *mut c_void) -> i32 {
    if ptr.is_null() {
        return cudaSuccess;
    }
    let start = ptr as usize as u64;
    {
        let mut r = ranges();
        match r.0.get(&start) {
            Some(a) if !a.registered => r.0.remove(&start),
            _ => return note(cudaErrorInvalidValue),
        };
    }
    // SAFETY: a block cudaMallocHost allocated with posix_memalign, freed
    // once (its range is gone).
    unsafe { libc::free(ptr) };
    cudaSuccess
}

pub extern "C" fn cudaHostRegister(ptr: *mut c_void, size: usize, _flags: u32) -> i32 {
    if ptr.is_null() || size == 0 {
        return note(cudaErrorInvalidValue);
    }
    let start = ptr as usize as u64;
    let device = current_device();
    let mut r = ranges();
    if r.overlaps(start, size as u64) {
        return note(ALREADY_REGISTERED);
    }
    r.0.insert(
        start,
        Range {
            start,
            size: size as u64,
            device,
            registered: true,
        },
    );
    cudaSuccess
}

pub extern "C" fn cudaHostUnregister(ptr: *mut c_void) -> i32 {
    let start = ptr as usize as u64;
    let mut r = ranges();
    match r.0.get(&start) {
        Some(a) if a.registered => {
            r.0.remove(&start);
            cudaSuccess
        }
        _ => note(NOT_REGISTERED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: u64, size: u64) -> Range {
        Range {
            start,
            size,
            device: 0,
            registered: true,
        }
    }

    #[test]
    fn ranges_are_found_by_any_byte_and_overlaps_refused() {
        let mut r = Ranges::default();
        r.0.insert(0x1000, range(0x1000, 0x100));
        r.0.insert(0x3000, range(0x3000, 0x10));
        assert_eq!(r.find(0x1000).map(|a| a.start), Some(0x1000));
        assert_eq!(r.find(0x10ff).map(|a| a.start), Some(0x1000));
        assert_eq!(r.find(0x1100), None);
        assert_eq!(r.find(0xfff), None);
        assert!(r.overlaps(0x10f0, 0x100), "starts inside");
        assert!(r.overlaps(0x2000, 0x1001), "ends inside the next");
        assert!(r.overlaps(0x0, u64::MAX), "covers both");
        assert!(!r.overlaps(0x1100, 0x1f00), "between them");
    }
}
