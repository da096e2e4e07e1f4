//! Kernel launches: bounds the library does not check.
//!
//! * **Work sizes.** PoCL 3.1 accepts a global size whose work-items
//!   overflow `size_t` (`{SIZE_MAX}^3` keeps the tenant busy for ever) and
//!   an offset whose sum with the size overflows. Refused with the codes
//!   the specification gives: `CL_INVALID_GLOBAL_WORK_SIZE`,
//!   `CL_INVALID_GLOBAL_OFFSET`, `CL_INVALID_WORK_DIMENSION` for 0.
//! * **Local memory.** PoCL 3.1 aborts the process on an assertion at the
//!   launch of a kernel whose local memory (its `__local` arguments and its
//!   own `__local` arrays) exceeds the device's; natively the application
//!   dies, here the launch gets `CL_OUT_OF_RESOURCES`, the specification's
//!   code. Only kernels that use local memory are looked at, so a launch
//!   of any other kernel costs one test of an empty map.
//! * **Arguments a probe set** (`args.rs`) whose own set then failed: the
//!   launch gets `CL_INVALID_KERNEL_ARGS`, as one with the argument never
//!   set does, rather than run with the probe's NULL.

#![allow(non_snake_case)]

use std::ffi::c_void;

use rustc_hash::FxHashMap;
use wormhole_opencl_api::{CL_OUT_OF_RESOURCES, CL_QUEUE_DEVICE, CL_SUCCESS};

use super::args::ArgDecl;
use super::ffi;
use super::tenant::Tenant;

const CL_INVALID_WORK_DIMENSION: i32 = -53;
const CL_INVALID_GLOBAL_OFFSET: i32 = -56;
const CL_INVALID_GLOBAL_WORK_SIZE: i32 = -63;
const CL_INVALID_KERNEL_ARGS: i32 = -52;
const CL_DEVICE_LOCAL_MEM_SIZE: u32 = 0x1023;
const CL_KERNEL_LOCAL_MEM_SIZE: u32 = 0x11B2;
/// Devices whose local memory size is kept (a tenant has one or a few;
/// past this the list starts again).
const MAX_DEVICES: usize = 64;

/// The local memory of a kernel that uses some.
#[derive(Default, Clone, Debug)]
struct LocalUse {
    /// Bytes of each `__local` argument set, by index.
    sizes: Vec<u64>,
    /// Their sum, which no number of `u64` sizes a kernel can have
    /// overflows.
    total: u128,
    /// The kernel's own `__local` arrays, once asked.
    fixed: Option<u64>,
}

impl LocalUse {
    fn set(&mut self, index: u32, bytes: u64) {
        let i = index as usize;
        if self.sizes.len() <= i {
            self.sizes.resize(i + 1, 0);
        }
        self.total = self.total - u128::from(self.sizes[i]) + u128::from(bytes);
        self.sizes[i] = bytes;
    }
}

/// What a tenant knows about its kernels' launches.
#[derive(Default)]
pub struct Launches {
    /// Kernels that use local memory, by real kernel.
    local: FxHashMap<usize, LocalUse>,
    /// Arguments a probe set and the application's set did not replace,
    /// by real kernel.
    unset: FxHashMap<usize, Vec<u32>>,
    /// Devices' local memory sizes.
    device_local: Vec<(usize, u64)>,
}

impl Launches {
    /// Forgets a kernel (the tenant's last reference to it went: the
    /// library may give its address to another).
    pub fn forget(&mut self, kernel: *mut c_void) {
        self.local.remove(&(kernel as usize));
        self.unset.remove(&(kernel as usize));
    }

    pub fn clear(&mut self) {
        self.local.clear();
        self.unset.clear();
    }
}

