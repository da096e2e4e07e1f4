//! Client-side overrides: entry points that need more than the generated
//! stub (platform naming, program binaries, maps), and the hand-written
//! functions of the dispatch table.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{
    func, Kind, CL_IMAGE_ELEMENT_SIZE, CL_INVALID_VALUE, CL_MAP_READ,
    CL_MAP_WRITE_INVALIDATE_REGION, CL_MEM_SIZE, CL_MEM_TYPE, CL_MEM_USE_HOST_PTR,
    CL_PLATFORM_NOT_FOUND_KHR, CL_SUCCESS,
};
use wormhole_transport::copy::copy_bulk;

use crate::gen;
use crate::host_images;
use crate::later::{fail_later_transfers, transfer_after_gate, transfer_later, GatedOp, Rect};
use crate::maps::map_buffer;
use crate::room;
use crate::rt::{conn, info_value, obj, object_for, Call, Placement};
use crate::waits;

pub use crate::event_state::clGetEventInfo;
pub use crate::maps::{clEnqueueMapBuffer, clEnqueueMapImage, clEnqueueUnmapMemObject};

/// # Safety
/// As for `clGetPlatformIDs`.
pub unsafe extern "C" fn clGetPlatformIDs(
    n: u32,
    platforms: *mut *mut c_void,
    num: *mut u32,
) -> i32 {
    if (n == 0 && !platforms.is_null()) || (platforms.is_null() && num.is_null()) {
        return CL_INVALID_VALUE;
    }
    let ids: &[u64] = conn().map_or(&[], |c| c.platforms.as_slice());
    if !platforms.is_null() {
        for (i, &id) in ids.iter().take(n as usize).enumerate() {
            // SAFETY: room for `n` handles (caller's contract).
            unsafe { *platforms.add(i) = object_for(id, Kind::Platform, 0) };
        }
    }
    if !num.is_null() {
        // SAFETY: caller's contract.
        unsafe { *num = ids.len() as u32 };
    }
    if ids.is_empty() {
        CL_PLATFORM_NOT_FOUND_KHR
    } else {
        CL_SUCCESS
    }
}

const CL_PLATFORM_NAME: u32 = 0x0902;

fn keep_remote_name() -> bool {
    static K: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *K.get_or_init(|| std::env::var("WORMHOLE_PLATFORM_NAME").is_ok_and(|v| v == "remote"))
}
const CL_PLATFORM_ICD_SUFFIX_KHR: u32 = 0x0920;
/// Prefix of our platforms' names, so users see where a platform lives.
pub const NAME_PREFIX: &str = "Wormhole: ";

/// Answers a string query with a value computed here.
///
/// # Safety
/// `value` is NULL or holds `size` bytes; `size_ret` is NULL or a size_t.
unsafe fn answer(s: &[u8], size: usize, value: *mut c_void, size_ret: *mut usize) -> i32 {
    let mut v = s.to_vec();
    v.push(0);
    if !value.is_null() {
        if size < v.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: caller's contract; v.len() <= size.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), value as *mut u8, v.len()) };
    }
    if !size_ret.is_null() {
        // SAFETY: caller's contract.
        unsafe { *size_ret = v.len() };
    }
    CL_SUCCESS
}

/// # Safety
/// As for `clGetPlatformInfo`.
pub unsafe extern "C" fn clGetPlatformInfo(
    p: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    match param {
        CL_PLATFORM_ICD_SUFFIX_KHR => {
            // SAFETY: forwarded contract.
            unsafe { answer(b"WH", size, value, size_ret) }
        }
        // WORMHOLE_PLATFORM_NAME=remote keeps the remote name, for programs
        // that key workarounds on it (pyopencl's PoCL checks, say).
        CL_PLATFORM_NAME if !keep_remote_name() => {
            let mut n = 0usize;
            // SAFETY: size query.
            let s = unsafe { gen::clGetPlatformInfo(p, param, 0, std::ptr::null_mut(), &mut n) };
            if s != CL_SUCCESS {
                return s;
            }
            let mut buf = vec![0u8; n];
            // SAFETY: buffer of `n` bytes.
            let s = unsafe {
                gen::clGetPlatformInfo(p, param, n, buf.as_mut_ptr().cast(), std::ptr::null_mut())
            };
            if s != CL_SUCCESS {
                return s;
            }
            let remote = buf.split(|&b| b == 0).next().unwrap_or(&[]);
            let name = [NAME_PREFIX.as_bytes(), remote].concat();
            // SAFETY: forwarded contract.
            unsafe { answer(&name, size, value, size_ret) }
        }
        // SAFETY: forwarded contract.
        _ => unsafe { gen::clGetPlatformInfo(p, param, size, value, size_ret) },
    }
}

/// A build leaves the channel free while it compiles once more than one of
/// the application's threads calls OpenCL: the server builds on a thread of
/// its own and completes a user event at the end, which this thread waits
/// for as for any event ([`waits::wait`]); the other threads' calls go on
/// meanwhile, as natively. A single-threaded program builds in one round
/// trip, as the description says. `pfn_notify` runs on the calling thread
/// when the build returns, either way.
///
/// # Safety
/// As for `clBuildProgram`.
pub unsafe extern "C" fn clBuildProgram(
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        build(program, pfn_notify, user_data, options, |ev| match ev {
            None => gen::clBuildProgram(
                program,
                num_devices,
                device_list,
                options,
                pfn_notify,
                user_data,
            ),
            Some(ev) => gen::whBuildProgramStart(program, num_devices, device_list, options, ev),
        })
    }
}

/// `clCompileProgram` as [`clBuildProgram`].
///
/// # Safety
/// As for `clCompileProgram`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clCompileProgram(
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_headers: u32,
    input_headers: *const *mut c_void,
    header_include_names: *const *const c_char,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: forwarded contract.
    unsafe {
        build(program, pfn_notify, user_data, options, |ev| match ev {
            None => gen::clCompileProgram(
                program,
                num_devices,
                device_list,
                options,
                num_input_headers,
                input_headers,
                header_include_names,
                pfn_notify,
                user_data,
            ),
            Some(ev) => gen::whCompileProgramStart(
                program,
                num_devices,
                device_list,
                options,
                num_input_headers,
                input_headers,
                header_include_names,
                ev,
            ),
        })
    }
}

