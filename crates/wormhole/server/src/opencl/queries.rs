#![allow(non_snake_case)]
//! Info queries whose answers the server rewrites or assembles: the
//! platform list, extensions the client cannot forward, device limits under
//! a memory quota, memory flags of the shared arena, program binaries.

use std::ffi::c_void;

use wormhole_opencl_api::{
    CL_DEVICE_GLOBAL_MEM_SIZE, CL_INVALID_VALUE, CL_PROGRAM_BINARIES, CL_PROGRAM_BINARY_SIZES,
    CL_PROGRAM_NUM_DEVICES, CL_SUCCESS,
};

use super::ffi;
use super::tenant::{alloc_zeroed, Tenant};

/// # Safety
/// Pointer arguments as for `clGetPlatformIDs`.
pub unsafe fn clGetPlatformIDs(
    tenant: &mut Tenant,
    num_entries: u32,
    platforms: *mut *mut c_void,
    num: *mut u32,
) -> i32 {
    if (num_entries == 0 && !platforms.is_null()) || (platforms.is_null() && num.is_null()) {
        return CL_INVALID_VALUE;
    }
    if !platforms.is_null() {
        for (i, platform) in tenant
            .platforms
            .iter()
            .take(num_entries as usize)
            .enumerate()
        {
            // SAFETY: `platforms` is the decoder's `out_handles` vector of
            // `num_entries` handles; `take` stops at that many.
            unsafe { *platforms.add(i) = *platform };
        }
    }
    if !num.is_null() {
        // SAFETY: non-NULL, so the decoder's cl_uint local.
        unsafe { *num = tenant.platforms.len() as u32 };
    }
    CL_SUCCESS
}

/// Extensions whose entry points are not forwarded: offering them would
/// promise functions that the client cannot provide.
const UNFORWARDED_EXTENSIONS: &[&str] = &[
    "cl_khr_command_buffer",
    "cl_khr_command_buffer_mutable_dispatch",
    "cl_khr_command_buffer_multi_device",
    "cl_pocl_content_size",
    "cl_khr_il_program",
    "cl_khr_subgroups",
    "cl_khr_gl_sharing",
    "cl_khr_gl_event",
    "cl_khr_egl_image",
    "cl_khr_egl_event",
    "cl_ext_device_fission",
    "cl_khr_create_command_queue",
    "cl_khr_terminate_context",
    "cl_khr_suggested_local_work_size",
    "cl_khr_external_memory",
    "cl_khr_external_semaphore",
    "cl_khr_semaphore",
    "cl_intel_unified_shared_memory",
    "cl_arm_shared_virtual_memory",
    "cl_khr_dx9_media_sharing",
    "cl_khr_d3d10_sharing",
    "cl_khr_d3d11_sharing",
];

const CL_PLATFORM_EXTENSIONS: u32 = 0x0904;
const CL_PLATFORM_EXTENSIONS_WITH_VERSION: u32 = 0x0907;
const CL_DEVICE_EXTENSIONS: u32 = 0x1030;
const CL_DEVICE_EXTENSIONS_WITH_VERSION: u32 = 0x1060;
/// `cl_name_version`: a 4-byte version and a 64-byte name.
const NAME_VERSION_LEN: usize = 68;

fn keep_extension(name: &[u8]) -> bool {
    let name = name.split(|&b| b == 0).next().unwrap_or(&[]);
    !UNFORWARDED_EXTENSIONS.iter().any(|x| x.as_bytes() == name)
}

/// A rewrite of an info query's answer, given its parameter.
type Rewrite = fn(u32, Vec<u8>) -> Vec<u8>;

fn filter_extensions(param: u32, value: Vec<u8>) -> Vec<u8> {
    match param {
        CL_PLATFORM_EXTENSIONS | CL_DEVICE_EXTENSIONS => {
            let text = value.split(|&b| b == 0).next().unwrap_or(&[]);
            let kept: Vec<&[u8]> = text
                .split(|&b| b == b' ')
                .filter(|w| !w.is_empty() && keep_extension(w))
                .collect();
            let mut out = kept.join(&b' ');
            out.push(0);
            out
        }
        _ => value
            .chunks_exact(NAME_VERSION_LEN)
            .filter(|c| keep_extension(&c[4..]))
            .flatten()
            .copied()
            .collect(),
    }
}

/// The whole value of an info query: `query(size, value, size_ret)` makes
/// the library call, with `value` NULL or holding `size` bytes and
/// `size_ret` NULL or one writable size_t. The size is asked first; a value
/// longer than `max` bytes is refused as `alloc_zeroed` refuses it. The
/// library's status where either call fails.
pub(crate) fn info_bytes(
    max: u64,
    query: impl Fn(usize, *mut c_void, *mut usize) -> i32,
) -> Result<Vec<u8>, i32> {
    let mut len = 0usize;
    let status = query(0, std::ptr::null_mut(), &mut len);
    if status != CL_SUCCESS {
        return Err(status);
    }
    let mut bytes = alloc_zeroed(len as u64, max)?;
    match query(len, bytes.as_mut_ptr().cast(), std::ptr::null_mut()) {
        CL_SUCCESS => Ok(bytes),
        status => Err(status),
    }
}

