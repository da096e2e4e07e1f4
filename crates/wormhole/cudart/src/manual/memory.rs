//! Device memory: allocations (plain, stream-ordered, pitched), frees, and
//! what a pointer is, answered from the allocation tracker.

use std::ffi::c_void;

use wormhole_cuda_api::tracker::Alloc;
use wormhole_cuda_api::*;

use super::status_of;
use crate::call::Call;
use crate::state::{note, tracker};

/// # Safety
/// `dev_ptr` is NULL or writable.
pub unsafe extern "C" fn cudaMalloc(dev_ptr: *mut *mut c_void, size: usize) -> i32 {
    if dev_ptr.is_null() {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let mut r = Call::of_u64(func::cudaMalloc, size as u64)?;
        let status = r.status();
        if r.has_outputs() {
            let p = r.with(|d| d.u64().map_err(|_| cudaErrorUnknown))?;
            let dev = r.with(|d| d.i32().map_err(|_| cudaErrorUnknown))?;
            // A server handing out overlapping ranges is broken: refuse.
            // (NULL, for a zero-byte allocation, is never device memory.)
            if p != 0 {
                tracker()
                    .insert(Alloc {
                        start: p,
                        size: size as u64,
                        device: dev,
                    })
                    .map_err(|_| cudaErrorUnknown)?;
            }
            // SAFETY: `dev_ptr` is non-NULL (checked on entry), and a
            // non-NULL one is a writable `void *` slot: cudaMalloc's
            // contract.
            unsafe { *dev_ptr = p as usize as *mut c_void };
        }
        Ok(status)
    })())
}

pub extern "C" fn cudaFree(dev_ptr: *mut c_void) -> i32 {
    if dev_ptr.is_null() {
        return cudaSuccess;
    }
    let p = dev_ptr as usize as u64;
    if tracker().find(p).map(|a| a.start) != Some(p) {
        return note(cudaErrorInvalidValue);
    }
    status_of((|| {
        let mut r = Call::of_u64(func::cudaFree, p)?;
        let status = r.status_with_deferred();
        if status == cudaSuccess {
            // While the reply still holds the channel: once it is free,
            // another thread's cudaMalloc may be given this address, and
            // must find it gone from the tracker.
            tracker().remove(p);
            crate::manual::pools::freed(p);
        }
        drop(r);
        Ok(status)
    })())
}

/// `struct cudaPointerAttributes` (CUDA 11 and later).
#[repr(C)]
struct PointerAttributes {
    kind: i32,
    device: i32,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
}

/// Answered from the trackers, without a round trip: device memory is ours
/// if the tracker knows it, page-locked host memory if `host` does, and
/// anything else is unregistered host memory.
///
/// # Safety
/// `attributes` is NULL or writable.
pub unsafe extern "C" fn cudaPointerGetAttributes(
    attributes: *mut c_void,
    ptr: *const c_void,
) -> i32 {
    if attributes.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let a = tracker().find(ptr as usize as u64);
    let v = match a {
        Some(a) => PointerAttributes {
            kind: 2, // cudaMemoryTypeDevice
            device: a.device,
            device_pointer: ptr as *mut c_void,
            host_pointer: std::ptr::null_mut(),
        },
        None => match crate::manual::host_memory::find(ptr as usize as u64) {
            // Page-locked, but out of the device's reach (host_memory.rs).
            Some(h) => PointerAttributes {
                kind: 1, // cudaMemoryTypeHost
                device: h.device,
                device_pointer: std::ptr::null_mut(),
                host_pointer: ptr as *mut c_void,
            },
            None => PointerAttributes {
                kind: 0, // cudaMemoryTypeUnregistered
                device: -2,
                device_pointer: std::ptr::null_mut(),
                host_pointer: ptr as *mut c_void,
            },
        },
    };
    // SAFETY: `attributes` is non-NULL (checked above), and a non-NULL one
    // is a writable `struct cudaPointerAttributes`, whose layout
    // PointerAttributes is: cudaPointerGetAttributes's contract.
    unsafe { std::ptr::write(attributes as *mut PointerAttributes, v) };
    cudaSuccess
}