/// Runs a build or compilation: `call(None)` forwards it as one call (and
/// runs the callback); `call(Some(ev))` asks the server to start it on a
/// thread of its own, which completes `*ev` at the end; this thread then
/// waits for that with the channel free, takes the result, and runs
/// `pfn_notify`.
///
/// # Safety
/// `call` makes the application's call with its arguments; `pfn_notify`
/// and `user_data` are the application's for `program`; `options` is NULL
/// or a C string.
unsafe fn build(
    program: *mut c_void,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
    options: *const c_char,
    call: impl FnOnce(Option<&mut *mut c_void>) -> i32,
) -> i32 {
    // SAFETY: the caller's contract on `options`.
    unsafe { crate::includes::send(options) };
    // Whatever comes of it, the program's kernels are this build's now.
    if let Ok(Some(p)) = obj(program, Kind::Program) {
        p.shape_as_new_build();
    }
    if !off_channel(pfn_notify, user_data) {
        return call(None);
    }
    let mut ev = std::ptr::null_mut();
    let s = call(Some(&mut ev));
    if s != CL_SUCCESS {
        return s;
    }
    // SAFETY: the event just started; the application's callback for this
    // program.
    unsafe {
        let s = finish(ev, |ev| gen::whBuildProgramResult(ev));
        crate::callbacks::notify_program(pfn_notify, program, user_data);
        s
    }
}

/// `clLinkProgram` as [`clBuildProgram`]; the program the link made comes
/// with its result.
///
/// # Safety
/// As for `clLinkProgram`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clLinkProgram(
    context: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const c_char,
    num_input_programs: u32,
    input_programs: *const *mut c_void,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
    errcode_ret: *mut i32,
) -> *mut c_void {
    if !off_channel(pfn_notify, user_data) {
        // SAFETY: forwarded contract.
        return unsafe {
            gen::clLinkProgram(
                context,
                num_devices,
                device_list,
                options,
                num_input_programs,
                input_programs,
                pfn_notify,
                user_data,
                errcode_ret,
            )
        };
    }
    let mut ev = std::ptr::null_mut();
    // SAFETY: forwarded contract; `ev` is ours.
    let s = unsafe {
        gen::whLinkProgramStart(
            context,
            num_devices,
            device_list,
            options,
            num_input_programs,
            input_programs,
            &mut ev,
        )
    };
    let mut err = s;
    let linked = if s != CL_SUCCESS {
        std::ptr::null_mut()
    } else {
        // SAFETY: as in `clBuildProgram`, for the program the link made.
        unsafe {
            let p = finish(ev, |ev| gen::whLinkProgramResult(ev, &mut err));
            crate::callbacks::notify_program(pfn_notify, p, user_data);
            p
        }
    };
    if !errcode_ret.is_null() {
        // SAFETY: the application's slot.
        unsafe { *errcode_ret = err };
    }
    linked
}

/// Whether to run a build, compilation or link on a thread of the
/// server's own, leaving the channel free while it runs.
fn off_channel(pfn_notify: *mut c_void, user_data: *mut c_void) -> bool {
    let several = waits::free_channel_for_build();
    // User data without a callback is the library's to refuse.
    several && (user_data.is_null() || !pfn_notify.is_null())
}

/// Waits with the channel free for the job `ev` announces, then takes its
/// result with `take` and releases the event.
///
/// # Safety
/// `ev` is the event a `wh*ProgramStart` call made.
unsafe fn finish<R>(ev: *mut c_void, take: impl FnOnce(*mut c_void) -> R) -> R {
    // The event only completes (a user event cannot fail), and a failed
    // wait (the server gone) leaves the result to tell.
    let _ = waits::wait(&[ev]);
    let r = take(ev);
    // SAFETY: our event, released once its result is taken.
    unsafe { gen::clReleaseEvent(ev) };
    r
}

const CL_PROGRAM_NUM_DEVICES: u32 = 0x1162;
const CL_PROGRAM_BINARY_SIZES: u32 = 0x1165;
const CL_PROGRAM_BINARIES: u32 = 0x1166;

