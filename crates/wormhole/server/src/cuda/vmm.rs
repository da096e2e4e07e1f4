//! The driver's virtual memory management calls (libcuda.so.1), for delay
//! storing: a tenant's allocation keeps its address for its whole life
//! (a reserved range) while its physical memory may go (evicted) and come
//! back (restored) under it. Kernels hold raw device pointers, stored in
//! other allocations too, so nothing else would let an evicted allocation
//! come back where the tenant's pointers expect it.
//!
//! The driver is opened like the runtime's libraries (`loader`); on a
//! machine without one, residency for CUDA is off and `cudaMalloc` is the
//! runtime's. The CPU stand-in (`examples/cuda/cpu_device/vmm.c`) has the
//! same calls over `mmap`, so CI runs this path.

use super::loader::{Loader, Sonames, Symbols};

type CuResult = i32;
const CUDA_SUCCESS: CuResult = 0;
/// `CU_MEM_ALLOCATION_TYPE_PINNED`, `CU_MEM_LOCATION_TYPE_DEVICE`.
const PINNED: i32 = 1;
const ON_DEVICE: i32 = 1;
const PROT_READWRITE: i32 = 3;
/// `CU_MEM_ALLOC_GRANULARITY_MINIMUM`.
const MINIMUM: i32 = 0;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Location {
    kind: i32,
    id: i32,
}

/// `CUmemAllocationProp` (32 bytes): pinned device memory on one device,
/// no shareable handle, no flags.
#[repr(C)]
struct AllocationProp {
    kind: i32,
    requested_handle_types: i32,
    location: Location,
    win32_handle_meta_data: *mut std::ffi::c_void,
    alloc_flags: [u8; 8],
}

/// `CUmemAccessDesc`.
#[repr(C)]
struct AccessDesc {
    location: Location,
    flags: i32,
}

fn prop(device: i32) -> AllocationProp {
    AllocationProp {
        kind: PINNED,
        requested_handle_types: 0,
        location: Location {
            kind: ON_DEVICE,
            id: device,
        },
        win32_handle_meta_data: std::ptr::null_mut(),
        alloc_flags: [0; 8],
    }
}

type Granularity = unsafe extern "C" fn(*mut usize, *const AllocationProp, i32) -> CuResult;
type Reserve = unsafe extern "C" fn(*mut u64, usize, usize, u64, u64) -> CuResult;
type AddressFree = unsafe extern "C" fn(u64, usize) -> CuResult;
type Create = unsafe extern "C" fn(*mut u64, usize, *const AllocationProp, u64) -> CuResult;
type Release = unsafe extern "C" fn(u64) -> CuResult;
type Map = unsafe extern "C" fn(u64, usize, usize, u64, u64) -> CuResult;
type Unmap = unsafe extern "C" fn(u64, usize) -> CuResult;
type SetAccess = unsafe extern "C" fn(u64, usize, *const AccessDesc, usize) -> CuResult;

/// The calls, all present or none.
#[derive(Clone, Copy)]
pub struct Vmm {
    granularity: Granularity,
    reserve: Reserve,
    address_free: AddressFree,
    create: Create,
    release: Release,
    map: Map,
    unmap: Unmap,
    set_access: SetAccess,
}

/// A driver call failed: its `CUresult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the CUDA driver's {call} answered {code}")]
pub struct VmmError {
    pub call: &'static str,
    pub code: i32,
}

fn check(call: &'static str, code: CuResult) -> Result<(), VmmError> {
    if code == CUDA_SUCCESS {
        Ok(())
    } else {
        Err(VmmError { call, code })
    }
}

fn load(symbols: &Symbols) -> Option<Vmm> {
    // SAFETY: each type above is the C signature of the driver function of
    // that name (cuda.h, CUDA 10.2 and later: none has a _v2 form).
    unsafe {
        Some(Vmm {
            granularity: symbols.function("cuMemGetAllocationGranularity")?,
            reserve: symbols.function("cuMemAddressReserve")?,
            address_free: symbols.function("cuMemAddressFree")?,
            create: symbols.function("cuMemCreate")?,
            release: symbols.function("cuMemRelease")?,
            map: symbols.function("cuMemMap")?,
            unmap: symbols.function("cuMemUnmap")?,
            set_access: symbols.function("cuMemSetAccess")?,
        })
    }
}