/// The first set of any argument of a kernel: a kernel with local memory
/// of its own is looked at when launched from now on. (A kernel launched
/// without ever setting an argument has no arguments: its arrays are
/// then not bounded, see docs/wormhole-security.md.)
///
/// # Safety
/// `kernel` is a kernel from the tenant's table.
pub unsafe fn first_set(t: &mut Tenant, kernel: *mut c_void) {
    // SAFETY: `kernel` is from the tenant's table (this function's
    // contract); NULL device: the program's only one,
    // or an error (then looked at all the same).
    let bytes = unsafe { kernel_local(kernel, std::ptr::null_mut()) };
    if bytes != Ok(0) {
        t.launches.local.entry(kernel as usize).or_default();
    }
}

/// What a set of argument `index` leaves to the launch: the size of a
/// `__local` argument, or an argument a probe set and this set did not.
pub fn arg_set(
    t: &mut Tenant,
    kernel: *mut c_void,
    index: u32,
    decl: ArgDecl,
    size: usize,
    status: i32,
    probed: bool,
) {
    let l = &mut t.launches;
    let k = kernel as usize;
    if status == CL_SUCCESS {
        if !l.unset.is_empty() {
            if let Some(u) = l.unset.get_mut(&k) {
                u.retain(|&i| i != index);
                if u.is_empty() {
                    l.unset.remove(&k);
                }
            }
        }
        if decl == ArgDecl::Local {
            l.local.entry(k).or_default().set(index, size as u64);
        }
    } else if probed {
        l.unset.entry(k).or_default().push(index);
    }
}