/// # Safety
/// As for `clGetProgramInfo`.
pub unsafe extern "C" fn clGetProgramInfo(
    p: *mut c_void,
    param: u32,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> i32 {
    if param != CL_PROGRAM_BINARIES {
        // SAFETY: forwarded contract.
        return unsafe { gen::clGetProgramInfo(p, param, size, value, size_ret) };
    }
    let n: u32 = match info_value(gen::clGetProgramInfo, p, CL_PROGRAM_NUM_DEVICES) {
        Ok(n) => n,
        Err(s) => return s,
    };
    let need = n as usize * std::mem::size_of::<usize>();
    if !size_ret.is_null() {
        // SAFETY: caller's contract.
        unsafe { *size_ret = need };
    }
    if value.is_null() {
        return CL_SUCCESS;
    }
    if size < need {
        return CL_INVALID_VALUE;
    }
    let mut sizes = vec![0usize; n as usize];
    // SAFETY: room for `n` sizes.
    let s = unsafe {
        gen::clGetProgramInfo(
            p,
            CL_PROGRAM_BINARY_SIZES,
            need,
            sizes.as_mut_ptr().cast(),
            std::ptr::null_mut(),
        )
    };
    if s != CL_SUCCESS {
        return s;
    }
    let dests = value as *const *mut c_void;
    for (i, &len) in sizes.iter().enumerate() {
        // SAFETY: `value` holds `n` pointers (size checked above).
        let d = unsafe { *dests.add(i) };
        if d.is_null() || len == 0 {
            continue;
        }
        // SAFETY: the application provides `len` bytes at `d`, as the API
        // requires for CL_PROGRAM_BINARIES.
        let s = unsafe { gen::whGetProgramBinary(p, i as u32, len, d) };
        if s != CL_SUCCESS {
            return s;
        }
    }
    CL_SUCCESS
}

/// # Safety
/// As for `clCreateBuffer`.
pub unsafe extern "C" fn clCreateBuffer(
    ctx: *mut c_void,
    flags: u64,
    size: usize,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    room::before_create(ctx, size);
    // SAFETY: forwarded contract.
    let m = unsafe { gen::clCreateBuffer(ctx, flags, size, host_ptr, err) };
    remember_host_ptr(m, flags, host_ptr);
    count_held(m, size as u64);
    let Ok(Some(b)) = obj(m, Kind::Mem) else {
        return m;
    };
    // Libraries ask a fresh buffer's size before each transfer (CLBlast
    // does): it is the size it was created with.
    b.info
        .know(func::clGetMemObjectInfo, CL_MEM_SIZE, &size.to_le_bytes());
    b.set_created_flags(flags);
    if let Ok(Some(c)) = obj(ctx, Kind::Context) {
        b.created_in.store(c.id, Ordering::Relaxed);
        // A buffer with a host pointer keeps its identity as its shape: its
        // transfers and maps take paths of their own.
        if host_ptr.is_null() {
            b.shape_as_created(c.id, flags, size);
        }
    }
    m
}

/// # Safety
/// As for `clCreateBufferWithProperties`.
pub unsafe extern "C" fn clCreateBufferWithProperties(
    ctx: *mut c_void,
    props: *const u64,
    flags: u64,
    size: usize,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    room::before_create(ctx, size);
    // SAFETY: forwarded contract.
    let m = unsafe { gen::clCreateBufferWithProperties(ctx, props, flags, size, host_ptr, err) };
    remember_host_ptr(m, flags, host_ptr);
    count_held(m, size as u64);
    if let Ok(Some(o)) = obj(m, Kind::Mem) {
        o.set_created_flags(flags);
    }
    m
}

/// CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, and CL_QUEUE_PROPERTIES as a
/// property list names it.
const OUT_OF_ORDER: u64 = 1;
const QUEUE_PROPERTIES: u64 = 0x1093;

/// Notes whether a new queue executes its commands in order, and its
/// context.
fn note_queue(q: *mut c_void, ctx: *mut c_void, props: u64) {
    if let Ok(Some(o)) = obj(q, Kind::Queue) {
        o.in_order
            .store(props & OUT_OF_ORDER == 0, Ordering::Relaxed);
        if let Ok(Some(c)) = obj(ctx, Kind::Context) {
            o.created_in.store(c.id, Ordering::Relaxed);
        }
    }
}

/// # Safety
/// As for `clCreateCommandQueue`.
pub unsafe extern "C" fn clCreateCommandQueue(
    ctx: *mut c_void,
    dev: *mut c_void,
    props: u64,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let q = unsafe { gen::clCreateCommandQueue(ctx, dev, props, err) };
    note_queue(q, ctx, props);
    q
}

/// # Safety
/// As for `clCreateCommandQueueWithProperties`: `props` is NULL or a
/// zero-terminated list of name and value pairs.
pub unsafe extern "C" fn clCreateCommandQueueWithProperties(
    ctx: *mut c_void,
    dev: *mut c_void,
    props: *const u64,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let q = unsafe { gen::clCreateCommandQueueWithProperties(ctx, dev, props, err) };
    if !q.is_null() {
        // SAFETY: the list is zero-terminated pairs (caller's contract), and
        // a queue was created from it, so the library read it the same way.
        let list = unsafe { crate::custom::zero_list(props, true) }.unwrap_or_default();
        let bits = list
            .chunks_exact(2)
            .filter(|kv| kv[0] == QUEUE_PROPERTIES)
            .fold(0, |bits, kv| bits | kv[1]);
        note_queue(q, ctx, bits);
    }
    q
}

/// # Safety
/// As for `clCreateKernel`.
pub unsafe extern "C" fn clCreateKernel(
    program: *mut c_void,
    name: *const c_char,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let k = unsafe { gen::clCreateKernel(program, name, err) };
    if let (Ok(Some(o)), Ok(Some(p)), false) = (
        obj(k, Kind::Kernel),
        obj(program, Kind::Program),
        name.is_null(),
    ) {
        // SAFETY: a NUL-terminated name (caller's contract; the kernel was
        // created from it).
        o.shape_as_kernel_of(p.shape_key(), unsafe { CStr::from_ptr(name) }.to_bytes());
    }
    k
}

/// # Safety
/// As for `clSetKernelArg`.
pub unsafe extern "C" fn clSetKernelArg(
    k: *mut c_void,
    index: u32,
    size: usize,
    value: *const c_void,
) -> i32 {
    // SAFETY: forwarded contract.
    let s = unsafe { gen::clSetKernelArg(k, index, size, value) };
    if s == CL_SUCCESS {
        if let Ok(Some(o)) = obj(k, Kind::Kernel) {
            o.arg_set(index);
        }
    }
    s
}

/// Remembers the application's pointer of a USE_HOST_PTR memory object:
/// the server holds a copy, so queries and maps answer from here.
fn remember_host_ptr(m: *mut c_void, flags: u64, host_ptr: *mut c_void) {
    if flags & CL_MEM_USE_HOST_PTR != 0 {
        if let Ok(Some(o)) = obj(m, Kind::Mem) {
            o.host_ptr.store(host_ptr as usize, Ordering::Relaxed);
        }
    }
}

/// # Safety
/// As for `clCreateSubBuffer`.
pub unsafe extern "C" fn clCreateSubBuffer(
    buf: *mut c_void,
    flags: u64,
    ty: u32,
    info: *const c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let m = unsafe { gen::clCreateSubBuffer(buf, flags, ty, info, err) };
    let parent = obj(buf, Kind::Mem).ok().flatten();
    if !m.is_null() {
        if let Some(p) = parent {
            p.shape_as_itself();
        }
    }
    // A sub-buffer of a USE_HOST_PTR buffer uses the parent's memory from
    // its origin on.
    let parent_host = parent.map_or(0, |o| o.host_ptr.load(Ordering::Relaxed));
    if parent_host != 0 && !info.is_null() {
        // SAFETY: a successful region sub-buffer's info is a
        // cl_buffer_region, whose first field is the origin.
        let origin = unsafe { std::ptr::read_unaligned(info as *const usize) };
        remember_host_ptr(
            m,
            CL_MEM_USE_HOST_PTR,
            (parent_host + origin) as *mut c_void,
        );
    }
    m
}

/// # Safety
/// As for `clCreateImage`.
pub unsafe extern "C" fn clCreateImage(
    ctx: *mut c_void,
    flags: u64,
    format: *const c_void,
    desc: *const c_void,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let m = unsafe { gen::clCreateImage(ctx, flags, format, desc, host_ptr, err) };
    // SAFETY: forwarded contract: a format and a description.
    unsafe {
        new_image(
            m,
            flags,
            format,
            host_images::Shape::of_desc(desc),
            host_ptr,
        )
    };
    m
}

/// # Safety
/// As for `clCreateImageWithProperties`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clCreateImageWithProperties(
    ctx: *mut c_void,
    props: *const u64,
    flags: u64,
    format: *const c_void,
    desc: *const c_void,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let m =
        unsafe { gen::clCreateImageWithProperties(ctx, props, flags, format, desc, host_ptr, err) };
    // SAFETY: forwarded contract: a format and a description.
    unsafe {
        new_image(
            m,
            flags,
            format,
            host_images::Shape::of_desc(desc),
            host_ptr,
        )
    };
    m
}

