//! Client-side overrides: entry points that need more than the generated
//! stub (platform naming, program binaries, maps), and the hand-written
//! functions of the dispatch table.
#![allow(non_snake_case)]

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use wormhole_opencl_api::{
    func, Kind, CL_IMAGE_ELEMENT_SIZE, CL_INVALID_MEM_OBJECT, CL_INVALID_VALUE, CL_MAP_READ,
    CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION, CL_MEM_SIZE, CL_MEM_TYPE, CL_MEM_USE_HOST_PTR,
    CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES, CL_PLATFORM_NOT_FOUND_KHR, CL_SUCCESS,
};
use wormhole_transport::copy::copy_bulk;

use crate::gen;
use crate::room;
use crate::rt::{conn, fresh_id, info_value, obj, object_for, set_errcode, Call, Placement, Reply};
use crate::waits;

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
        build(program, pfn_notify, user_data, |ev| match ev {
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
        build(program, pfn_notify, user_data, |ev| match ev {
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
/// and `user_data` are the application's for `program`.
unsafe fn build(
    program: *mut c_void,
    pfn_notify: *mut c_void,
    user_data: *mut c_void,
    call: impl FnOnce(Option<&mut *mut c_void>) -> i32,
) -> i32 {
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
    let Ok(Some(b)) = obj(m, Kind::Mem) else {
        return m;
    };
    b.counted.store(size as u64, Ordering::Relaxed);
    room::created(size as u64);
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
        o.shape_as_kernel_of(p.id, unsafe { CStr::from_ptr(name) }.to_bytes());
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
    remember_host_ptr(m, flags, host_ptr);
    m
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
    remember_host_ptr(m, flags, host_ptr);
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
    remember_host_ptr(m, flags, host_ptr);
    m
}

/// One fixed-size answer of `clGetMemObjectInfo`; `T` is the type the API
/// gives `param`.
fn mem_info<T: Copy + Default>(mem: *mut c_void, param: u32) -> Result<T, i32> {
    info_value(gen::clGetMemObjectInfo, mem, param)
}

/// An image's type and element size, which size its transfers' windows.
fn image_shape(image: *mut c_void) -> Result<(u32, u64), i32> {
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

/// One mapping handed to the application.
struct Mapped {
    id: u64,
    len: usize,
    flags: u64,
    /// Allocated here (freed on unmap), or the application's host pointer.
    owned: Option<std::alloc::Layout>,
    /// The buffer's own storage, in memory shared with the server: nothing
    /// to write back.
    direct: bool,
}

fn maps() -> std::sync::MutexGuard<'static, HashMap<usize, Vec<Mapped>>> {
    static M: OnceLock<Mutex<HashMap<usize, Vec<Mapped>>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Where a mapping lives on this side: inside the application's host
/// buffer for USE_HOST_PTR buffers (as the API requires), else fresh memory.
fn map_memory(
    host: usize,
    offset: usize,
    len: usize,
) -> Result<(*mut u8, Option<std::alloc::Layout>), i32> {
    if host != 0 {
        return Ok(((host + offset) as *mut u8, None));
    }
    let layout =
        std::alloc::Layout::from_size_align(len.max(1), 128).map_err(|_| CL_INVALID_VALUE)?;
    // SAFETY: a non-zero-sized layout.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(CL_OUT_OF_HOST_MEMORY);
    }
    Ok((p, Some(layout)))
}

/// Reads a map's reply: whether the mapped bytes follow and the mapping's
/// length; receives the bytes straight into the memory handed to the
/// application.
fn finish_map(
    r: &mut Reply<'_>,
    host: usize,
    offset: usize,
    id: u64,
    flags: u64,
) -> Result<*mut c_void, i32> {
    let raw = r.opt_flag()?;
    let (mut len, mut at) = (0u64, u64::MAX);
    // SAFETY: local out-values.
    unsafe {
        r.out_u64(&mut len)?;
        r.out_u64(&mut at)?;
    }
    let len = usize::try_from(len).map_err(|_| CL_OUT_OF_HOST_MEMORY)?;
    let shared = match at {
        u64::MAX => None,
        at => Some(
            crate::rt::arena()
                .and_then(|a| a.ptr_at(at, len))
                .ok_or(CL_OUT_OF_RESOURCES)?,
        ),
    };
    let (p, owned, direct) = match shared {
        Some(sp) if host == 0 => (sp, None, true),
        _ => {
            let (p, owned) = map_memory(host, offset, len)?;
            if let Some(sp) = shared {
                // A USE_HOST_PTR mapping must be the application's memory.
                // SAFETY: both span `len` bytes (checked against the arena;
                // the host buffer from `offset`, as the API promises).
                unsafe { copy_bulk(p, sp, len) };
            } else if raw {
                // SAFETY: `p` spans `len` bytes (just allocated, or the
                // application's host buffer from `offset`, as the API promises).
                r.recv_raw(unsafe { std::slice::from_raw_parts_mut(p, len) })?;
            }
            (p, owned, false)
        }
    };
    maps().entry(p as usize).or_default().push(Mapped {
        id,
        len,
        flags,
        owned,
        direct,
    });
    Ok(p as *mut c_void)
}

/// # Safety
/// As for `clEnqueueMapBuffer`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueMapBuffer(
    q: *mut c_void,
    buf: *mut c_void,
    blocking: u32,
    flags: u64,
    offset: usize,
    size: usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    if let Err(e) = unsafe { settle_for(blocking, q, n, wl) } {
        // SAFETY: forwarded contract.
        unsafe { set_errcode(err, e) };
        return std::ptr::null_mut();
    }
    let r = map_buffer(q, buf, flags, offset, size, n, wl, ev, false);
    let (v, e) = match r {
        Ok(v) => (v, CL_SUCCESS),
        Err(e) => (std::ptr::null_mut(), e),
    };
    // SAFETY: forwarded contract.
    unsafe { set_errcode(err, e) };
    v
}

/// The last byte of a map request: whether we map the arena, and whether
/// the server may answer before the map is done (`defer`: only for arena
/// memory, whose bytes we then read once the map's event completes).
fn map_tail_bits(defer: bool) -> u8 {
    u8::from(crate::rt::arena().is_some()) | if defer { 2 } else { 0 }
}

/// What every map request ends with: the wait list, the event slot, a
/// fresh id for the mapping and [`map_tail_bits`]. Returns the event's id
/// (if asked for) and the mapping's.
///
/// # Safety
/// `wl` holds `n` events.
unsafe fn map_request_tail(
    c: &mut Call<'_>,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    defer: bool,
) -> Result<(Option<u64>, u64), i32> {
    c.enc.u32(n);
    // SAFETY: the caller's contract.
    unsafe { c.handles(wl, n as usize, Kind::Event)? };
    let n_ev = c.out_new(ev);
    let id = fresh_id();
    c.enc.u64(id);
    c.enc.u8(map_tail_bits(defer));
    Ok((n_ev, id))
}

/// A buffer map; see [`map_tail_bits`] for `defer`.
#[allow(clippy::too_many_arguments)]
fn map_buffer(
    q: *mut c_void,
    buf: *mut c_void,
    flags: u64,
    offset: usize,
    size: usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    defer: bool,
) -> Result<*mut c_void, i32> {
    let mut c = Call::begin(func::clEnqueueMapBuffer)?;
    c.handle(q, Kind::Queue)?;
    c.handle(buf, Kind::Mem)?;
    c.enc.u64(flags);
    c.enc.usize(offset);
    c.enc.usize(size);
    // SAFETY: the caller's contract: `wl` holds `n` events.
    let (n_ev, id) = unsafe { map_request_tail(&mut c, n, wl, ev, defer) }?;
    let host = obj(buf, Kind::Mem)?.map_or(0, |o| o.host_ptr.load(Ordering::Relaxed));
    let mut r = c.finish()?;
    let status = r.status();
    let p = if r.has_outputs() && status == CL_SUCCESS {
        finish_map(&mut r, host, offset, id, flags)?
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: the caller's contract: `ev` is NULL or writable.
    unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
    if status != CL_SUCCESS {
        return Err(status);
    }
    Ok(p)
}

/// # Safety
/// As for `clEnqueueMapImage`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn clEnqueueMapImage(
    q: *mut c_void,
    image: *mut c_void,
    blocking: u32,
    flags: u64,
    origin: *const c_void,
    region: *const c_void,
    row_pitch: *mut usize,
    slice_pitch: *mut usize,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
    err: *mut i32,
) -> *mut c_void {
    let run = || -> Result<*mut c_void, i32> {
        if origin.is_null() || region.is_null() || row_pitch.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        // SAFETY: forwarded contract.
        unsafe { settle_for(blocking, q, n, wl) }?;
        let mut c = Call::begin(func::clEnqueueMapImage)?;
        c.handle(q, Kind::Queue)?;
        c.handle(image, Kind::Mem)?;
        c.enc.u64(flags);
        // SAFETY: 3 size_t each (checked non-NULL above).
        let (o, rg) = unsafe {
            (
                std::slice::from_raw_parts(origin as *const u8, 24),
                std::slice::from_raw_parts(region as *const u8, 24),
            )
        };
        c.enc.bytes(o);
        c.enc.bytes(rg);
        // SAFETY: forwarded contract: `wl` holds `n` events.
        let (n_ev, id) = unsafe { map_request_tail(&mut c, n, wl, ev, false) }?;
        let mut r = c.finish()?;
        let status = r.status();
        let (mut row, mut slice) = (0usize, 0usize);
        let mut p = std::ptr::null_mut();
        if r.has_outputs() {
            // SAFETY: local out-values.
            unsafe {
                r.out_usize(&mut row)?;
                r.out_usize(&mut slice)?;
            }
            if status == CL_SUCCESS {
                p = finish_map(&mut r, 0, 0, id, flags)?;
            }
        }
        // SAFETY: forwarded contract.
        unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
        if status != CL_SUCCESS {
            return Err(status);
        }
        // SAFETY: checked non-NULL above; slice_pitch may be NULL.
        unsafe {
            *row_pitch = row;
            if !slice_pitch.is_null() {
                *slice_pitch = slice;
            }
        }
        Ok(p)
    };
    let (v, e) = match run() {
        Ok(v) => (v, CL_SUCCESS),
        Err(e) => (std::ptr::null_mut(), e),
    };
    // SAFETY: forwarded contract.
    unsafe { set_errcode(err, e) };
    v
}

/// # Safety
/// As for `clEnqueueUnmapMemObject`.
pub unsafe extern "C" fn clEnqueueUnmapMemObject(
    q: *mut c_void,
    mem: *mut c_void,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    let run = || -> Result<i32, i32> {
        obj(mem, Kind::Mem)?;
        let m = {
            let mut all = maps();
            let list = all.get_mut(&(ptr as usize)).ok_or(CL_INVALID_VALUE)?;
            let m = list.pop().ok_or(CL_INVALID_VALUE)?;
            if list.is_empty() {
                all.remove(&(ptr as usize));
            }
            m
        };
        let mut c = Call::begin(func::clEnqueueUnmapMemObject)?;
        // What the server needs to follow the stream comes first.
        c.enc.u64(m.id);
        let write_back =
            !m.direct && m.flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0;
        c.enc.bool(write_back);
        c.enc.u64(m.len as u64);
        if write_back {
            // SAFETY: the mapping spans `m.len` bytes at `ptr` and stays
            // allocated until the call is finished.
            unsafe { c.attach_raw(ptr as *const u8, m.len) };
        }
        c.handle(q, Kind::Queue)?;
        c.handle(mem, Kind::Mem)?;
        c.enc.u32(n);
        // SAFETY: forwarded contract.
        unsafe { c.handles(wl, n as usize, Kind::Event)? };
        let n_ev = c.out_new(ev);
        let mut r = c.finish()?;
        let status = r.status();
        // SAFETY: forwarded contract.
        unsafe { r.out_new(n_ev, ev, Kind::Event, status) };
        drop(r);
        if status == CL_SUCCESS {
            if let Some(layout) = m.owned {
                // SAFETY: allocated in `map_memory` with this layout; the
                // application gave the mapping back.
                unsafe { std::alloc::dealloc(ptr as *mut u8, layout) };
            }
        } else {
            maps().entry(ptr as usize).or_default().push(m);
        }
        Ok(status)
    };
    match run() {
        Ok(s) | Err(s) => s,
    }
}

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

const CL_QUEUE_CONTEXT: u32 = 0x1090;
const CL_QUEUE_DEVICE: u32 = 0x1091;
const CL_MEM_OBJECT_BUFFER: u32 = 0x10F0;
const CL_TRUE: u32 = 1;
const CL_COMPLETE: i32 = 0;

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
unsafe fn copy_for(map_flags: u64, mapped: *mut u8, app: *mut u8, size: usize) {
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
unsafe fn settle_for(
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

/// What the library would refuse when the transfer is enqueued, checked
/// now: the transfer itself is enqueued later, and its own failure would
/// reach the application only through the event.
fn check_gated(mem: *mut c_void, op: GatedOp) -> Result<(), i32> {
    let end = match op {
        GatedOp::Image { .. } => {
            return match image_shape(mem)? {
                // CL_MEM_OBJECT_IMAGE2D to CL_MEM_OBJECT_IMAGE1D_BUFFER.
                (0x10F1..=0x10F6, _) => Ok(()),
                _ => Err(CL_INVALID_MEM_OBJECT),
            };
        }
        GatedOp::Buffer { offset, size, .. } => offset.checked_add(size).map(|e| e as u64),
        GatedOp::Rect { rect: r, .. } => {
            let t = |a: [usize; 3]| a.map(|v| v as u64);
            let [row, slice, ..] = r.pitches;
            wormhole_opencl_api::rect_extent(t(r.region), 1, row as u64, slice as u64)
                .and_then(|ext| ext.end(t(r.buffer_origin), 1))
        }
    };
    let ty: u32 = mem_info(mem, CL_MEM_TYPE)?;
    let len: usize = mem_info(mem, CL_MEM_SIZE)?;
    if ty != CL_MEM_OBJECT_BUFFER {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    match end {
        Some(end) if end <= len as u64 => Ok(()),
        _ => Err(CL_INVALID_VALUE),
    }
}

/// A handle a queue knows: its context or device.
fn queue_handle(q: *mut c_void, param: u32) -> Result<*mut c_void, i32> {
    // The client library checks `q` before anything is sent.
    info_value(gen::clGetCommandQueueInfo, q, param)
}

/// A transfer that completes after we return: a map the server does not
/// wait for, whose event fires a callback (on the notifier thread) that
/// copies, unmaps and completes a user event standing for the transfer. A
/// barrier on that user event keeps later commands of the queue after the
/// copy, as they would be after the transfer.
///
/// # Safety
/// As for [`transfer_via_map`]; `ptr` stays valid until the transfer
/// completes (the API's rule for non-blocking transfers).
#[allow(clippy::too_many_arguments)]
unsafe fn transfer_later(
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
    let ctx = match queue_handle(q, CL_QUEUE_CONTEXT) {
        Ok(c) => c,
        Err(s) => return s,
    };
    let mut e = CL_SUCCESS;
    // SAFETY: `ctx` is the queue's context.
    let user = unsafe { clCreateUserEvent(ctx, &mut e) };
    if e != CL_SUCCESS {
        return e;
    }
    let mut done_ev = std::ptr::null_mut();
    let m = match map_buffer(q, buf, map_flags, offset, size, n, wl, &mut done_ev, true) {
        Ok(m) => m as *mut u8,
        Err(e) => {
            // SAFETY: our user event, never handed out.
            unsafe { drop_user_event(user, e) };
            return e;
        }
    };
    // SAFETY: handles the application holds; our references keep them for
    // the callback.
    unsafe {
        gen::clRetainCommandQueue(q);
        gen::clRetainMemObject(buf);
    }
    // SAFETY: `user` is ours and not set.
    let hold = match unsafe { Hold::behind(q, user, done_ev) } {
        Ok(h) => h,
        Err(s) => {
            // SAFETY: the map and references are ours.
            unsafe {
                clEnqueueUnmapMemObject(
                    q,
                    buf,
                    m.cast(),
                    0,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                );
                gen::clReleaseEvent(done_ev);
                gen::clReleaseCommandQueue(q);
                gen::clReleaseMemObject(buf);
                drop_user_event(user, s);
            }
            return s;
        }
    };
    let later = Later::Mapped {
        q: q as usize,
        buf: buf as usize,
        mapped: m as usize,
        app: ptr as usize,
        size,
        map_flags,
        hold,
    };
    // SAFETY: `user` is ours, `ev` the application's out-slot.
    unsafe { later.wait_for(done_ev, user, ev) }
}

/// A transfer completing later, by how: a map of a buffer in shared memory
/// to copy from or into ([`transfer_later`]), or a transfer to run once its
/// gate opens ([`transfer_after_gate`]). Addresses are integers: it
/// completes on another thread.
enum Later {
    Mapped {
        q: usize,
        buf: usize,
        mapped: usize,
        app: usize,
        size: usize,
        map_flags: u64,
        hold: Hold,
    },
    Gated {
        ctx: usize,
        dev: usize,
        mem: usize,
        op: GatedOp,
        app: usize,
        hold: Hold,
    },
}

/// A transfer to run once its gate opens; the host memory is the
/// application's, at `app` in [`Later::Gated`].
#[derive(Clone, Copy)]
enum GatedOp {
    Buffer {
        write: bool,
        offset: usize,
        size: usize,
    },
    Image {
        write: bool,
        origin: [usize; 3],
        region: [usize; 3],
        row: usize,
        slice: usize,
    },
    Rect {
        write: bool,
        rect: Rect,
    },
}

/// A buffer rectangle transfer's geometry: buffer origin, host origin,
/// region, then buffer row and slice pitch, host row and slice pitch.
#[derive(Clone, Copy)]
struct Rect {
    buffer_origin: [usize; 3],
    host_origin: [usize; 3],
    region: [usize; 3],
    pitches: [usize; 4],
}

/// Transfers completing later, by the token their callback carries. PoCL
/// 3.1 calls no `CL_COMPLETE` callback of a failed command, so a user event
/// set to a failure also looks here for the transfers it failed
/// ([`fail_later_transfers`]). Whoever takes an entry out completes it.
fn later_transfers() -> std::sync::MutexGuard<'static, HashMap<u64, Later>> {
    static L: OnceLock<Mutex<HashMap<u64, Later>>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

impl Later {
    fn hold(&self) -> &Hold {
        match self {
            Later::Mapped { hold, .. } | Later::Gated { hold, .. } => hold,
        }
    }

    /// Completes the transfer when `cmd` (held by the hold) completes, and
    /// hands out `user` as its event.
    ///
    /// # Safety
    /// `user` is the hold's user event; `ev` is NULL or an out-slot.
    unsafe fn wait_for(self, cmd: *mut c_void, user: *mut c_void, ev: *mut *mut c_void) -> i32 {
        let token = fresh_id();
        later_transfers().insert(token, self);
        // SAFETY: `later_ready` takes the token's entry, at most once.
        let s = unsafe {
            gen::clSetEventCallback(
                cmd,
                CL_COMPLETE,
                later_ready as *mut c_void,
                token as *mut c_void,
            )
        };
        if s != CL_SUCCESS {
            // No way to learn when to complete it: undo, and let the queue
            // go on (the application gets the error, not the event).
            let l = later_transfers().remove(&token);
            if let Some(l) = l {
                // SAFETY: taken out once.
                unsafe { l.finish(CL_COMPLETE) };
            }
            return s;
        }
        // SAFETY: the caller's contract.
        unsafe { hand_out(user, ev) };
        CL_SUCCESS
    }

    /// Performs what is left once `cmd` completed with `status`, then
    /// [`Later::finish`]es with the transfer's status.
    ///
    /// # Safety
    /// Once per transfer, after `cmd` completed or failed.
    unsafe fn complete(self, status: i32) {
        let mut s = status;
        if status == CL_COMPLETE {
            match &self {
                Later::Mapped {
                    mapped,
                    app,
                    size,
                    map_flags,
                    ..
                } => {
                    // SAFETY: the map is done and lasts until the unmap in
                    // `finish`; the application keeps its memory until the
                    // transfer completes.
                    unsafe { copy_for(*map_flags, *mapped as *mut u8, *app as *mut u8, *size) };
                }
                Later::Gated {
                    ctx,
                    dev,
                    mem,
                    op,
                    app,
                    ..
                } => {
                    // SAFETY: what `transfer_after_gate` was given, kept alive
                    // by our references.
                    s = unsafe {
                        transfer_now(
                            *ctx as *mut c_void,
                            *dev as *mut c_void,
                            *mem as *mut c_void,
                            *op,
                            *app as *mut c_void,
                        )
                    };
                }
            }
        }
        // SAFETY: once, after the work.
        unsafe { self.finish(s) };
    }

    /// Gives back what the transfer held (its mapping, our references) and
    /// sets its user event: `CL_COMPLETE`, or the transfer's failure. An
    /// undone transfer finishes as complete, so that the queue goes on.
    ///
    /// # Safety
    /// Once per transfer.
    unsafe fn finish(self, status: i32) {
        match self {
            Later::Mapped {
                q,
                buf,
                mapped,
                hold,
                ..
            } => {
                // SAFETY: our mapping, given back once; then our references
                // go.
                unsafe { unmap_held(q, buf, mapped, &hold, status) };
            }
            Later::Gated { ctx, mem, hold, .. } => {
                // SAFETY: set once; then our references go.
                unsafe {
                    hold.finish(status);
                    gen::clReleaseContext(ctx as *mut c_void);
                    gen::clReleaseMemObject(mem as *mut c_void);
                }
            }
        }
    }
}

/// Gives a mapping of ours back, completes the hold with `status`, and
/// lets our references to the queue and buffer go. The unmap gets an event
/// we hold until then, as the hold's commands do.
///
/// # Safety
/// Once per mapping; `q` and `buf` are references of ours.
unsafe fn unmap_held(q: usize, buf: usize, mapped: usize, hold: &Hold, status: i32) {
    let (q, buf) = (q as *mut c_void, buf as *mut c_void);
    let mut unmapped = std::ptr::null_mut();
    // SAFETY: the caller's contract.
    unsafe {
        let s = clEnqueueUnmapMemObject(
            q,
            buf,
            mapped as *mut c_void,
            0,
            std::ptr::null(),
            &mut unmapped,
        );
        hold.finish(status);
        if s == CL_SUCCESS {
            gen::clReleaseEvent(unmapped);
        }
        gen::clReleaseCommandQueue(q);
        gen::clReleaseMemObject(buf);
    }
}

/// Runs a gated transfer, blocking, on a queue of our own: in order and
/// with no wait list, it runs now.
///
/// # Safety
/// The handles are live; the application keeps the memory at `app` until
/// the transfer completes.
unsafe fn transfer_now(
    ctx: *mut c_void,
    dev: *mut c_void,
    mem: *mut c_void,
    op: GatedOp,
    app: *mut c_void,
) -> i32 {
    let mut e = CL_SUCCESS;
    // SAFETY: the context and device of the application's queue.
    let q = unsafe { gen::clCreateCommandQueue(ctx, dev, 0, &mut e) };
    if e != CL_SUCCESS {
        return e;
    }
    let (none, no_ev) = (std::ptr::null(), std::ptr::null_mut());
    // SAFETY: the caller's contract; blocking, so complete on return.
    let s = unsafe {
        match op {
            GatedOp::Buffer {
                write: true,
                offset,
                size,
            } => clEnqueueWriteBuffer(q, mem, CL_TRUE, offset, size, app, 0, none, no_ev),
            GatedOp::Buffer {
                write: false,
                offset,
                size,
            } => clEnqueueReadBuffer(q, mem, CL_TRUE, offset, size, app, 0, none, no_ev),
            GatedOp::Rect { write, rect: r } => {
                let (bo, ho, rg) = (
                    r.buffer_origin.as_ptr().cast(),
                    r.host_origin.as_ptr().cast(),
                    r.region.as_ptr().cast(),
                );
                let [brp, bsp, hrp, hsp] = r.pitches;
                if write {
                    clEnqueueWriteBufferRect(
                        q, mem, CL_TRUE, bo, ho, rg, brp, bsp, hrp, hsp, app, 0, none, no_ev,
                    )
                } else {
                    clEnqueueReadBufferRect(
                        q, mem, CL_TRUE, bo, ho, rg, brp, bsp, hrp, hsp, app, 0, none, no_ev,
                    )
                }
            }
            GatedOp::Image {
                write,
                origin,
                region,
                row,
                slice,
            } => {
                let (o, r) = (origin.as_ptr().cast(), region.as_ptr().cast());
                if write {
                    clEnqueueWriteImage(q, mem, CL_TRUE, o, r, row, slice, app, 0, none, no_ev)
                } else {
                    clEnqueueReadImage(q, mem, CL_TRUE, o, r, row, slice, app, 0, none, no_ev)
                }
            }
        }
    };
    // SAFETY: our own queue.
    unsafe { gen::clReleaseCommandQueue(q) };
    s
}

/// The callback of the command a transfer completing later waits for.
unsafe extern "C" fn later_ready(_ev: *mut c_void, status: i32, data: *mut c_void) {
    let l = later_transfers().remove(&(data as u64));
    if let Some(l) = l {
        // SAFETY: taken out once, after its command completed.
        unsafe { l.complete(status) };
    }
}

/// After a user event was set to a failure: completes, with their
/// command's failure, the transfers whose command it failed.
fn fail_later_transfers() {
    let cmds: Vec<(u64, usize)> = later_transfers()
        .iter()
        .map(|(t, l)| (*t, l.hold().held[1]))
        .collect();
    for (token, cmd) in cmds {
        // The hold keeps `cmd` alive.
        if let Ok(st @ ..0) = waits::event_status(cmd as *mut c_void) {
            let l = later_transfers().remove(&token);
            if let Some(l) = l {
                // SAFETY: taken out once; its command failed.
                unsafe { l.complete(st) };
            }
        }
    }
}

/// A transfer that completes after we return, of a buffer that is not in
/// memory shared with the server (over TCP, without shared buffers, on
/// other devices): a marker with the transfer's wait list fires a callback
/// (on the notifier thread) that performs the transfer, blocking, on a queue
/// of our own, and completes a user event standing for it. A barrier on that
/// event keeps later commands of the queue after the transfer.
///
/// # Safety
/// As for `clEnqueueReadBuffer` (`write` false) or `clEnqueueWriteBuffer`;
/// `ptr` stays valid until the transfer completes (the API's rule for
/// non-blocking transfers).
#[allow(clippy::too_many_arguments)]
unsafe fn transfer_after_gate(
    q: *mut c_void,
    mem: *mut c_void,
    op: GatedOp,
    ptr: *mut c_void,
    n: u32,
    wl: *const *mut c_void,
    ev: *mut *mut c_void,
) -> i32 {
    let (ctx, dev) = match (
        queue_handle(q, CL_QUEUE_CONTEXT),
        queue_handle(q, CL_QUEUE_DEVICE),
    ) {
        (Ok(c), Ok(d)) => (c, d),
        (Err(s), _) | (_, Err(s)) => return s,
    };
    if let Err(s) = check_gated(mem, op) {
        return s;
    }
    let mut marker = std::ptr::null_mut();
    // SAFETY: forwarded contract; a valid out-slot for the marker.
    let s = unsafe { gen::clEnqueueMarkerWithWaitList(q, n, wl, &mut marker) };
    if s != CL_SUCCESS {
        return s;
    }
    let mut e = CL_SUCCESS;
    // SAFETY: `ctx` is the queue's context.
    let user = unsafe { clCreateUserEvent(ctx, &mut e) };
    let hold = match e {
        // SAFETY: `user` is ours and not set; `marker` is ours.
        CL_SUCCESS => unsafe { Hold::behind(q, user, marker) },
        e => Err(e),
    };
    let hold = match hold {
        Ok(h) => h,
        Err(s) => {
            // SAFETY: our own references.
            unsafe {
                gen::clReleaseEvent(marker);
                if e == CL_SUCCESS {
                    drop_user_event(user, s);
                }
            }
            return s;
        }
    };
    // SAFETY: handles the application holds; our references keep them for
    // the callback.
    unsafe {
        gen::clRetainContext(ctx);
        gen::clRetainMemObject(mem);
    }
    let later = Later::Gated {
        ctx: ctx as usize,
        dev: dev as usize,
        mem: mem as usize,
        op,
        app: ptr as usize,
        hold,
    };
    // SAFETY: `user` is ours, `ev` the application's out-slot.
    unsafe { later.wait_for(marker, user, ev) }
}

/// The user event that stands for a transfer completing later, and the
/// events we hold until it is set: the barrier that keeps the queue's later
/// commands behind it, and the command whose callback completes it. PoCL
/// 3.1 aborts when a command fails whose event nobody holds any more (these
/// fail when what the transfer waits for fails).
struct Hold {
    user: usize,
    held: [usize; 2],
}

impl Hold {
    /// Enqueues the barrier behind `user`; `cmd` is the command whose
    /// callback will set `user` (our reference, which the hold takes).
    ///
    /// # Safety
    /// `user` is a user event of ours, not yet set; `cmd` an event of ours.
    unsafe fn behind(q: *mut c_void, user: *mut c_void, cmd: *mut c_void) -> Result<Hold, i32> {
        let on = [user];
        let mut barrier = std::ptr::null_mut();
        // SAFETY: one event in the list; a valid out-slot.
        let s = unsafe { gen::clEnqueueBarrierWithWaitList(q, 1, on.as_ptr(), &mut barrier) };
        if s != CL_SUCCESS {
            return Err(s);
        }
        Ok(Hold {
            user: user as usize,
            held: [barrier as usize, cmd as usize],
        })
    }

    /// Sets the user event (`CL_COMPLETE`, or the transfer's failure) and
    /// lets every reference go.
    ///
    /// # Safety
    /// Once per hold.
    unsafe fn finish(&self, status: i32) {
        let status = if status == CL_SUCCESS {
            CL_COMPLETE
        } else {
            status.min(-1)
        };
        // SAFETY: our events (the caller's contract).
        unsafe {
            drop_user_event(self.user as *mut c_void, status);
            for e in self.held {
                gen::clReleaseEvent(e as *mut c_void);
            }
        }
    }
}

/// Hands `user` out as the transfer's event.
///
/// # Safety
/// `user` is an event of ours; `ev` is NULL or an out-slot.
unsafe fn hand_out(user: *mut c_void, ev: *mut *mut c_void) {
    if !ev.is_null() {
        // SAFETY: the application's own reference to the user event.
        unsafe {
            gen::clRetainEvent(user);
            *ev = user;
        }
    }
}

/// Sets our user event's status and lets our reference go.
///
/// # Safety
/// `user` is a user event of ours, whose status is not set yet.
unsafe fn drop_user_event(user: *mut c_void, status: i32) {
    // SAFETY: the caller's contract.
    unsafe {
        clSetUserEventStatus(user, status);
        gen::clReleaseEvent(user);
    }
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
        if status < 0 {
            fail_later_transfers();
        }
    }
    s
}

/// # Safety
/// As for `clWaitForEvents`.
pub unsafe extern "C" fn clWaitForEvents(n: u32, list: *const *mut c_void) -> i32 {
    if waits::free_channel() && n > 0 && !list.is_null() {
        // SAFETY: forwarded contract: `list` holds `n` events.
        let events = unsafe { std::slice::from_raw_parts(list, n as usize) };
        if let Err(e) = waits::timed(|| waits::wait(events)) {
            return e;
        }
        // The call below then returns at once, with its own status.
        // SAFETY: forwarded contract.
        return unsafe { gen::clWaitForEvents(n, list) };
    }
    // SAFETY: forwarded contract.
    waits::timed(|| unsafe { gen::clWaitForEvents(n, list) })
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