static DRIVER: Loader<Option<Vmm>> = Loader::new(Sonames::Fixed(&["libcuda.so.1"]), load);

/// The driver's calls, if it has them.
pub fn driver() -> Option<Vmm> {
    *DRIVER.get()
}

impl Vmm {
    /// The size physical memory comes in on `device` (2 MiB on NVIDIA's
    /// GPUs): every allocation is rounded up to it.
    pub fn granularity(&self, device: i32) -> Result<u64, VmmError> {
        let mut g = 0usize;
        let p = prop(device);
        // SAFETY: valid out-pointer and property block.
        check("cuMemGetAllocationGranularity", unsafe {
            (self.granularity)(&mut g, &p, MINIMUM)
        })?;
        Ok((g as u64).max(1))
    }

    /// Reserves `size` bytes of the device's address space (no memory).
    pub fn reserve(&self, size: u64, align: u64) -> Result<u64, VmmError> {
        let mut at = 0u64;
        // SAFETY: a valid out-pointer; no fixed address is asked for.
        check("cuMemAddressReserve", unsafe {
            (self.reserve)(&mut at, size as usize, align as usize, 0, 0)
        })?;
        Ok(at)
    }

    /// Gives a reservation back (nothing may be mapped in it).
    pub fn unreserve(&self, at: u64, size: u64) -> Result<(), VmmError> {
        // SAFETY: a range `reserve` returned, of its size.
        check("cuMemAddressFree", unsafe {
            (self.address_free)(at, size as usize)
        })
    }

    /// Puts new physical memory of `size` bytes on `device` under the
    /// reserved range at `at`, readable and writable by the device.
    /// Returns its handle, for [`Vmm::unback`]. Its contents are undefined.
    pub fn back(&self, at: u64, size: u64, device: i32) -> Result<u64, VmmError> {
        let p = prop(device);
        let mut handle = 0u64;
        // SAFETY: valid out-pointer and property block.
        check("cuMemCreate", unsafe {
            (self.create)(&mut handle, size as usize, &p, 0)
        })?;
        let mapped = (|| {
            // SAFETY: `at` is a reserved range of `size` bytes with nothing
            // mapped in it (the caller's), `handle` memory of that size.
            check("cuMemMap", unsafe {
                (self.map)(at, size as usize, 0, handle, 0)
            })?;
            let access = AccessDesc {
                location: p.location,
                flags: PROT_READWRITE,
            };
            // SAFETY: the range just mapped; one access descriptor.
            let s = unsafe { (self.set_access)(at, size as usize, &access, 1) };
            if let Err(e) = check("cuMemSetAccess", s) {
                // SAFETY: the range just mapped, which nothing uses yet.
                unsafe { (self.unmap)(at, size as usize) };
                return Err(e);
            }
            Ok(())
        })();
        if let Err(e) = mapped {
            // SAFETY: a handle cuMemCreate gave, mapped nowhere.
            unsafe { (self.release)(handle) };
            return Err(e);
        }
        Ok(handle)
    }

    /// Takes the physical memory `handle` from under `[at, at + size)`;
    /// the range stays reserved. Nothing may use it meanwhile (the caller
    /// waited for the tenant's streams).
    pub fn unback(&self, at: u64, size: u64, handle: u64) -> Result<(), VmmError> {
        // SAFETY: `handle` is mapped at `at` for `size` bytes (by `back`).
        check("cuMemUnmap", unsafe { (self.unmap)(at, size as usize) })?;
        // SAFETY: a handle of `back`'s, now mapped nowhere.
        check("cuMemRelease", unsafe { (self.release)(handle) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_structures_have_cudas_layout() {
        assert_eq!(size_of::<AllocationProp>(), 32);
        assert_eq!(std::mem::offset_of!(AllocationProp, location), 8);
        assert_eq!(std::mem::offset_of!(AllocationProp, alloc_flags), 24);
        assert_eq!(size_of::<AccessDesc>(), 12);
    }
}