/// Runs an info query whose value we rewrite, honouring the API's size
/// rules (CL_INVALID_VALUE when the caller's buffer is too small).
///
/// # Safety
/// `value` is NULL or holds `size` bytes; `size_ret` is NULL or a size_t.
unsafe fn rewritten_query(
    query: impl Fn(usize, *mut c_void, *mut usize) -> i32,
    rewrite: impl Fn(Vec<u8>) -> Vec<u8>,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    let out = match info_bytes(1 << 24, query) {
        Ok(full) => rewrite(full),
        Err(status) => return status,
    };
    if !value.is_null() {
        if size < out.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: `value` is non-NULL, so it holds `size` bytes (this
        // function's contract), and `size` >= out.len() was checked above.
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), value as *mut u8, out.len()) };
    }
    if !size_ret.is_null() {
        // SAFETY: non-NULL, so a size_t (this function's contract).
        unsafe { *size_ret = out.len() };
    }
    CL_SUCCESS
}

/// # Safety
/// As for `clGetPlatformInfo`.
pub unsafe fn clGetPlatformInfo(
    _t: &mut Tenant,
    platform: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // A NULL platform would mean "the default platform" to the loader; the
    // client always names one, so refuse rather than guess.
    if platform.is_null() {
        return wormhole_opencl_api::CL_INVALID_PLATFORM;
    }
    if matches!(
        param,
        CL_PLATFORM_EXTENSIONS | CL_PLATFORM_EXTENSIONS_WITH_VERSION
    ) {
        // SAFETY: `platform` is non-NULL and from the tenant's table;
        // `rewritten_query` passes buffers of the size it names, or NULL.
        let query = |n, v, r| unsafe { ffi::clGetPlatformInfo(platform, param, n, v, r) };
        let rewrite = |v| filter_extensions(param, v);
        // SAFETY: `value` is NULL or the decoder's `out_buf` of `size` bytes
        // and `size_ret` NULL or its size_t local, as `rewritten_query`
        // requires.
        return unsafe { rewritten_query(query, rewrite, size, value, size_ret) };
    }
    // SAFETY: `platform` is non-NULL and from the tenant's table;
    // `value` is NULL or the decoder's `out_buf` of `size` bytes and
    // `size_ret` NULL or its size_t local, so the library writes only into
    // server memory of the size it is told.
    unsafe { ffi::clGetPlatformInfo(platform, param, size, value, size_ret) }
}

const CL_DEVICE_EXECUTION_CAPABILITIES: u32 = 0x1029;
const CL_EXEC_NATIVE_KERNEL: u64 = 1 << 1;
const CL_DEVICE_SVM_CAPABILITIES: u32 = 0x1053;
const CL_DEVICE_MAX_MEM_ALLOC_SIZE: u32 = 0x1010;

/// # Safety
/// As for `clGetDeviceInfo`.
pub unsafe fn clGetDeviceInfo(
    tenant: &mut Tenant,
    device: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // The answers that name what is offered, rewritten to leave out what is not.
    let rewrite: Option<Rewrite> = match param {
        CL_DEVICE_EXTENSIONS | CL_DEVICE_EXTENSIONS_WITH_VERSION => Some(filter_extensions),
        super::offered::CL_DEVICE_OPENCL_C_FEATURES => Some(|_, v| super::offered::features(v)),
        _ => None,
    };
    if let Some(rewrite) = rewrite {
        // SAFETY: `device` is from the tenant's table (the decoder refused
        // NULL); `rewritten_query` passes buffers of the size it names.
        let query = |n, v, r| unsafe { ffi::clGetDeviceInfo(device, param, n, v, r) };
        let rewrite = |v| rewrite(param, v);
        // SAFETY: `value` is NULL or the decoder's `out_buf` of `size` bytes
        // and `size_ret` NULL or its size_t local, as `rewritten_query`
        // requires.
        return unsafe { rewritten_query(query, rewrite, size, value, size_ret) };
    }
    // SAFETY: `device` is from the tenant's table;
    // `value` is NULL or the decoder's `out_buf` of `size` bytes and
    // `size_ret` NULL or its size_t local, so the library writes only into
    // server memory of the size it is told.
    let status = unsafe { ffi::clGetDeviceInfo(device, param, size, value, size_ret) };
    if status == CL_SUCCESS {
        // SAFETY: the library wrote its answer into `value`'s `size` bytes.
        unsafe { super::offered::withhold(param, value, size) };
    }
    if status != CL_SUCCESS || value.is_null() || size < 8 {
        return status;
    }
    // Native kernels run host functions of the client, and SVM shares the
    // client's address space: neither can be forwarded, so neither is offered.
    // A tenant with a memory quota is shown a device no larger than it.
    // SAFETY: the library wrote a cl_bitfield or cl_ulong (8 bytes) into
    // `value`; `read_unaligned`/`write_unaligned` because the buffer is bytes.
    unsafe {
        let word = value as *mut u64;
        match (param, &tenant.memory) {
            (CL_DEVICE_EXECUTION_CAPABILITIES, _) => {
                word.write_unaligned(word.read_unaligned() & !CL_EXEC_NATIVE_KERNEL)
            }
            (CL_DEVICE_SVM_CAPABILITIES, _) => word.write_unaligned(0),
            (CL_DEVICE_GLOBAL_MEM_SIZE | CL_DEVICE_MAX_MEM_ALLOC_SIZE, Some(quota)) => {
                word.write_unaligned(quota.clamp(word.read_unaligned()))
            }
            _ => {}
        }
    }
    status
}