/// # Safety
/// As cudaMalloc.
pub unsafe extern "C" fn cudaMallocAsync(
    dev_ptr: *mut *mut c_void,
    size: usize,
    _stream: *mut c_void,
) -> i32 {
    // SAFETY: `dev_ptr` is NULL or a writable `void *` slot:
    // cudaMallocAsync's contract, cudaMalloc's (which checks for NULL).
    let status = unsafe { cudaMalloc(dev_ptr, size) };
    if status == cudaSuccess {
        // SAFETY: cudaMalloc succeeded, so `dev_ptr` was checked non-NULL
        // and written.
        crate::manual::pools::allocated(unsafe { *dev_ptr } as usize as u64);
    }
    status
}

pub extern "C" fn cudaFreeAsync(dev_ptr: *mut c_void, _stream: *mut c_void) -> i32 {
    cudaFree(dev_ptr)
}

/// The pitch cudaMallocPitch gives: rows start 512 bytes apart or a
/// multiple of it (the texture alignment of NVIDIA's GPUs).
const PITCH_ALIGN: usize = 512;

/// The pitch of rows of `width` bytes and the size of `height` of them
/// (None: more than the address space).
fn pitched(width: usize, height: usize) -> Option<(usize, usize)> {
    let pitch = width.checked_next_multiple_of(PITCH_ALIGN)?;
    Some((pitch, pitch.checked_mul(height)?))
}

/// # Safety
/// `dev_ptr` and `pitch` are NULL or writable.
pub unsafe extern "C" fn cudaMallocPitch(
    dev_ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
) -> i32 {
    if dev_ptr.is_null() || pitch.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let Some((p, total)) = pitched(width, height) else {
        return note(cudaErrorMemoryAllocation);
    };
    // SAFETY: `dev_ptr` is non-NULL (checked above), and a non-NULL one is
    // a writable `void *` slot: cudaMallocPitch's contract, cudaMalloc's.
    let status = unsafe { cudaMalloc(dev_ptr, total) };
    if status == cudaSuccess {
        // SAFETY: `pitch` is non-NULL (checked above), and a non-NULL one
        // is a writable size_t: cudaMallocPitch's contract.
        unsafe { *pitch = p };
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_start_512_bytes_apart_or_a_multiple() {
        assert_eq!(pitched(1, 3), Some((512, 1536)));
        assert_eq!(pitched(512, 2), Some((512, 1024)));
        assert_eq!(pitched(513, 2), Some((1024, 2048)));
        assert_eq!(pitched(0, 5), Some((0, 0)));
        assert_eq!(pitched(usize::MAX, 1), None);
        assert_eq!(pitched(4096, usize::MAX), None);
    }

    /// What the trackers answer needs no server: an address no allocation
    /// holds is unregistered host memory; freeing NULL is a no-op and
    /// freeing an address never allocated is refused.
    #[test]
    fn unknown_pointers_are_answered_here() {
        let mut attributes = PointerAttributes {
            kind: -1,
            device: -1,
            device_pointer: std::ptr::null_mut(),
            host_pointer: std::ptr::null_mut(),
        };
        let local = 7u64;
        let ptr = std::ptr::from_ref(&local).cast::<c_void>();
        // SAFETY: `attributes` is a writable cudaPointerAttributes.
        let status =
            unsafe { cudaPointerGetAttributes(std::ptr::from_mut(&mut attributes).cast(), ptr) };
        assert_eq!(status, cudaSuccess);
        assert_eq!((attributes.kind, attributes.device), (0, -2));
        assert_eq!(attributes.host_pointer.cast_const(), ptr);
        // SAFETY: NULL is refused before anything is written.
        let status = unsafe { cudaPointerGetAttributes(std::ptr::null_mut(), ptr) };
        assert_eq!(status, cudaErrorInvalidValue);
        assert_eq!(cudaFree(std::ptr::null_mut()), cudaSuccess);
        assert_eq!(cudaFree(ptr.cast_mut()), cudaErrorInvalidValue);
    }
}