/// Notes what this side keeps of a new image: its USE_HOST_PTR memory and
/// layout, and its size among the memory the application holds (`room`).
///
/// # Safety
/// `format` is NULL or a `cl_image_format`.
unsafe fn new_image(
    m: *mut c_void,
    flags: u64,
    format: *const c_void,
    shape: Option<host_images::Shape>,
    host_ptr: *mut c_void,
) {
    remember_host_ptr(m, flags, host_ptr);
    if let Ok(Some(o)) = obj(m, Kind::Mem) {
        o.set_created_flags(flags);
    }
    if let Some(shape) = shape {
        // SAFETY: the caller's contract.
        unsafe {
            host_images::remember(m, flags, format, shape);
            count_held(m, shape.bytes(format));
        }
    }
}

/// Counts a new memory object's bytes as held by the application until
/// its last release (`room`).
fn count_held(m: *mut c_void, bytes: u64) {
    if let Ok(Some(o)) = obj(m, Kind::Mem) {
        o.counted.store(bytes, Ordering::Relaxed);
        room::created(bytes);
    }
}

/// # Safety
/// As for `clCreateImage2D`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clCreateImage2D(
    ctx: *mut c_void,
    flags: u64,
    format: *const c_void,
    w: usize,
    h: usize,
    row: usize,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let m = unsafe { gen::clCreateImage2D(ctx, flags, format, w, h, row, host_ptr, err) };
    let shape = host_images::Shape {
        image_type: 0x10F1,
        width: w,
        height: h,
        row_pitch: row,
        ..Default::default()
    };
    // SAFETY: forwarded contract: a format.
    unsafe { new_image(m, flags, format, Some(shape), host_ptr) };
    m
}

/// # Safety
/// As for `clCreateImage3D`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clCreateImage3D(
    ctx: *mut c_void,
    flags: u64,
    format: *const c_void,
    w: usize,
    h: usize,
    d: usize,
    row: usize,
    slice: usize,
    host_ptr: *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    let m = unsafe { gen::clCreateImage3D(ctx, flags, format, w, h, d, row, slice, host_ptr, err) };
    let shape = host_images::Shape {
        image_type: 0x10F2,
        width: w,
        height: h,
        depth: d,
        row_pitch: row,
        slice_pitch: slice,
        ..Default::default()
    };
    // SAFETY: forwarded contract: a format.
    unsafe { new_image(m, flags, format, Some(shape), host_ptr) };
    m
}

/// One fixed-size answer of `clGetMemObjectInfo`; `T` is the type the API
/// gives `param`.
pub(crate) fn mem_info<T: Copy + Default>(mem: *mut c_void, param: u32) -> Result<T, i32> {
    info_value(gen::clGetMemObjectInfo, mem, param)
}

/// An image's type and element size, which size its transfers' windows.
pub(crate) fn image_shape(image: *mut c_void) -> Result<(u32, u64), i32> {
    let elem: usize = info_value(gen::clGetImageInfo, image, CL_IMAGE_ELEMENT_SIZE)?;
    Ok((mem_info::<u32>(image, CL_MEM_TYPE)?, elem as u64))
}

/// Queries the image's shape before the transfer is marshalled (a query
/// cannot be made while the call holds the channel) and leaves it where
/// the `image_in`/`image_out` arguments find it.
fn stash_image_shape(image: *mut c_void) -> Result<(), i32> {
    let shape = image_shape(image)?;
    crate::custom::IMAGE_SHAPE.with(|c| c.set(shape));
    Ok(())
}