/// # Safety
/// As for `clGetMemObjectInfo`.
pub unsafe fn clGetMemObjectInfo(
    tenant: &mut Tenant,
    mem: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // SAFETY: `mem` is from the tenant's table;
    // `value` is NULL or the decoder's `out_buf` of `size` bytes and
    // `size_ret` NULL or its size_t local, so the library writes only into
    // server memory of the size it is told.
    let status = unsafe { ffi::clGetMemObjectInfo(mem, param, size, value, size_ret) };
    if let (Some(sb), CL_SUCCESS) = (&tenant.shared, status) {
        // SAFETY: the library wrote up to `size` bytes into `value`.
        unsafe { super::shared::fix_flags(sb, mem, param, size, value) };
    }
    status
}

/// # Safety
/// As for `clGetProgramInfo`.
pub unsafe fn clGetProgramInfo(
    _t: &mut Tenant,
    program: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // The value of CL_PROGRAM_BINARIES is an array of the caller's
    // pointers; the client asks for each binary with whGetProgramBinary.
    if param == CL_PROGRAM_BINARIES && !value.is_null() {
        return CL_INVALID_VALUE;
    }
    // SAFETY: `program` is from the tenant's table;
    // `value` is NULL or the decoder's `out_buf` of `size` bytes and
    // `size_ret` NULL or its size_t local, so the library writes only into
    // server memory of the size it is told (CL_PROGRAM_BINARIES, whose
    // value holds pointers, was refused above).
    unsafe { ffi::clGetProgramInfo(program, param, size, value, size_ret) }
}

fn program_info_vec<T: Copy + Default>(
    program: *mut c_void,
    param: u32,
    count: usize,
) -> Result<Vec<T>, i32> {
    let mut values = vec![T::default(); count];
    // SAFETY: `values` has room for `count` values of T, the size passed;
    // `program` is from the tenant's table.
    let status = unsafe {
        ffi::clGetProgramInfo(
            program,
            param,
            count * std::mem::size_of::<T>(),
            values.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if status == CL_SUCCESS {
        Ok(values)
    } else {
        Err(status)
    }
}

/// # Safety
/// `binary` is NULL or holds `size` bytes.
pub unsafe fn whGetProgramBinary(
    _t: &mut Tenant,
    program: *mut c_void,
    index: u32,
    size: usize,
    binary: *mut c_void,
) -> i32 {
    let run = || -> Result<(), i32> {
        let devices = program_info_vec::<u32>(program, CL_PROGRAM_NUM_DEVICES, 1)?[0] as usize;
        let sizes = program_info_vec::<usize>(program, CL_PROGRAM_BINARY_SIZES, devices)?;
        let want = *sizes.get(index as usize).ok_or(CL_INVALID_VALUE)?;
        if binary.is_null() || size < want {
            return Err(CL_INVALID_VALUE);
        }
        let mut bufs: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&len| alloc_zeroed(len as u64, 1 << 32))
            .collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
        // SAFETY: one buffer per device, each of the size the library reported.
        let status = unsafe {
            ffi::clGetProgramInfo(
                program,
                CL_PROGRAM_BINARIES,
                devices * 8,
                ptrs.as_mut_ptr().cast(),
                std::ptr::null_mut(),
            )
        };
        if status != CL_SUCCESS {
            return Err(status);
        }
        // SAFETY: `binary` holds at least `want` bytes (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(bufs[index as usize].as_ptr(), binary as *mut u8, want)
        };
        Ok(())
    };
    match run() {
        Ok(()) => CL_SUCCESS,
        Err(error) => error,
    }
}
