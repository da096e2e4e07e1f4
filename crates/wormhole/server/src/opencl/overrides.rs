#![allow(non_snake_case)]
//! Server-side overrides: calls that cannot go to the library as the client
//! made them. Each has the C signature with the tenant in front.

use std::ffi::c_void;

use wormhole_opencl_api::{
    image_window, rect_extent, triple, Kind, CL_IMAGE_ELEMENT_SIZE, CL_INVALID_BUFFER_SIZE,
    CL_INVALID_MEM_OBJECT, CL_INVALID_QUEUE_PROPERTIES, CL_INVALID_VALUE,
    CL_MAP_WRITE_INVALIDATE_REGION, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_SUCCESS,
};
use wormhole_wire::{Decoder, Encoder};

pub use super::args::clSetKernelArg;
pub use super::builds::{
    whBuildProgramResult, whBuildProgramStart, whCompileProgramStart, whLinkProgramResult,
    whLinkProgramStart,
};
use super::ffi;
pub use super::includes::d_whIncludeDir;
pub use super::launch::clCloneKernel;
pub use super::pending_maps::d_whFetchMapping;
pub use super::programs::{
    clCreateProgramWithBinary, clCreateProgramWithSource, clGetKernelArgInfo,
    clGetProgramBuildInfo, clLinkProgram,
};
use wormhole_transport::{Channel, TransportError};

use super::tenant::{alloc_zeroed, bad, check_count, opt_vec_ptr, NewSlot, Tenant};

const CL_TRUE: u32 = 1;

/// A buffer or image region mapped for a client.
pub struct Mapping {
    mem: usize,
    pub(super) ptr: usize,
    pub(super) len: u64,
}

impl Mapping {
    /// The memory object mapped (the library's handle).
    pub fn mem(&self) -> usize {
        self.mem
    }
}