/// A non-blocking image read or write while a user event is open completes
/// later (see [`transfer_after_gate`]); `None`: forward it.
///
/// # Safety
/// As for `clEnqueueReadImage` (`write` false) or `clEnqueueWriteImage`.
#[allow(clippy::too_many_arguments)]
unsafe fn image_later(
    q: *mut c_void,
    image: *mut c_void,
    write: bool,
    blocking: u32,
    origin: *const c_void,
    region: *const c_void,
    row: usize,
    slice: usize,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> Option<i32> {
    if blocking != 0
        || !waits::user_events_open()
        || ptr.is_null()
        || origin.is_null()
        || region.is_null()
    {
        return None;
    }
    // SAFETY: the API's origin and region are three size_t each.
    let (origin, region) = unsafe {
        (
            (origin as *const [usize; 3]).read_unaligned(),
            (region as *const [usize; 3]).read_unaligned(),
        )
    };
    let op = GatedOp::Image {
        write,
        origin,
        region,
        row,
        slice,
    };
    // SAFETY: forwarded contract.
    Some(unsafe { transfer_after_gate(q, image, op, ptr, n, wl, ev) })
}

/// What a buffer rectangle read or write does before it is forwarded:
/// settle a blocking one (see [`settle`]); complete later a non-blocking one
/// while a user event is open (see [`transfer_after_gate`]). `None`:
/// forward it.
///
/// # Safety
/// As for `clEnqueueReadBufferRect` (`write` false) or
/// `clEnqueueWriteBufferRect`.
#[allow(clippy::too_many_arguments)]
unsafe fn rect_shortcut(
    q: *mut c_void,
    buf: *mut c_void,
    write: bool,
    blocking: u32,
    geometry: [*const c_void; 3],
    pitches: [usize; 4],
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> Option<i32> {
    if blocking != 0 || !waits::user_events_open() {
        // SAFETY: forwarded contract.
        return unsafe { settle_for(blocking, q, n, wl) }.err();
    }
    if ptr.is_null() || geometry.iter().any(|p| p.is_null()) {
        return None;
    }
    // SAFETY: the API's origins and region are three size_t each.
    let [buffer_origin, host_origin, region] =
        geometry.map(|p| unsafe { (p as *const [usize; 3]).read_unaligned() });
    if region.contains(&0) {
        // Refused by the library at once: let it say so.
        return None;
    }
    let rect = Rect {
        buffer_origin,
        host_origin,
        region,
        pitches,
    };
    // SAFETY: forwarded contract.
    Some(unsafe { transfer_after_gate(q, buf, GatedOp::Rect { write, rect }, ptr, n, wl, ev) })
}

/// Refuses a rectangle that ends past its buffer, as the library does
/// before it touches the host memory: a write would otherwise read the
/// application's memory for the whole window (a region of 64 x 2^40 bytes
/// past the end of any buffer crashed the application instead of getting
/// `CL_INVALID_VALUE`). What cannot be judged here (NULL arguments, a size
/// unknown) is the library's to refuse.
///
/// # Safety
/// `origin` and `region` are NULL or three size_t each.
unsafe fn rect_inside(
    buf: *mut c_void,
    origin: *const c_void,
    region: *const c_void,
    row: usize,
    slice: usize,
) -> Result<(), i32> {
    if origin.is_null() || region.is_null() {
        return Ok(());
    }
    let Ok(size) = mem_info::<usize>(buf, CL_MEM_SIZE) else {
        return Ok(());
    };
    // SAFETY: the caller's contract.
    let [o, r] = [origin, region].map(|p| unsafe { (p as *const [u64; 3]).read_unaligned() });
    if r.contains(&0) {
        // The library's own refusal, with its own code.
        return Ok(());
    }
    match wormhole_opencl_api::rect_extent(r, 1, row as u64, slice as u64).and_then(|e| e.end(o, 1))
    {
        Some(end) if end <= size as u64 => Ok(()),
        _ => Err(CL_INVALID_VALUE),
    }
}

/// The two rectangle transfers differ only in direction and in whether the
/// host pointer is const.
macro_rules! rect_transfer {
    ($name:ident, $write:expr, $ptr:ty) => {
        /// # Safety
        /// As for the OpenCL function of this name.
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            q: *mut c_void,
            buf: *mut c_void,
            blocking: u32,
            buffer_origin: *const c_void,
            host_origin: *const c_void,
            region: *const c_void,
            buffer_row_pitch: usize,
            buffer_slice_pitch: usize,
            host_row_pitch: usize,
            host_slice_pitch: usize,
            ptr: $ptr,
            n: u32,
            wl: *const *mut c_void,
            ev: *mut *mut c_void,
        ) -> i32 {
            let geometry = [buffer_origin, host_origin, region];
            let pitches = [
                buffer_row_pitch,
                buffer_slice_pitch,
                host_row_pitch,
                host_slice_pitch,
            ];
            let app = ptr as *mut c_void;
            // SAFETY: forwarded contract.
            if let Err(e) = unsafe {
                rect_inside(
                    buf,
                    buffer_origin,
                    region,
                    buffer_row_pitch,
                    buffer_slice_pitch,
                )
            } {
                return e;
            }
            // SAFETY: forwarded contract.
            let shortcut = unsafe {
                rect_shortcut(q, buf, $write, blocking, geometry, pitches, app, n, wl, ev)
            };
            if let Some(s) = shortcut {
                return s;
            }
            // SAFETY: forwarded contract.
            unsafe {
                gen::$name(
                    q,
                    buf,
                    blocking,
                    buffer_origin,
                    host_origin,
                    region,
                    buffer_row_pitch,
                    buffer_slice_pitch,
                    host_row_pitch,
                    host_slice_pitch,
                    ptr,
                    n,
                    wl,
                    ev,
                )
            }
        }
    };
}

rect_transfer!(clEnqueueReadBufferRect, false, *mut c_void);
rect_transfer!(clEnqueueWriteBufferRect, true, *const c_void);

/// What an image read or write does before it is forwarded: settle it
/// (see [`settle`]; one that [`image_later`] did not take), and stash the
/// image's shape for the marshalling of the host memory.
///
/// # Safety
/// `wl` holds `n` events.
unsafe fn before_image_transfer(
    q: *mut c_void,
    image: *mut c_void,
    blocking: u32,
    n: u32,
    wl: *const *mut c_void,
) -> Result<(), i32> {
    // SAFETY: the caller's contract.
    unsafe { settle_for(blocking, q, n, wl) }?;
    stash_image_shape(image)
}

/// The two image transfers differ only in direction and in whether the
/// host pointer is const.
macro_rules! image_transfer {
    ($name:ident, $write:expr, $ptr:ty) => {
        /// # Safety
        /// As for the OpenCL function of this name.
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name(
            q: *mut c_void,
            image: *mut c_void,
            blocking: u32,
            origin: *const c_void,
            region: *const c_void,
            row: usize,
            slice: usize,
            ptr: $ptr,
            n: u32,
            wl: *const *mut c_void,
            ev: *mut *mut c_void,
        ) -> i32 {
            let app = ptr as *mut c_void;
            // SAFETY: forwarded contract.
            let later = unsafe {
                image_later(
                    q, image, $write, blocking, origin, region, row, slice, app, n, wl, ev,
                )
            };
            if let Some(s) = later {
                return s;
            }
            // SAFETY: forwarded contract.
            if let Err(e) = unsafe { before_image_transfer(q, image, blocking, n, wl) } {
                return e;
            }
            // SAFETY: forwarded contract.
            unsafe {
                gen::$name(
                    q, image, blocking, origin, region, row, slice, ptr, n, wl, ev,
                )
            }
        }
    };
}

image_transfer!(clEnqueueReadImage, false, *mut c_void);
image_transfer!(clEnqueueWriteImage, true, *const c_void);

/// # Safety
/// `name` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn clGetExtensionFunctionAddress(name: *const c_char) -> *mut c_void {
    if name.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: caller's contract.
    match unsafe { CStr::from_ptr(name) }.to_bytes() {
        b"clIcdGetPlatformIDsKHR" => crate::clIcdGetPlatformIDsKHR as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

/// # Safety
/// As for `clGetExtensionFunctionAddress`.
pub unsafe extern "C" fn clGetExtensionFunctionAddressForPlatform(
    _p: *mut c_void,
    name: *const c_char,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { clGetExtensionFunctionAddress(name) }
}

pub(crate) const CL_QUEUE_CONTEXT: u32 = 0x1090;
pub(crate) const CL_QUEUE_DEVICE: u32 = 0x1091;
pub(crate) const CL_MEM_OBJECT_BUFFER: u32 = 0x10F0;
pub(crate) const CL_TRUE: u32 = 1;
pub(crate) const CL_COMPLETE: i32 = 0;

/// Transfers at least this large stream through the channel outside the
/// frame (see `whEnqueueWriteBufferBulk`), or, into buffers in memory shared
/// with the server, are a copy here.
const BULK_MIN: usize = 256 << 10;

/// A buffer whose large transfers should go through a map, because the
/// server may keep it in memory this process maps too (not yet known not
/// to; a USE_HOST_PTR buffer never is).
fn shared_candidate(buf: *mut c_void) -> Option<&'static crate::rt::Obj> {
    crate::rt::arena()?;
    let o = obj(buf, Kind::Mem).ok()??;
    (o.placement() != Placement::Server && o.host_ptr.load(Ordering::Relaxed) == 0).then_some(o)
}

/// A transfer as a blocking map, a copy and an unmap (whose event is the
/// transfer's). The map runs after the wait list and, in order, after
/// earlier commands, as the transfer would; when the buffer lives in shared
/// memory nothing crosses the channel but the two calls. Otherwise the map
/// moved the bytes through the channel: the buffer is remembered as the
/// server's, and later transfers stream (one copy fewer).
///
/// # Safety
/// As for `clEnqueueWriteBuffer` (`map_flags` WRITE_INVALIDATE_REGION) or
/// `clEnqueueReadBuffer` (READ): `ptr` holds `size` bytes.
#[allow(clippy::too_many_arguments)]
unsafe fn transfer_via_map(
    o: &crate::rt::Obj,
    q: *mut c_void,
    buf: *mut c_void,
    map_flags: u64,
    offset: usize,
    size: usize,
    ptr: *mut u8,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    let m = match map_buffer(
        q,
        buf,
        map_flags,
        offset,
        size,
        n,
        wl,
        std::ptr::null_mut(),
        false,
    ) {
        Ok(m) => m as *mut u8,
        Err(e) => return e,
    };
    let shared = crate::rt::arena().is_some_and(|a| a.offset_of(m, size).is_some());
    o.set_placement(if shared {
        Placement::Shared
    } else {
        Placement::Server
    });
    // SAFETY: the mapping spans `size` bytes until unmapped; `ptr` holds
    // `size` bytes (the caller's contract); they are distinct memory.
    unsafe { copy_for(map_flags, m, ptr, size) };
    // SAFETY: our own mapping, given back once.
    unsafe { clEnqueueUnmapMemObject(q, buf, m.cast(), 0, std::ptr::null(), ev) }
}

/// Copies between a mapping and the application's memory, in the
/// direction the map's flags say.
///
/// # Safety
/// Both point to `size` bytes of distinct memory.
pub(crate) unsafe fn copy_for(map_flags: u64, mapped: *mut u8, app: *mut u8, size: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if map_flags == CL_MAP_READ {
            copy_bulk(app, mapped, size);
        } else {
            copy_bulk(mapped, app as *const u8, size);
        }
    }
}