/// `size_t` values of a work size or offset (unaligned bytes).
///
/// # Safety
/// `p` holds `n` size_t values.
unsafe fn sizes(p: *const c_void, n: usize) -> impl Iterator<Item = usize> {
    // SAFETY: `p` holds `n` size_t values, 8 bytes each (this function's
    // contract: the decoder checked the lengths against `work_dim`); read
    // as bytes, so unaligned is fine.
    let b = unsafe { std::slice::from_raw_parts(p as *const u8, n * 8) };
    b.chunks_exact(8)
        .map(|c| usize::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
}

/// The work sizes' bounds (see the module's text). A NULL global size is
/// the library's to refuse.
///
/// # Safety
/// `offset` and `global` are NULL or hold `work_dim` size_t values.
pub unsafe fn work_sizes_ok(
    work_dim: u32,
    offset: *const c_void,
    global: *const c_void,
) -> Result<(), i32> {
    if work_dim == 0 {
        return Err(CL_INVALID_WORK_DIMENSION);
    }
    if global.is_null() {
        return Ok(());
    }
    let n = work_dim as usize;
    // SAFETY: `global` holds `work_dim` (`n`) size_t values (this
    // function's contract), as `sizes` needs.
    let items = unsafe { sizes(global, n) }.try_fold(1usize, |acc, g| acc.checked_mul(g));
    // SAFETY: the same `global`, `n` values.
    let empty = unsafe { sizes(global, n) }.any(|g| g == 0);
    if items.is_none() && !empty {
        return Err(CL_INVALID_GLOBAL_WORK_SIZE);
    }
    if !offset.is_null() {
        // SAFETY: `offset` is non-NULL here, so it holds `n` size_t values
        // too (this function's contract), as does `global`.
        let past = unsafe { sizes(offset, n).zip(sizes(global, n)) }
            .any(|(o, g)| o.checked_add(g).is_none());
        if past {
            return Err(CL_INVALID_GLOBAL_OFFSET);
        }
    }
    Ok(())
}

/// A kernel's local memory as the library counts it (its arrays and its
/// `__local` arguments) on `device`.
///
/// # Safety
/// `kernel` is a kernel from the tenant's table; `device` NULL or a
/// device.
unsafe fn kernel_local(kernel: *mut c_void, device: *mut c_void) -> Result<u64, i32> {
    // SAFETY: `kernel` is from the tenant's table and `device` NULL or a
    // device (this function's contract); `out` holds `n` bytes, the cl_ulong
    // asked for.
    super::extents::scalar_info::<u64>(|n, out| unsafe {
        ffi::clGetKernelWorkGroupInfo(
            kernel,
            device,
            CL_KERNEL_LOCAL_MEM_SIZE,
            n,
            out,
            std::ptr::null_mut(),
        )
    })
}

/// The local memory of the device `queue` runs on.
///
/// # Safety
/// `queue` is a command queue from the tenant's table.
unsafe fn device_local(l: &mut Launches, queue: *mut c_void) -> Result<(*mut c_void, u64), i32> {
    // SAFETY: `queue` is a command queue from the tenant's table (this
    // function's contract); the answer is one cl_device_id.
    let device =
        unsafe { super::info_value::<usize>(ffi::clGetCommandQueueInfo, queue, CL_QUEUE_DEVICE) }
            .ok_or(CL_OUT_OF_RESOURCES)?;
    if let Some(&(_, bytes)) = l.device_local.iter().find(|(d, _)| *d == device) {
        return Ok((device as *mut c_void, bytes));
    }
    // SAFETY: a device the library named; the answer is one cl_ulong.
    let bytes = unsafe {
        super::info_value::<u64>(
            ffi::clGetDeviceInfo,
            device as *mut c_void,
            CL_DEVICE_LOCAL_MEM_SIZE,
        )
    }
    .ok_or(CL_OUT_OF_RESOURCES)?;
    if l.device_local.len() >= MAX_DEVICES {
        l.device_local.clear();
    }
    l.device_local.push((device, bytes));
    Ok((device as *mut c_void, bytes))
}

/// What a launch of `kernel` on `queue` must not do beyond its work sizes
/// (see the module's text).
///
/// # Safety
/// `queue` and `kernel` come from the tenant's table.
pub unsafe fn kernel_ok(
    t: &mut Tenant,
    queue: *mut c_void,
    kernel: *mut c_void,
) -> Result<(), i32> {
    let l = &mut t.launches;
    if l.local.is_empty() && l.unset.is_empty() {
        return Ok(());
    }
    let k = kernel as usize;
    if l.unset.contains_key(&k) {
        return Err(CL_INVALID_KERNEL_ARGS);
    }
    let Some(args) = l.local.get(&k).map(|u| (u.total, u.fixed)) else {
        return Ok(());
    };
    // SAFETY: `queue` is from the tenant's table (this function's
    // contract), as `device_local` needs.
    let (device, limit) = unsafe { device_local(l, queue) }?;
    let (total, fixed) = args;
    if total > u128::from(limit) {
        return Err(CL_OUT_OF_RESOURCES);
    }
    let fixed = match fixed {
        Some(f) => f,
        None => {
            // The library's count is the arrays and the arguments; the
            // arguments are known (and small enough not to wrap it).
            // SAFETY: `kernel` is from the tenant's table; `device` is the
            // queue's, as the library just reported it.
            let all = unsafe { kernel_local(kernel, device) }?;
            let f = all.saturating_sub(total as u64);
            if let Some(u) = t.launches.local.get_mut(&k) {
                u.fixed = Some(f);
            }
            f
        }
    };
    if u128::from(fixed) + total > u128::from(limit) {
        return Err(CL_OUT_OF_RESOURCES);
    }
    Ok(())
}

/// The check the description names for `clEnqueueNDRangeKernel`.
///
/// # Safety
/// As for [`work_sizes_ok`] and [`kernel_ok`].
pub unsafe fn ndrange_ok(
    t: &mut Tenant,
    queue: *mut c_void,
    kernel: *mut c_void,
    work_dim: u32,
    offset: *const c_void,
    global: *const c_void,
) -> Result<(), i32> {
    if work_dim > 3 && work_dim > max_dims(queue) {
        // Before the sizes, which are the library's to read only for the
        // dimensions the device has.
        return Err(CL_INVALID_WORK_DIMENSION);
    }
    // SAFETY: `offset` and `global` are NULL or `work_dim` size_t values
    // (the decoder's checks), `queue` and `kernel` from the tenant's table:
    // what `work_sizes_ok` and `kernel_ok` need.
    unsafe {
        work_sizes_ok(work_dim, offset, global)?;
        kernel_ok(t, queue, kernel)
    }
}

/// The most dimensions the device of `queue` takes (3 when it cannot be
/// told: every device has at least 3). Asked only of a launch of more.
fn max_dims(queue: *mut c_void) -> u32 {
    const CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS: u32 = 0x1003;
    // SAFETY: a queue from the table; the answer is one cl_device_id.
    let device =
        unsafe { super::info_value::<usize>(ffi::clGetCommandQueueInfo, queue, CL_QUEUE_DEVICE) };
    device
        .and_then(|d| {
            // SAFETY: a device the library named; the answer is a cl_uint.
            unsafe {
                super::info_value::<u32>(
                    ffi::clGetDeviceInfo,
                    d as *mut c_void,
                    CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS,
                )
            }
        })
        .unwrap_or(3)
}

/// A clone has its source's arguments, so it takes what the tenant knows
/// of them too.
///
/// # Safety
/// As for `clCloneKernel`; `source` comes from the tenant's table.
pub unsafe fn clCloneKernel(t: &mut Tenant, source: *mut c_void, err: *mut i32) -> *mut c_void {
    // SAFETY: `source` is a kernel from the tenant's table (NULL refused
    // by the decoder); `err` is the decoder's local.
    let k = unsafe { ffi::clCloneKernel(source, err) };
    if !k.is_null() {
        let (from, to) = (source as usize, k as usize);
        let l = &mut t.launches;
        if let Some(u) = l.local.get(&from).cloned() {
            l.local.insert(to, u);
        }
        if let Some(u) = l.unset.get(&from).cloned() {
            l.unset.insert(to, u);
        }
        t.arg_decls.copy(source, k);
        t.arg_objects.cloned(source, k);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sz(v: &[usize]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn work_sizes_past_size_t_are_refused() {
        let ok = |dim: u32, off: Option<&[usize]>, g: &[usize]| {
            let (o, g) = (off.map(sz), sz(g));
            let op = o.as_ref().map_or(std::ptr::null(), |o| o.as_ptr().cast());
            // SAFETY: both hold `dim` values.
            unsafe { work_sizes_ok(dim, op, g.as_ptr().cast()) }
        };
        let max = usize::MAX;
        assert_eq!(
            ok(3, None, &[max, max, max]),
            Err(CL_INVALID_GLOBAL_WORK_SIZE)
        );
        assert_eq!(
            ok(3, None, &[1 << 32, 1 << 32, 1 << 32]),
            Err(CL_INVALID_GLOBAL_WORK_SIZE)
        );
        assert_eq!(
            ok(2, None, &[1 << 33, 1 << 31]),
            Err(CL_INVALID_GLOBAL_WORK_SIZE)
        );
        assert_eq!(ok(3, None, &[max, 1, 1]), Ok(()), "one less than overflow");
        assert_eq!(ok(3, None, &[1 << 40, 1 << 40, 0]), Ok(()), "no work-items");
        // The specification bounds offset + size (not the last id) by
        // SIZE_MAX.
        assert_eq!(ok(1, Some(&[max - 1]), &[1]), Ok(()));
        assert_eq!(ok(1, Some(&[max]), &[1]), Err(CL_INVALID_GLOBAL_OFFSET));
        assert_eq!(
            ok(3, Some(&[0, 0, max]), &[1, 1, 2]),
            Err(CL_INVALID_GLOBAL_OFFSET)
        );
        assert_eq!(ok(0, None, &[]), Err(CL_INVALID_WORK_DIMENSION));
        // SAFETY: NULL sizes are not read.
        let none = unsafe { work_sizes_ok(1, std::ptr::null(), std::ptr::null()) };
        assert_eq!(none, Ok(()));
    }

    #[test]
    fn local_sizes_add_up_without_wrapping() {
        let mut u = LocalUse::default();
        u.set(1, u64::MAX);
        u.set(3, u64::MAX);
        assert_eq!(u.total, 2 * u128::from(u64::MAX));
        u.set(1, 16);
        u.set(3, 32);
        assert_eq!(u.total, 48);
    }
}