/// # Safety
/// Pointer arguments as for `clGetPlatformIDs`.
pub unsafe fn clGetPlatformIDs(
    t: &mut Tenant,
    n: u32,
    platforms: *mut *mut c_void,
    num: *mut u32,
) -> i32 {
    if (n == 0 && !platforms.is_null()) || (platforms.is_null() && num.is_null()) {
        return CL_INVALID_VALUE;
    }
    if !platforms.is_null() {
        for (i, p) in t.platforms.iter().take(n as usize).enumerate() {
            // SAFETY: the caller provides room for `n` handles.
            unsafe { *platforms.add(i) = *p };
        }
    }
    if !num.is_null() {
        // SAFETY: the caller provides a cl_uint.
        unsafe { *num = t.platforms.len() as u32 };
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

fn filter_extensions(param: u32, v: Vec<u8>) -> Vec<u8> {
    match param {
        CL_PLATFORM_EXTENSIONS | CL_DEVICE_EXTENSIONS => {
            let text = v.split(|&b| b == 0).next().unwrap_or(&[]);
            let kept: Vec<&[u8]> = text
                .split(|&b| b == b' ')
                .filter(|w| !w.is_empty() && keep_extension(w))
                .collect();
            let mut out = kept.join(&b' ');
            out.push(0);
            out
        }
        _ => v
            .chunks_exact(NAME_VERSION_LEN)
            .filter(|c| keep_extension(&c[4..]))
            .flatten()
            .copied()
            .collect(),
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
    let mut n = 0usize;
    let s = query(0, std::ptr::null_mut(), &mut n);
    if s != CL_SUCCESS {
        return s;
    }
    let mut full = match alloc_zeroed(n as u64, 1 << 24) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let s = query(n, full.as_mut_ptr().cast(), std::ptr::null_mut());
    if s != CL_SUCCESS {
        return s;
    }
    let out = rewrite(std::mem::take(&mut full));
    if !value.is_null() {
        if size < out.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: `value` holds `size` >= out.len() bytes (caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), value as *mut u8, out.len()) };
    }
    if !size_ret.is_null() {
        // SAFETY: caller's contract.
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
        // SAFETY: the queries write at most `n` bytes into buffers of `n`.
        let q = |n, v, r| unsafe { ffi::clGetPlatformInfo(platform, param, n, v, r) };
        // SAFETY: forwarded contract.
        return unsafe {
            rewritten_query(q, |v| filter_extensions(param, v), size, value, size_ret)
        };
    }
    // SAFETY: forwarded as given; buffers are server-owned and sized.
    unsafe { ffi::clGetPlatformInfo(platform, param, size, value, size_ret) }
}

const CL_DEVICE_EXECUTION_CAPABILITIES: u32 = 0x1029;
const CL_EXEC_NATIVE_KERNEL: u64 = 1 << 1;
const CL_DEVICE_SVM_CAPABILITIES: u32 = 0x1053;
const CL_DEVICE_MAX_MEM_ALLOC_SIZE: u32 = 0x1010;
const CL_DEVICE_GLOBAL_MEM_SIZE: u32 = 0x101F;

/// # Safety
/// As for `clGetDeviceInfo`.
pub unsafe fn clGetDeviceInfo(
    t: &mut Tenant,
    device: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    if matches!(
        param,
        CL_DEVICE_EXTENSIONS | CL_DEVICE_EXTENSIONS_WITH_VERSION
    ) {
        // SAFETY: the queries write at most `n` bytes into buffers of `n`.
        let q = |n, v, r| unsafe { ffi::clGetDeviceInfo(device, param, n, v, r) };
        // SAFETY: forwarded contract.
        return unsafe {
            rewritten_query(q, |v| filter_extensions(param, v), size, value, size_ret)
        };
    }
    if param == super::offered::CL_DEVICE_OPENCL_C_FEATURES {
        // SAFETY: as above.
        let q = |n, v, r| unsafe { ffi::clGetDeviceInfo(device, param, n, v, r) };
        // SAFETY: forwarded contract.
        return unsafe { rewritten_query(q, super::offered::features, size, value, size_ret) };
    }
    // SAFETY: forwarded as given; buffers are server-owned and sized.
    let s = unsafe { ffi::clGetDeviceInfo(device, param, size, value, size_ret) };
    if s == CL_SUCCESS {
        // SAFETY: the library wrote its answer into `value`'s `size` bytes.
        unsafe { super::offered::withhold(param, value, size) };
    }
    if s != CL_SUCCESS || value.is_null() || size < 8 {
        return s;
    }
    // Native kernels run host functions of the client, and SVM shares the
    // client's address space: neither can be forwarded, so neither is offered.
    // A tenant with a memory quota is shown a device no larger than it.
    // SAFETY: the library wrote a cl_bitfield or cl_ulong (8 bytes) into
    // `value`; `read_unaligned`/`write_unaligned` because the buffer is bytes.
    unsafe {
        let v = value as *mut u64;
        match (param, &t.memory) {
            (CL_DEVICE_EXECUTION_CAPABILITIES, _) => {
                v.write_unaligned(v.read_unaligned() & !CL_EXEC_NATIVE_KERNEL)
            }
            (CL_DEVICE_SVM_CAPABILITIES, _) => v.write_unaligned(0),
            (CL_DEVICE_GLOBAL_MEM_SIZE | CL_DEVICE_MAX_MEM_ALLOC_SIZE, Some(q)) => {
                v.write_unaligned(q.clamp(v.read_unaligned()))
            }
            _ => {}
        }
    }
    s
}

/// # Safety
/// As for `clCreateBuffer`; `host_ptr` is NULL or the request's copy of
/// the initial contents, `size` bytes.
pub unsafe fn clCreateBuffer(
    t: &mut Tenant,
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
    if let Some(q) = &t.memory {
        let code = if size as u64 > q.limit() {
            CL_INVALID_BUFFER_SIZE
        } else if !q.fits(size as u64) {
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
    if let Some(sb) = &t.shared {
        // SAFETY: forwarded contract.
        if let Some(m) = unsafe { super::shared::create(sb, ctx, flags, size, host_ptr) } {
            // SAFETY: `err` is the decoder's local.
            unsafe { *err = CL_SUCCESS };
            return m;
        }
    }
    // SAFETY: forwarded contract.
    unsafe { ffi::clCreateBuffer(ctx, super::host_flags(flags), size, host_ptr, err) }
}

/// # Safety
/// As for `clGetMemObjectInfo`.
pub unsafe fn clGetMemObjectInfo(
    t: &mut Tenant,
    mem: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    // SAFETY: forwarded contract.
    let s = unsafe { ffi::clGetMemObjectInfo(mem, param, size, value, size_ret) };
    if let (Some(sb), CL_SUCCESS) = (&t.shared, s) {
        // SAFETY: the library wrote up to `size` bytes into `value`.
        unsafe { super::shared::fix_flags(sb, mem, param, size, value) };
    }
    s
}

const CL_PROGRAM_NUM_DEVICES: u32 = 0x1162;
const CL_PROGRAM_BINARY_SIZES: u32 = 0x1165;
const CL_PROGRAM_BINARIES: u32 = 0x1166;

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
    // SAFETY: forwarded as given; buffers are server-owned and sized.
    unsafe { ffi::clGetProgramInfo(program, param, size, value, size_ret) }
}

fn program_info_vec<T: Copy + Default>(
    program: *mut c_void,
    param: u32,
    n: usize,
) -> Result<Vec<T>, i32> {
    let mut v = vec![T::default(); n];
    // SAFETY: `v` has room for `n` values of T, the size passed.
    let s = unsafe {
        ffi::clGetProgramInfo(
            program,
            param,
            n * std::mem::size_of::<T>(),
            v.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if s == CL_SUCCESS {
        Ok(v)
    } else {
        Err(s)
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
        let n = program_info_vec::<u32>(program, CL_PROGRAM_NUM_DEVICES, 1)?[0] as usize;
        let sizes = program_info_vec::<usize>(program, CL_PROGRAM_BINARY_SIZES, n)?;
        let want = *sizes.get(index as usize).ok_or(CL_INVALID_VALUE)?;
        if binary.is_null() || size < want {
            return Err(CL_INVALID_VALUE);
        }
        let mut bufs: Vec<Vec<u8>> = sizes
            .iter()
            .map(|&s| alloc_zeroed(s as u64, 1 << 32))
            .collect::<Result<_, _>>()?;
        let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
        // SAFETY: one buffer per device, each of the size the library reported.
        let s = unsafe {
            ffi::clGetProgramInfo(
                program,
                CL_PROGRAM_BINARIES,
                n * 8,
                ptrs.as_mut_ptr().cast(),
                std::ptr::null_mut(),
            )
        };
        if s != CL_SUCCESS {
            return Err(s);
        }
        // SAFETY: `binary` holds at least `want` bytes (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(bufs[index as usize].as_ptr(), binary as *mut u8, want)
        };
        Ok(())
    };
    match run() {
        Ok(()) => CL_SUCCESS,
        Err(e) => e,
    }
}

const CL_MEM_SIZE: u32 = 0x1102;

/// Reads three size_t values (an origin or a region) from a request.
///
/// # Safety
/// `p` is NULL or points to 24 bytes (the decoder checked the length).
unsafe fn triple_at(p: *const c_void) -> Option<[u64; 3]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract; the bytes may be unaligned.
    let b = unsafe { std::slice::from_raw_parts(p as *const u8, 24) };
    triple(b)
}

/// The library does not bound a rectangle's far corner by the buffer's
/// size (found by fuzzing: a rectangular read past the end of a buffer
/// copied from beyond its allocation), so it is checked here: the last
/// byte the rectangle touches, `origin` and `region` under the buffer's
/// pitches, must lie inside the buffer. A NULL origin or region is refused
/// as the API says.
///
/// # Safety
/// `buf` is a memory object from the table; `origin` and `region` are NULL
/// or 24 bytes each.
pub(crate) unsafe fn buffer_rect_ok(
    buf: *mut c_void,
    origin: *const c_void,
    region: *const c_void,
    row: usize,
    slice: usize,
) -> Result<(), i32> {
    // SAFETY: the caller's contract.
    let (o, r) = unsafe { (triple_at(origin), triple_at(region)) };
    let (o, r) = (o.ok_or(CL_INVALID_VALUE)?, r.ok_or(CL_INVALID_VALUE)?);
    let end = rect_extent(r, 1, row as u64, slice as u64)
        .and_then(|ext| ext.end(o, 1))
        .ok_or(CL_INVALID_VALUE)?;
    let size = mem_size(buf)?;
    if end > size {
        return Err(CL_INVALID_VALUE);
    }
    Ok(())
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
    // SAFETY: a device from the table (the caller's contract); `out` holds
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

/// One fixed-size value from a library info query: `query(size, out)` makes
/// the call with `out` holding `size` bytes. Its status if it failed.
pub(crate) fn scalar_info<T: Default>(
    query: impl FnOnce(usize, *mut c_void) -> i32,
) -> Result<T, i32> {
    let mut v = T::default();
    match query(std::mem::size_of::<T>(), &mut v as *mut T as *mut c_void) {
        CL_SUCCESS => Ok(v),
        s => Err(s),
    }
}

/// Queries one size_t property of an image.
fn image_size(img: *mut c_void, param: u32) -> Result<u64, i32> {
    // SAFETY: a memory object from the table; `out` holds `n` bytes, the
    // size of the size_t asked for.
    scalar_info::<usize>(|n, out| unsafe {
        ffi::clGetImageInfo(img, param, n, out, std::ptr::null_mut())
    })
    .map(|v| v as u64)
    .map_err(|_| CL_INVALID_MEM_OBJECT)
}

fn mem_type(mem: *mut c_void) -> Result<u32, i32> {
    // SAFETY: a memory object from the table; `out` holds `n` bytes, the
    // size of the cl_mem_object_type asked for.
    scalar_info::<u32>(|n, out| unsafe {
        ffi::clGetMemObjectInfo(mem, CL_MEM_TYPE, n, out, std::ptr::null_mut())
    })
    .map_err(|_| CL_INVALID_MEM_OBJECT)
}

/// The library does not bound every image transfer by the image (found by
/// fuzzing: an image-to-buffer copy read past the image's allocation), so
/// each image box is checked here: `origin + region` within the image's
/// extent on every axis (array layers count as an axis), no empty region.
/// Returns the bytes per element.
///
/// # Safety
/// `img` is a memory object from the table; `origin` and `region` are NULL
/// or 24 bytes each.
pub(crate) unsafe fn image_box_ok(
    img: *mut c_void,
    origin: *const c_void,
    region: *const c_void,
) -> Result<u64, i32> {
    // SAFETY: the caller's contract.
    let (o, r) = unsafe { (triple_at(origin), triple_at(region)) };
    let (o, r) = (o.ok_or(CL_INVALID_VALUE)?, r.ok_or(CL_INVALID_VALUE)?);
    let w = image_size(img, CL_IMAGE_WIDTH)?;
    let h = image_size(img, CL_IMAGE_HEIGHT)?.max(1);
    let d = image_size(img, CL_IMAGE_DEPTH)?.max(1);
    let layers = image_size(img, CL_IMAGE_ARRAY_SIZE)?.max(1);
    let dims = match mem_type(img)? {
        CL_MEM_OBJECT_BUFFER => return Err(CL_INVALID_MEM_OBJECT),
        CL_MEM_OBJECT_IMAGE1D_ARRAY => [w, layers, 1],
        CL_MEM_OBJECT_IMAGE2D_ARRAY => [w, h, layers],
        _ => [w, h, d],
    };
    for i in 0..3 {
        let end = o[i].checked_add(r[i]).ok_or(CL_INVALID_VALUE)?;
        if r[i] == 0 || end > dims[i] {
            return Err(CL_INVALID_VALUE);
        }
    }
    image_size(img, CL_IMAGE_ELEMENT_SIZE)
}

/// A memory object's size in bytes, as the library knows it.
fn mem_size(mem: *mut c_void) -> Result<u64, i32> {
    // SAFETY: a memory object from the table; `out` holds `n` bytes, the
    // size of the size_t asked for.
    scalar_info::<usize>(|n, out| unsafe {
        ffi::clGetMemObjectInfo(mem, CL_MEM_SIZE, n, out, std::ptr::null_mut())
    })
    .map(|v| v as u64)
}

/// A span of a buffer: `offset + bytes` within its size, and a buffer.
fn buffer_span_ok(buf: *mut c_void, offset: u64, bytes: u64) -> Result<(), i32> {
    if mem_type(buf)? != CL_MEM_OBJECT_BUFFER {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    let size = mem_size(buf)?;
    match offset.checked_add(bytes) {
        Some(end) if end <= size => Ok(()),
        _ => Err(CL_INVALID_VALUE),
    }
}

/// A copy between an image box and a buffer span: the box within the
/// image, the span (`offset` and the box's bytes) within the buffer.
///
/// # Safety
/// As for [`image_box_ok`]; `buf` is a memory object from the table.
pub(crate) unsafe fn image_span_ok(
    img: *mut c_void,
    origin: *const c_void,
    region: *const c_void,
    buf: *mut c_void,
    offset: usize,
) -> Result<(), i32> {
    // SAFETY: the caller's contract.
    let elem = unsafe { image_box_ok(img, origin, region) }?;
    // SAFETY: `region` was checked non-NULL by `image_box_ok`.
    let bytes = unsafe { box_bytes(region, elem) }?;
    buffer_span_ok(buf, offset as u64, bytes)
}

/// A value the API requires (a fill colour, say) that the client sent NULL.
///
/// # Safety
/// None: `unsafe` only to share the form of the other checks.
pub(crate) unsafe fn present(v: Option<&[u8]>) -> Result<(), i32> {
    v.map(|_| ()).ok_or(CL_INVALID_VALUE)
}

/// Bytes in an image box of `region` elements of `elem` bytes.
///
/// # Safety
/// `region` is 24 bytes (checked non-NULL by [`image_box_ok`] first).
unsafe fn box_bytes(region: *const c_void, elem: u64) -> Result<u64, i32> {
    // SAFETY: the caller's contract.
    let r = unsafe { triple_at(region) }.ok_or(CL_INVALID_VALUE)?;
    r.iter()
        .try_fold(elem, |acc, &x| acc.checked_mul(x))
        .ok_or(CL_INVALID_VALUE)
}

/// Unmaps whatever the client left mapped, through `queue` (the harness's
/// teardown; a tenant process just exits). Mappings of objects in another
/// context fail to unmap here and are forgotten.
///
/// # Safety
/// `queue` is a live command queue.
pub unsafe fn unmap_all(t: &mut Tenant, queue: *mut c_void) {
    for (_, m) in t.mappings.drain() {
        // SAFETY: `m.ptr` is the pointer the library returned when mapping
        // `m.mem`, which the mapping holds a reference on.
        unsafe {
            ffi::clEnqueueUnmapMemObject(
                queue,
                m.mem as *mut c_void,
                m.ptr as *mut c_void,
                0,
                std::ptr::null(),
                std::ptr::null_mut(),
            );
        }
        // SAFETY: the mapping's own reference, taken when it was made.
        unsafe { super::release_real(Kind::Mem, m.mem as *mut c_void) };
    }
    // SAFETY: the caller's contract.
    unsafe { ffi::clFinish(queue) };
}

const CL_INVALID_EVENT_WAIT_LIST: i32 = -57;
const CL_MEM_TYPE: u32 = 0x1100;
const CL_MEM_OBJECT_BUFFER: u32 = 0x10F0;
const CL_MEM_OBJECT_IMAGE2D_ARRAY: u32 = 0x10F3;
const CL_MEM_OBJECT_IMAGE1D_ARRAY: u32 = 0x10F5;
const CL_IMAGE_WIDTH: u32 = 0x1114;
const CL_IMAGE_HEIGHT: u32 = 0x1115;
const CL_IMAGE_DEPTH: u32 = 0x1116;
const CL_IMAGE_ARRAY_SIZE: u32 = 0x1117;

/// The tail every enqueue shares: the wait list's length and events, and
/// the slot for the command's event.
fn wait_list_and_event(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
) -> Result<(u32, Option<Vec<*mut c_void>>, NewSlot), i32> {
    let n = d.u32().map_err(bad)?;
    let wl = t.handles(d, Kind::Event, CL_INVALID_EVENT_WAIT_LIST)?;
    check_count(wl.as_deref(), n as u64, CL_INVALID_EVENT_WAIT_LIST)?;
    Ok((n, wl, t.out_new(d)?))
}

/// Records a mapping and arranges for its current contents to stream after
/// the reply, unless the application will overwrite them all
/// (WRITE_INVALIDATE_REGION) or the mapping lies in memory the client maps
/// too. The reply says whether they follow, how long the mapping is, and
/// where in the arena it lies (`u64::MAX`: not there).
fn publish_mapping(
    t: &mut Tenant,
    e: &mut Encoder,
    req: MapTail,
    mem: *mut c_void,
    ptr: *mut c_void,
    len: u64,
    flags: u64,
) {
    let MapTail {
        id,
        shared_ok,
        pending,
        ..
    } = req;
    // The mapping holds a reference on the memory object, so that the
    // client releasing it cannot free the mapped memory, nor let a new
    // object reuse its address, while we may still write into it on unmap.
    super::retain_real(Kind::Mem, mem);
    t.mappings.insert(
        id,
        Mapping {
            mem: mem as usize,
            ptr: ptr as usize,
            len,
        },
    );
    // Memory the client maps too needs no bytes sent: it uses it directly.
    // A pending map's bytes are not there yet: the client fetches them.
    let direct = t
        .shared
        .as_ref()
        .filter(|_| shared_ok && !pending)
        .and_then(|sb| sb.arena().offset_of(ptr as *const u8, len as usize));
    let send = !pending && flags & CL_MAP_WRITE_INVALIDATE_REGION == 0 && direct.is_none();
    e.bool(send);
    e.u64(len);
    e.u64(direct.unwrap_or(u64::MAX));
    if send {
        t.bulk = Some(Bulk::Send {
            ptr: ptr as usize,
            len: len as usize,
        });
    }
}

/// The end of a map request: the client's fresh id for the mapping,
/// whether the client maps the arena (else arena memory is sent as bytes),
/// whether a map of arena memory may complete later (the client then
/// learns when from the map's event, and the tenant does not block), and
/// whether any other map may too (`pending`: the client fetches its bytes
/// with `whFetchMapping` once the map's event completed; `pending_maps.rs`).
#[derive(Clone, Copy)]
struct MapTail {
    id: u64,
    shared_ok: bool,
    defer: bool,
    pending: bool,
}

/// Bits of a map request's last byte.
const MAP_SHARED_OK: u8 = 1;
const MAP_DEFER: u8 = 2;
const MAP_PENDING: u8 = 4;

fn map_tail(t: &Tenant, d: &mut Decoder<'_>) -> Result<MapTail, i32> {
    let id = d.u64().map_err(bad)?;
    if id == 0 || t.mappings.contains_key(&id) {
        return Err(CL_INVALID_VALUE);
    }
    let bits = d.u8().map_err(bad)?;
    if bits & !(MAP_SHARED_OK | MAP_DEFER | MAP_PENDING) != 0 {
        return Err(CL_INVALID_VALUE);
    }
    Ok(MapTail {
        id,
        shared_ok: bits & MAP_SHARED_OK != 0,
        defer: bits & MAP_DEFER != 0,
        pending: bits & MAP_PENDING != 0,
    })
}

/// Maps on the server, blocking, and sends the mapped bytes; the client
/// hands the application its own copy and writes it back on unmap.
/// Request: queue, buffer, flags, offset, size, wait list, event, map id,
/// whether the client maps the arena (else arena memory is sent as bytes).
pub fn d_clEnqueueMapBuffer(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let q = t.handle(d, Kind::Queue)?;
    let buf = t.handle(d, Kind::Mem)?;
    let flags = d.u64().map_err(bad)?;
    let offset = d.usize().map_err(bad)?;
    let size = d.usize().map_err(bad)?;
    let (n, wl, mut ev) = wait_list_and_event(t, d)?;
    let tail = map_tail(t, d)?;
    d.finish().map_err(bad)?;
    // A buffer in the arena may be mapped without waiting: the client sees
    // its memory and copies once the map's event says the data is there.
    let defer = tail.defer
        && tail.shared_ok
        && !ev.ptr().is_null()
        && t.shared.as_ref().is_some_and(|sb| sb.holds(buf));
    let tail = MapTail {
        pending: tail.pending && !defer && !ev.ptr().is_null(),
        ..tail
    };
    if !defer && !tail.pending {
        // Blocking on the server, a map gated on an open user event would
        // block the tenant for good.
        super::server_blocking(0, &wl)?;
    }
    let mut err = 0;
    // SAFETY: handles from the table; the wait list holds `n` events.
    let ptr = unsafe {
        ffi::clEnqueueMapBuffer(
            q,
            buf,
            if defer || tail.pending { 0 } else { CL_TRUE },
            flags,
            offset,
            size,
            n,
            opt_vec_ptr(&wl),
            ev.ptr(),
            &mut err,
        )
    };
    if defer && err == CL_SUCCESS {
        let in_arena = t
            .shared
            .as_ref()
            .is_some_and(|sb| sb.arena().offset_of(ptr as *const u8, size).is_some());
        if let (false, Some(m)) = (in_arena, ev.made()) {
            // A library that does not map USE_HOST_PTR memory in place:
            // the bytes must be there before they are sent.
            // SAFETY: the map's own event, just made.
            err = unsafe { ffi::clWaitForEvents(1, &m) };
        }
    }
    t.commit_new(&mut ev, Kind::Event, err);
    e.u8(1);
    if err == CL_SUCCESS && !ptr.is_null() {
        publish_mapping(t, e, tail, buf, ptr, size as u64, flags);
    } else {
        e.bool(false);
        e.u64(0);
        e.u64(u64::MAX);
    }
    Ok(err)
}

/// Request: queue, image, flags, origin, region, wait list, event, map id,
/// whether the client maps the arena.
/// Reply adds the row and slice pitches.
pub fn d_clEnqueueMapImage(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let q = t.handle(d, Kind::Queue)?;
    let img = t.handle(d, Kind::Mem)?;
    let flags = d.u64().map_err(bad)?;
    let origin = d.bytes().map_err(bad)?;
    let region = d.bytes().map_err(bad)?;
    let (n, wl, mut ev) = wait_list_and_event(t, d)?;
    let tail = map_tail(t, d)?;
    d.finish().map_err(bad)?;
    let tail = MapTail {
        pending: tail.pending && !ev.ptr().is_null(),
        ..tail
    };
    if !tail.pending {
        // Gated on an open user event, a blocking map would block the
        // tenant for good.
        super::server_blocking(0, &wl)?;
    }
    let (o3, r3) = (
        triple(origin).ok_or(CL_INVALID_VALUE)?,
        triple(region).ok_or(CL_INVALID_VALUE)?,
    );
    let (o3, r3) = (o3.map(|x| x as usize), r3.map(|x| x as usize));
    // PoCL maps a box that does not fit the image (an empty one, say);
    // refused here, before the library holds a mapping (and a reference on
    // the image) that we could not describe to the client.
    // SAFETY: a memory object from the table; origin and region are 3
    // size_t each.
    unsafe { image_box_ok(img, o3.as_ptr().cast(), r3.as_ptr().cast()) }?;
    let (mut row, mut slice, mut err) = (0usize, 0usize, 0i32);
    // SAFETY: handles from the table; origin and region are 3 size_t each.
    let ptr = unsafe {
        ffi::clEnqueueMapImage(
            q,
            img,
            if tail.pending { 0 } else { CL_TRUE },
            flags,
            o3.as_ptr().cast(),
            r3.as_ptr().cast(),
            &mut row,
            &mut slice,
            n,
            opt_vec_ptr(&wl),
            ev.ptr(),
            &mut err,
        )
    };
    t.commit_new(&mut ev, Kind::Event, err);
    e.u8(1);
    e.usize(row);
    e.usize(slice);
    if err != CL_SUCCESS || ptr.is_null() {
        e.bool(false);
        e.u64(0);
        e.u64(u64::MAX);
        return Ok(err);
    }
    let window = super::custom::image_shape(img).and_then(|(ty, elem)| {
        image_window(ty, r3.map(|x| x as u64), elem, row as u64, slice as u64)
    });
    let Some(window) = window else {
        // Mapped, but not in a shape we can hand over: give it back.
        // SAFETY: the library's live mapping of `img`, made just now.
        unsafe {
            ffi::clEnqueueUnmapMemObject(q, img, ptr, 0, std::ptr::null(), std::ptr::null_mut());
            if !tail.pending {
                ffi::clFinish(q);
            }
        }
        e.bool(false);
        e.u64(0);
        e.u64(u64::MAX);
        return Ok(CL_INVALID_VALUE);
    };
    // The bytes between the mapped rows are other pixels, which the
    // client's unmap writes back as they came: they are sent even for a map
    // that will overwrite the rows.
    let sent_flags = flags & !CL_MAP_WRITE_INVALIDATE_REGION;
    publish_mapping(t, e, tail, img, ptr, window.extent, sent_flags);
    Ok(err)
}

/// Request: map id, whether written-back bytes follow and how many, queue,
/// mem, wait list, event; the bytes stream after the frame, straight into
/// the mapping, and the unmap runs once they are in (`finish_bulk_in`).
pub fn d_clEnqueueUnmapMemObject(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let (id, has_data, len) = match (d.u64(), d.bool(), d.u64()) {
        (Ok(id), Ok(has), Ok(len)) => (id, has, len),
        _ => {
            // Without these the stream cannot be followed any further.
            t.broken = true;
            return Err(CL_INVALID_VALUE);
        }
    };
    if has_data {
        t.bulk = Some(Bulk::Drain(len));
    }
    let q = t.handle(d, Kind::Queue)?;
    let mem = t.handle(d, Kind::Mem)?;
    let (n, wl, ev) = wait_list_and_event(t, d)?;
    d.finish().map_err(bad)?;
    if mem.is_null() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    let m = match t.mappings.get(&id) {
        Some(m) if m.mem == mem as usize => m,
        _ => return Err(CL_INVALID_VALUE),
    };
    if len > m.len {
        return Err(CL_INVALID_VALUE);
    }
    let ptr = m.ptr;
    e.u8(1);
    let unmap = Unmap {
        queue: q as usize,
        mem: mem as usize,
        ptr,
        n,
        wait: wl,
        event: ev,
        mapping: Some(id),
    };
    if has_data {
        t.bulk = Some(Bulk::In {
            len: len as usize,
            then: unmap,
        });
        // The status is the unmap's, known once the data is in.
        Ok(CL_SUCCESS)
    } else {
        Ok(unmap.run(t))
    }
}

/// An unmap to run once a bulk transfer is through.
pub struct Unmap {
    queue: usize,
    mem: usize,
    ptr: usize,
    n: u32,
    wait: Option<Vec<*mut c_void>>,
    event: NewSlot,
    /// The client's mapping, forgotten when the unmap succeeds.
    mapping: Option<u64>,
}

impl Unmap {
    fn run(mut self, t: &mut Tenant) -> i32 {
        // SAFETY: `ptr` is the library's live mapping of `mem`; the wait
        // list holds `n` events from the table.
        let s = unsafe {
            ffi::clEnqueueUnmapMemObject(
                self.queue as *mut c_void,
                self.mem as *mut c_void,
                self.ptr as *mut c_void,
                self.n,
                opt_vec_ptr(&self.wait),
                self.event.ptr(),
            )
        };
        t.commit_new(&mut self.event, Kind::Event, s);
        if let (Some(id), CL_SUCCESS) = (self.mapping, s) {
            if let Some(m) = t.mappings.remove(&id) {
                // SAFETY: the mapping's own reference, taken when it was made.
                unsafe { super::release_real(Kind::Mem, m.mem as *mut c_void) };
            }
        }
        s
    }
}

/// A bulk transfer the serve loop completes around the reply.
pub enum Bulk {
    /// Discard this many incoming bytes (the request failed validation).
    Drain(u64),
    /// Receive `len` bytes into the mapping `then` names, then unmap it.
    In { len: usize, then: Unmap },
    /// Send a mapped region after the reply, then unmap it.
    Out { len: usize, then: Unmap },
    /// Send a mapped region after the reply; it stays mapped.
    Send { ptr: usize, len: usize },
}

struct BulkArgs {
    size: usize,
    queue: *mut c_void,
    mem: *mut c_void,
    offset: usize,
    wait: Option<Vec<*mut c_void>>,
    n: u32,
    event: NewSlot,
}

/// Decodes a bulk request. The size comes first so that, once it is known,
/// the incoming bytes can always be drained, whatever else is wrong.
fn bulk_args(t: &mut Tenant, d: &mut Decoder<'_>, incoming: bool) -> Result<BulkArgs, i32> {
    let size = match d.usize() {
        Ok(s) => s,
        Err(_) => {
            // Without the size the stream cannot be followed any further.
            t.broken = true;
            return Err(CL_INVALID_VALUE);
        }
    };
    if incoming {
        t.bulk = Some(Bulk::Drain(size as u64));
    }
    let queue = t.handle(d, Kind::Queue)?;
    let mem = t.handle(d, Kind::Mem)?;
    let offset = d.usize().map_err(bad)?;
    let (n, wait, event) = wait_list_and_event(t, d)?;
    d.finish().map_err(bad)?;
    Ok(BulkArgs {
        size,
        queue,
        mem,
        offset,
        wait,
        n,
        event,
    })
}

impl BulkArgs {
    /// The unmap that ends the transfer and yields the command's event.
    fn unmap(self, ptr: *mut c_void) -> Unmap {
        Unmap {
            queue: self.queue as usize,
            mem: self.mem as usize,
            ptr: ptr as usize,
            n: 0,
            wait: None,
            event: self.event,
            mapping: None,
        }
    }
}

fn map_for(a: &BulkArgs, flags: u64) -> Result<*mut c_void, i32> {
    let mut err = 0;
    // SAFETY: handles from the table; the wait list holds `n` events. A
    // blocking map returns memory valid until the unmap.
    let p = unsafe {
        ffi::clEnqueueMapBuffer(
            a.queue,
            a.mem,
            CL_TRUE,
            flags,
            a.offset,
            a.size,
            a.n,
            opt_vec_ptr(&a.wait),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    if err != CL_SUCCESS {
        return Err(err);
    }
    if p.is_null() {
        return Err(wormhole_opencl_api::CL_OUT_OF_RESOURCES);
    }
    Ok(p)
}

/// Request: size, queue, buffer, offset, wait list, event; `size` bytes follow.
pub fn d_whEnqueueWriteBufferBulk(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let a = bulk_args(t, d, true)?;
    let ptr = map_for(&a, CL_MAP_WRITE_INVALIDATE_REGION)?;
    let len = a.size;
    t.bulk = Some(Bulk::In {
        len,
        then: a.unmap(ptr),
    });
    e.u8(1);
    Ok(CL_SUCCESS)
}

/// Request: size, queue, buffer, offset, wait list, event. Reply: whether
/// `size` bytes follow it.
pub fn d_whEnqueueReadBufferBulk(
    t: &mut Tenant,
    d: &mut Decoder<'_>,
    e: &mut Encoder,
) -> Result<i32, i32> {
    let a = bulk_args(t, d, false)?;
    e.u8(1);
    match map_for(&a, wormhole_opencl_api::CL_MAP_READ) {
        Ok(ptr) => {
            e.bool(true);
            let len = a.size;
            t.bulk = Some(Bulk::Out {
                len,
                then: a.unmap(ptr),
            });
            Ok(CL_SUCCESS)
        }
        Err(s) => {
            e.bool(false);
            Ok(s)
        }
    }
}

/// Completes an incoming bulk transfer (before the reply); returns the
/// call's final status.
pub fn finish_bulk_in(
    t: &mut Tenant,
    chan: &mut dyn Channel,
    status: i32,
) -> Result<i32, TransportError> {
    match t.bulk.take() {
        Some(Bulk::Drain(mut n)) => {
            let mut scratch = vec![0u8; 1 << 20];
            while n > 0 {
                let k = n.min(scratch.len() as u64) as usize;
                chan.recv_raw(&mut scratch[..k])?;
                n -= k as u64;
            }
            Ok(status)
        }
        Some(Bulk::In { len, then }) => {
            // SAFETY: the mapping spans at least `len` bytes (checked when
            // the transfer was set up) and stays mapped until `then` runs.
            let dst = unsafe { std::slice::from_raw_parts_mut(then.ptr as *mut u8, len) };
            chan.recv_raw(dst)?;
            Ok(then.run(t))
        }
        other => {
            t.bulk = other;
            Ok(status)
        }
    }
}

/// `clFinish`: where the channel can hold the reply back, a marker's
/// completion publishes it (`finish.rs`); elsewhere the queue is finished
/// here.
///
/// # Safety
/// `queue` is a live command queue from the tenant's table.
pub unsafe fn clFinish(t: &mut Tenant, queue: *mut c_void) -> i32 {
    if t.replies_held {
        // SAFETY: the caller's contract.
        if let Some(w) = unsafe { super::finish::finish(queue) } {
            t.reply_when = Some(w);
            return CL_SUCCESS;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { ffi::clFinish(queue) }
}

/// `clWaitForEvents`: where the channel can hold the reply back, the
/// events' completion publishes it (`finish.rs`); elsewhere the wait is
/// made here.
///
/// # Safety
/// `list` is NULL or points to `n` live events from the tenant's table.
pub unsafe fn clWaitForEvents(t: &mut Tenant, n: u32, list: *const *mut c_void) -> i32 {
    if t.replies_held && n > 0 && !list.is_null() {
        // SAFETY: the caller's contract.
        let events = unsafe { std::slice::from_raw_parts(list, n as usize) };
        // SAFETY: as above.
        if let Some(w) = unsafe { super::finish::wait_for_events(events) } {
            t.reply_when = Some(w);
            return CL_SUCCESS;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { ffi::clWaitForEvents(n, list) }
}

/// A buffer read (run blocking, the data in the reply). Where the channel
/// can hold the reply back, a small read completes it from the library's
/// thread (`finish.rs`) instead of blocking the tenant.
///
/// # Safety
/// As for the library's function, with handles from the tenant's table.
#[allow(clippy::too_many_arguments)]
pub unsafe fn clEnqueueReadBuffer(
    t: &mut Tenant,
    queue: *mut c_void,
    buffer: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    n: u32,
    wait_list: *const *mut c_void,
    event: *mut *mut c_void,
) -> i32 {
    if t.replies_held && !ptr.is_null() && size > 0 && size <= super::finish::HELD_READ_MAX {
        // SAFETY: the caller's contract.
        let w =
            unsafe { super::finish::read_buffer(queue, buffer, offset, size, n, wait_list, event) };
        if let Some(w) = w {
            t.reply_when = Some(w);
            return CL_SUCCESS;
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        ffi::clEnqueueReadBuffer(
            queue, buffer, blocking, offset, size, ptr, n, wait_list, event,
        )
    }
}

/// Completes an outgoing bulk transfer (after the reply frame).
pub fn finish_bulk_out(t: &mut Tenant, chan: &mut dyn Channel) -> Result<(), TransportError> {
    let (ptr, len, then) = match t.bulk.take() {
        Some(Bulk::Out { len, then }) => (then.ptr, len, Some(then)),
        Some(Bulk::Send { ptr, len }) => (ptr, len, None),
        other => {
            t.bulk = other;
            return Ok(());
        }
    };
    // SAFETY: the library mapped `len` bytes at `ptr`, valid until unmapped.
    let src = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    chan.send_raw(src)?;
    chan.flush()?;
    if let Some(then) = then {
        then.run(t);
    }
    Ok(())
}

/// Undoes a bulk transfer that will not happen (no channel: the fuzzer and
/// in-process tests): mappings are unmapped, no data moves.
pub fn abandon_bulk(t: &mut Tenant) {
    match t.bulk.take() {
        Some(Bulk::In { then, .. }) | Some(Bulk::Out { then, .. }) => {
            then.run(t);
        }
        Some(Bulk::Drain(_)) | Some(Bulk::Send { .. }) | None => {}
    }
}

/// Non-blocking writes up to this size (the ones whose data travels in the
/// request) are copied and left to run; larger ones come as bulk transfers.
const KEPT_WRITE_MAX: usize = 256 << 10;
/// The most bytes of such copies one tenant holds at once; past it, writes
/// run blocking as before, so a client cannot grow the tenant without bound.
const KEPT_WRITES_CAP: u64 = 16 << 20;
const CL_FALSE: u32 = 0;
const CL_COMPLETE: i32 = 0;

/// A non-blocking write's data, kept until its command ran.
struct KeptWrite {
    data: Box<[u8]>,
    held: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The `CL_COMPLETE` callback of a kept write (on the library's thread).
unsafe extern "C" fn kept_write_done(_ev: *mut c_void, _status: i32, user_data: *mut c_void) {
    // SAFETY: `user_data` is the `Box::into_raw` made for this one
    // registration, and a callback runs once: taken back exactly once.
    let k = unsafe { Box::from_raw(user_data as *mut KeptWrite) };
    k.held
        .fetch_sub(k.data.len() as u64, std::sync::atomic::Ordering::Relaxed);
}

/// A buffer write. Its data lives in the request's frame, which the next
/// request reuses, so the server used to run every write blocking: a
/// non-blocking write behind a long kernel then held the tenant, and every
/// later call of the client's threads, until the kernel ended. A small
/// non-blocking write now has its data copied and runs as asked; the copy
/// goes when the library reports the command complete. (PoCL 3.1 calls no
/// callback for a failed command: that copy stays, counted against
/// [`KEPT_WRITES_CAP`].)
///
/// # Safety
/// Pointer arguments as for `clEnqueueWriteBuffer`, `ptr` holding `size`
/// bytes when not NULL (the decoder checked), handles from the tenant's table.
#[allow(clippy::too_many_arguments)]
pub unsafe fn clEnqueueWriteBuffer(
    t: &mut Tenant,
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *const c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    use std::sync::atomic::Ordering;
    let held = &t.kept_writes;
    let kept = blocking == 0
        && !ptr.is_null()
        && size > 0
        && size <= KEPT_WRITE_MAX
        && held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                (h + size as u64 <= KEPT_WRITES_CAP).then_some(h + size as u64)
            })
            .is_ok();
    if !kept {
        // SAFETY: forwarded contract; blocking, so `ptr` outlives the call.
        return unsafe { ffi::clEnqueueWriteBuffer(q, buf, CL_TRUE, offset, size, ptr, n, wl, ev) };
    }
    // SAFETY: `ptr` holds `size` bytes (the caller's contract).
    let data: Box<[u8]> = unsafe { std::slice::from_raw_parts(ptr as *const u8, size) }.into();
    let mut own: *mut c_void = std::ptr::null_mut();
    // SAFETY: forwarded contract; `data` is handed to the callback below,
    // which frees it only once the command completed.
    let s = unsafe {
        ffi::clEnqueueWriteBuffer(
            q,
            buf,
            CL_FALSE,
            offset,
            size,
            data.as_ptr().cast(),
            n,
            wl,
            &mut own,
        )
    };
    if s != CL_SUCCESS {
        held.fetch_sub(size as u64, Ordering::Relaxed);
        return s;
    }
    let k = Box::into_raw(Box::new(KeptWrite {
        data,
        held: held.clone(),
    }));
    // SAFETY: `own` is the command's event; `kept_write_done` has OpenCL's
    // event-callback signature and takes `k` back.
    let r = unsafe {
        ffi::clSetEventCallback(own, CL_COMPLETE, kept_write_done as *mut c_void, k.cast())
    };
    if r != CL_SUCCESS {
        // No word of when the library is done with the data: wait for it.
        // SAFETY: one event, ours; then `k` was never registered, so ours.
        unsafe {
            ffi::clWaitForEvents(1, &own);
            kept_write_done(own, CL_COMPLETE, k.cast());
        }
    }
    if ev.is_null() {
        // The command keeps its event alive until it completed.
        // SAFETY: our reference, not handed out.
        unsafe { ffi::clReleaseEvent(own) };
    } else {
        // SAFETY: `ev` is the decoder's out-slot.
        unsafe { *ev = own };
    }
    CL_SUCCESS
}