/// Before a call the server runs blocking: when waits leave the channel
/// free ([`waits::free_channel`]), wait here first, so that the process's
/// other threads (one of which may set a user event this waits for) reach
/// the server meanwhile. That includes transfers the application made
/// non-blocking: the server runs every read, rectangle and image transfer,
/// and buffer writes of [`BULK_MIN`] or more, blocking all the same (only
/// smaller buffer writes it keeps and runs as asked), and every map, so the
/// calling thread waits for its answer either way. But not a non-blocking one while a user
/// event is open: this very thread may set that event once we return, so
/// such transfers complete later instead.
///
/// # Safety
/// `wl` holds `n` events (the caller's contract).
unsafe fn settle(q: *mut c_void, n: u32, wl: *const *mut c_void) -> Result<(), i32> {
    if !waits::free_channel() {
        return Ok(());
    }
    // On an out-of-order queue a command waits for its wait list only; a
    // marker without one would wait for every command before it.
    let in_order =
        || matches!(obj(q, Kind::Queue), Ok(Some(o)) if o.in_order.load(Ordering::Relaxed));
    if n == 0 && !in_order() {
        return Ok(());
    }
    // SAFETY: the caller's contract.
    unsafe { waits::settle(q, n, wl) }.map(|_| ())
}

/// [`settle`] before a call the server runs blocking, which the
/// application made blocking (`blocking` non-zero: a failure of what it
/// waits for is its error) or not (that failure is the forwarded call's to
/// report, as it was before; and nothing is settled while a user event is
/// open).
///
/// # Safety
/// `wl` holds `n` events (the caller's contract).
pub(crate) unsafe fn settle_for(
    blocking: u32,
    q: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
) -> Result<(), i32> {
    if blocking != 0 {
        // SAFETY: the caller's contract.
        return unsafe { settle(q, n, wl) };
    }
    if !waits::user_events_open() {
        // SAFETY: the caller's contract.
        let _ = unsafe { settle(q, n, wl) };
    }
    Ok(())
}

