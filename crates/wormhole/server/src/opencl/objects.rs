#![allow(non_snake_case)]
//! Object creation the server checks or redirects before the library sees
//! it: buffers under a memory quota or in the shared arena, queues with
//! properties the device cannot honour.

use std::ffi::c_void;

use wormhole_opencl_api::{
    CL_INVALID_BUFFER_SIZE, CL_INVALID_QUEUE_PROPERTIES, CL_INVALID_VALUE,
    CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_SUCCESS,
};

use super::extents::scalar_info;
use super::ffi;
use super::tenant::Tenant;

/// # Safety
/// As for `clCreateBuffer`; `host_ptr` is NULL or the request's copy of
/// the initial contents, `size` bytes.
pub unsafe fn clCreateBuffer(
    tenant: &mut Tenant,
    ctx: *mut c_void,
    flags: u64,
    size: usize,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // Refused before the library allocates (the charge itself is made when
    // the object is recorded, for every kind of memory object), as by a
    // device of the quota's size: larger than it can ever hold, or than it
    // has left.
    if let Some(quota) = &tenant.memory {
        let code = if size as u64 > quota.limit() {
            CL_INVALID_BUFFER_SIZE
        } else if !quota.fits(size as u64) {
            CL_MEM_OBJECT_ALLOCATION_FAILURE
        } else {
            CL_SUCCESS
        };
        if code != CL_SUCCESS {
            // SAFETY: `err` is the decoder's local.
            unsafe { *err = code };
            return std::ptr::null_mut();
        }
    }
    if let Some(sb) = &tenant.shared {
        // SAFETY: `ctx` is from the tenant's table (NULL refused by the
        // decoder); `host_ptr` is NULL or the decoder's copy of the request's
        // `size` bytes (`custom::host_ptr`), as `shared::create` requires.
        if let Some(mem) = unsafe { super::shared::create(sb, ctx, flags, size, host_ptr) } {
            // SAFETY: `err` is the decoder's local.
            unsafe { *err = CL_SUCCESS };
            return mem;
        }
    }
    // SAFETY: `ctx` is from the tenant's table; `host_ptr` is NULL or a
    // server-owned copy of `size` bytes (`custom::host_ptr` checked the
    // length), and `host_flags` makes USE_HOST_PTR a copy, so the library
    // keeps no pointer into the request; `err` is the decoder's local.
    unsafe { ffi::clCreateBuffer(ctx, super::host_flags(flags), size, host_ptr, err) }
}

/// PoCL aborts the process when asked for a device-side queue it does not
/// implement (found with piglit's `cl-api-create-command-queue`), which
/// would end the tenant. Where the device has no on-device queues such
/// properties get the API's error instead: `CL_INVALID_QUEUE_PROPERTIES`
/// for valid bits the device does not support, `CL_INVALID_VALUE` when
/// unknown bits come with them. A NULL or other invalid device is left to
/// the library.
///
/// # Safety
/// `device` is NULL or a device from the table.
pub(crate) unsafe fn queue_supported(device: *mut c_void, props: u64) -> Result<(), i32> {
    const CL_QUEUE_ON_DEVICE: u64 = 1 << 2;
    const KNOWN: u64 = 0xF;
    const CL_DEVICE_MAX_ON_DEVICE_QUEUES: u32 = 0x1051;
    if props & CL_QUEUE_ON_DEVICE == 0 || device.is_null() {
        return Ok(());
    }
    // SAFETY: `device` is non-NULL (checked above) and from the tenant's
    // table (the `check=` clause passes the decoded handle); `out` holds
    // `n` bytes, the size of the cl_uint asked for.
    let queues = scalar_info::<u32>(|n, out| unsafe {
        ffi::clGetDeviceInfo(
            device,
            CL_DEVICE_MAX_ON_DEVICE_QUEUES,
            n,
            out,
            std::ptr::null_mut(),
        )
    });
    match queues {
        // No on-device queues, or a device too old to say.
        Ok(0) | Err(CL_INVALID_VALUE) if props & !KNOWN != 0 => Err(CL_INVALID_VALUE),
        Ok(0) | Err(CL_INVALID_VALUE) => Err(CL_INVALID_QUEUE_PROPERTIES),
        _ => Ok(()),
    }
}
