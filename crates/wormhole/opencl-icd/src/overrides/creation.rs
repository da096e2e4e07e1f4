//! Creation of buffers, sub-buffers, queues and kernels: what this side
//! notes of a new object (flags, host pointer, context, shape, size held)
//! so that later calls on it are answered or batched here.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{func, Kind, CL_MEM_SIZE, CL_MEM_USE_HOST_PTR, CL_SUCCESS};

use crate::gen;
use crate::objects::obj;
use crate::room;

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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateBuffer's contract
    // (`host_ptr` holding `size` bytes when the flags use it, `err` NULL or writable) is the
    // generated forwarder's.
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateBufferWithProperties'
    // contract (`props` NULL or zero-terminated, `host_ptr` holding `size` bytes when the flags use
    // it) is the generated forwarder's.
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
/// CL_QUEUE_PROFILING_ENABLE.
const PROFILING: u64 = 2;
const QUEUE_PROPERTIES: u64 = 0x1093;

/// The CL_QUEUE_PROPERTIES bits of a property list's name and value pairs
/// (0 when it names none: in order).
fn queue_properties(pairs: &[u64]) -> u64 {
    pairs
        .chunks_exact(2)
        .filter(|kv| kv[0] == QUEUE_PROPERTIES)
        .fold(0, |bits, kv| bits | kv[1])
}

/// Notes whether a new queue executes its commands in order and profiles
/// them, and its context.
fn note_queue(q: *mut c_void, ctx: *mut c_void, props: u64) {
    if let Ok(Some(o)) = obj(q, Kind::Queue) {
        o.in_order
            .store(props & OUT_OF_ORDER == 0, Ordering::Relaxed);
        o.profiling.store(props & PROFILING != 0, Ordering::Relaxed);
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateCommandQueue's
    // contract is the generated forwarder's.
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
    // SAFETY: the arguments are the application's, passed unchanged:
    // clCreateCommandQueueWithProperties' contract is the generated forwarder's.
    let q = unsafe { gen::clCreateCommandQueueWithProperties(ctx, dev, props, err) };
    if !q.is_null() {
        // SAFETY: `props` is NULL or zero-terminated name/value pairs by
        // clCreateCommandQueueWithProperties' contract, the shape zero_list(.., true) reads; a
        // queue was created from it, so the list was well formed.
        let list = unsafe { crate::custom::zero_list(props, true) }.unwrap_or_default();
        note_queue(q, ctx, queue_properties(&list));
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateKernel's contract is
    // the generated forwarder's.
    let k = unsafe { gen::clCreateKernel(program, name, err) };
    if let (Ok(Some(o)), Ok(Some(p)), false) = (
        obj(k, Kind::Kernel),
        obj(program, Kind::Program),
        name.is_null(),
    ) {
        // SAFETY: `name` is non-NULL (checked above) and NUL-terminated by clCreateKernel's
        // contract; the kernel was created from it.
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
    // SAFETY: the arguments are the application's, passed unchanged: clSetKernelArg's contract
    // (`value` NULL or `size` bytes) is the generated forwarder's.
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
pub(super) fn remember_host_ptr(m: *mut c_void, flags: u64, host_ptr: *mut c_void) {
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateSubBuffer's contract
    // (`info` a cl_buffer_region for a region sub-buffer) is the generated forwarder's.
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

/// Counts a new memory object's bytes as held by the application until
/// its last release (`room`).
pub(super) fn count_held(m: *mut c_void, bytes: u64) {
    if let Ok(Some(o)) = obj(m, Kind::Mem) {
        o.counted.store(bytes, Ordering::Relaxed);
        room::created(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CL_QUEUE_SIZE, a property that is not the bits.
    const QUEUE_SIZE: u64 = 0x1094;

    #[test]
    fn a_queue_is_out_of_order_only_if_its_properties_say_so() {
        assert_eq!(queue_properties(&[]), 0);
        assert_eq!(queue_properties(&[QUEUE_SIZE, OUT_OF_ORDER]), 0);
        let listed = [QUEUE_SIZE, 4096, QUEUE_PROPERTIES, OUT_OF_ORDER | 2];
        assert_eq!(queue_properties(&listed) & OUT_OF_ORDER, OUT_OF_ORDER);
        assert_eq!(queue_properties(&listed), 3);
        // A name without its value is no pair.
        assert_eq!(queue_properties(&[QUEUE_PROPERTIES]), 0);
    }
}