/// What a buffer read or write does before it is forwarded as such:
/// settle a blocking one (see [`settle`]); complete later a non-blocking
/// one that may wait on an open user event; carry a large one into a
/// buffer in shared memory out by map. `None`: forward it.
///
/// # Safety
/// As for `clEnqueueWriteBuffer` (`map_flags` WRITE_INVALIDATE_REGION) or
/// `clEnqueueReadBuffer` (READ).
#[allow(clippy::too_many_arguments)]
unsafe fn transfer_shortcut(
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    map_flags: u64,
    offset: usize,
    size: usize,
    ptr: *mut u8,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> Option<i32> {
    if blocking == 0 && waits::user_events_open() && !ptr.is_null() && size > 0 {
        // It may wait for a user event that this very thread sets after we
        // return: it completes later, as natively.
        // SAFETY: forwarded contract.
        return Some(unsafe {
            if shared_candidate(buf).is_some() {
                transfer_later(q, buf, map_flags, offset, size, ptr, n, wl, ev)
            } else {
                let op = GatedOp::Buffer {
                    write: map_flags != CL_MAP_READ,
                    offset,
                    size,
                };
                transfer_after_gate(q, buf, op, ptr.cast(), n, wl, ev)
            }
        });
    }
    // Writes under BULK_MIN the server keeps, and runs as asked.
    if blocking != 0 || map_flags == CL_MAP_READ || size >= BULK_MIN {
        // SAFETY: forwarded contract.
        if let Err(e) = unsafe { settle_for(blocking, q, n, wl) } {
            return Some(e);
        }
    }
    if size < BULK_MIN || ptr.is_null() {
        return None;
    }
    let o = shared_candidate(buf)?;
    // SAFETY: forwarded contract.
    Some(unsafe { transfer_via_map(o, q, buf, map_flags, offset, size, ptr, n, wl, ev) })
}

const CL_MEM_HOST_WRITE_ONLY: u64 = 1 << 7;
const CL_MEM_HOST_READ_ONLY: u64 = 1 << 8;
const CL_MEM_HOST_NO_ACCESS: u64 = 1 << 9;

/// A transfer the client makes itself, without the server: the buffer is
/// one the server placed in the arena and published in its directory, the
/// queue has run everything it was given with nothing sent since, so the
/// transfer would start at once and finish as the copy does, and no wait
/// list or event asks for more. Libraries write each buffer and finish
/// (CLBlast does, around every routine): this spares both round trips,
/// and the queue stays drained for the next one. Anything the library
/// could refuse (another context, a range past the end, a host access the
/// flags deny) goes to the server for its error.
///
/// # Safety
/// `ptr` holds `size` bytes, readable (write) or writable (read).
#[allow(clippy::too_many_arguments)]
unsafe fn transfer_in_place(
    q: *mut c_void,
    buf: *mut c_void,
    write: bool,
    offset: usize,
    size: usize,
    ptr: *mut u8,
    n: u32,
    ev: *mut *mut c_void,
) -> Option<i32> {
    if n != 0 || !ev.is_null() || ptr.is_null() || size == 0 {
        return None;
    }
    let arena = crate::rt::arena()?;
    let b = obj(buf, Kind::Mem).ok()??;
    let denied = if write {
        CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS
    } else {
        CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS
    };
    if b.created_flags()? & denied != 0 {
        return None;
    }
    let (off, len) = arena.lookup(b.id)?;
    if offset.checked_add(size)? as u64 > len {
        return None;
    }
    let at = arena.ptr_at(off + offset as u64, size)?;
    crate::rt::while_drained(q, |queue, deferred| {
        let ctx = queue.created_in.load(Ordering::Relaxed);
        if ctx == 0 || ctx != b.created_in.load(Ordering::Relaxed) {
            return None;
        }
        if write {
            // Under delay storing the server saves a buffer written in
            // place before it evicts it.
            arena.mark_written(b.id);
        }
        // SAFETY: `at` is `size` bytes of the buffer's storage in the arena
        // (the directory's range, checked above) and `ptr` is the
        // application's `size` bytes (caller's contract); the queue runs
        // nothing that could touch the buffer meanwhile.
        unsafe {
            if write {
                copy_bulk(at, ptr, size);
            } else {
                copy_bulk(ptr, at, size);
            }
        }
        // Withdrawn meanwhile (the server evicted it to make room for
        // another tenant): the server does it again, on the buffer's
        // contents restored.
        if !arena.still(b.id, off) {
            return None;
        }
        // A read reports an earlier deferred failure, as the server would.
        Some(if write { CL_SUCCESS } else { deferred() })
    })
}

/// # Safety
/// As for `clEnqueueWriteBuffer`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueWriteBuffer(
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
    // SAFETY: forwarded contract.
    if let Some(s) = unsafe { transfer_in_place(q, buf, true, offset, size, ptr as *mut u8, n, ev) }
    {
        return s;
    }
    // SAFETY: forwarded contract.
    if let Some(s) = unsafe {
        transfer_shortcut(
            q,
            buf,
            blocking,
            CL_MAP_WRITE_INVALIDATE_REGION,
            offset,
            size,
            ptr as *mut u8,
            n,
            wl,
            ev,
        )
    } {
        return s;
    }
    if size < BULK_MIN || ptr.is_null() {
        // SAFETY: forwarded contract.
        return unsafe {
            gen::clEnqueueWriteBuffer(q, buf, blocking, offset, size, ptr, n, wl, ev)
        };
    }
    let run = || -> Result<i32, i32> {
        let mut c = Call::begin(func::whEnqueueWriteBufferBulk)?;
        c.enc.usize(size);
        c.shape(size as u64);
        c.shape(offset as u64);
        c.handle(q, Kind::Queue)?;
        c.handle(buf, Kind::Mem)?;
        c.enc.usize(offset);
        c.enc.u32(n);
        // SAFETY: forwarded contract: `wl` holds `n` events, `ptr` `size` bytes.
        unsafe {
            c.handles(wl, n as usize, Kind::Event)?;
            c.attach_raw(ptr as *const u8, size);
        }
        let n_ev = c.out_new(ev);
        // The data is in the channel when this returns, so the call can be
        // deferred like any other write, blocking or not.
        let status = c.finish_async(false)?;
        if status == CL_SUCCESS {
            // SAFETY: forwarded contract.
            unsafe { crate::rt::adopt_new(n_ev, ev, Kind::Event) };
        }
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}

/// # Safety
/// As for `clEnqueueReadBuffer`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueReadBuffer(
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    offset: usize,
    size: usize,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    // SAFETY: forwarded contract.
    let in_place = unsafe { transfer_in_place(q, buf, false, offset, size, ptr.cast(), n, ev) };
    if let Some(s) = in_place {
        return s;
    }
    // SAFETY: forwarded contract.
    if let Some(s) = unsafe {
        transfer_shortcut(
            q,
            buf,
            blocking,
            CL_MAP_READ,
            offset,
            size,
            ptr as *mut u8,
            n,
            wl,
            ev,
        )
    } {
        return s;
    }
    if size < BULK_MIN || ptr.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { gen::clEnqueueReadBuffer(q, buf, blocking, offset, size, ptr, n, wl, ev) };
    }
    let run = || -> Result<i32, i32> {
        let mut c = Call::begin(func::whEnqueueReadBufferBulk)?;
        c.enc.usize(size);
        c.handle(q, Kind::Queue)?;
        c.handle(buf, Kind::Mem)?;
        c.enc.usize(offset);
        c.enc.u32(n);
        // SAFETY: forwarded contract.
        unsafe { c.handles(wl, n as usize, Kind::Event)? };
        let n_ev = c.out_new(ev);
        let mut r = c.finish()?;
        let raw_follows = r.has_outputs() && r.opt_flag()?;
        if raw_follows {
            // SAFETY: the application provides `size` writable bytes.
            r.recv_raw(unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, size) })?;
        }
        let status = r.status_with_deferred();
        // SAFETY: forwarded contract.
        unsafe { r.out_new(n_ev, ev, Kind::Event, r.status()) };
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}

/// # Safety
/// As for `clCreateUserEvent`.
pub unsafe extern "C" fn clCreateUserEvent(ctx: *mut c_void, err: *mut i32) -> *mut c_void {
    // SAFETY: forwarded contract.
    let e = unsafe { gen::clCreateUserEvent(ctx, err) };
    if let Ok(Some(o)) = obj(e, Kind::Event) {
        o.user_pending.store(true, Ordering::Relaxed);
        waits::user_event_opened();
    }
    e
}

/// # Safety
/// As for `clSetUserEventStatus`.
pub unsafe extern "C" fn clSetUserEventStatus(ev: *mut c_void, status: i32) -> i32 {
    // SAFETY: forwarded contract.
    let s = unsafe { gen::clSetUserEventStatus(ev, status) };
    if s == CL_SUCCESS {
        if let Ok(Some(o)) = obj(ev, Kind::Event) {
            if o.user_pending.swap(false, Ordering::Relaxed) {
                waits::user_event_set();
            }
        }
        crate::event_state::note_status(ev, status);
        if status < 0 {
            fail_later_transfers();
        }
    }
    s
}

/// # Safety
/// As for `clWaitForEvents`.
pub unsafe extern "C" fn clWaitForEvents(n: u32, list: *const *mut c_void) -> i32 {
    let s = if waits::free_channel() && n > 0 && !list.is_null() {
        // SAFETY: forwarded contract: `list` holds `n` events.
        let events = unsafe { std::slice::from_raw_parts(list, n as usize) };
        if let Err(e) = waits::timed(|| waits::wait(events)) {
            return e;
        }
        // The call below then returns at once, with its own status.
        // SAFETY: forwarded contract.
        unsafe { gen::clWaitForEvents(n, list) }
    } else {
        // SAFETY: forwarded contract.
        waits::timed(|| unsafe { gen::clWaitForEvents(n, list) })
    };
    if s == CL_SUCCESS && n > 0 && !list.is_null() {
        // SAFETY: forwarded contract: `list` holds `n` events.
        crate::event_state::note_all_complete(unsafe {
            std::slice::from_raw_parts(list, n as usize)
        });
    }
    s
}

/// # Safety
/// As for `clFinish`.
pub unsafe extern "C" fn clFinish(q: *mut c_void) -> i32 {
    // Libraries finish after each read (CLBlast does): the read already
    // waited for everything before it.
    if let Some(s) = crate::rt::finish_drained(q) {
        return s;
    }
    if waits::free_channel() {
        // SAFETY: no wait list.
        if let Ok(true) = unsafe { waits::settle(q, 0, std::ptr::null()) } {
            // Everything enqueued before this call is done: what is left to
            // report is an earlier deferred failure, as the server's answer
            // would. (A failed command is clFinish's to report, or not:
            // that case asks the server, below.)
            return crate::rt::take_deferred();
        }
    }
    // SAFETY: forwarded contract.
    waits::timed(|| unsafe { gen::clFinish(q) })
}
