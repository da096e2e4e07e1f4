//! Images: their creation (layout and host memory kept here), and their
//! reads and writes.
#![allow(non_snake_case)]

use std::ffi::c_void;

use wormhole_opencl_api::{
    Kind, CL_IMAGE_ELEMENT_SIZE, CL_MEM_OBJECT_IMAGE2D, CL_MEM_OBJECT_IMAGE3D, CL_MEM_TYPE,
};

use super::creation::{count_held, remember_host_ptr};
use super::events::settle_for;
use super::mem_info;
use crate::connection::info_value;
use crate::gen;
use crate::host_images;
use crate::later::{transfer_after_gate, GatedOp};
use crate::objects::obj;
use crate::waits;

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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateImage's contract is
    // the generated forwarder's.
    let m = unsafe { gen::clCreateImage(ctx, flags, format, desc, host_ptr, err) };
    // SAFETY: `desc` is NULL or a cl_image_desc and `format` NULL or a cl_image_format (two
    // cl_uints) by clCreateImage's contract; `m` may be NULL (creation failed), which new_image's
    // lookups refuse.
    unsafe { new_image_of_desc(m, flags, format, desc, host_ptr) };
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateImageWithProperties's
    // contract is the generated forwarder's.
    let m =
        unsafe { gen::clCreateImageWithProperties(ctx, props, flags, format, desc, host_ptr, err) };
    // SAFETY: `desc` is NULL or a cl_image_desc and `format` NULL or a cl_image_format by
    // clCreateImageWithProperties's contract; a NULL `m` (creation failed) is refused by
    // new_image's lookups.
    unsafe { new_image_of_desc(m, flags, format, desc, host_ptr) };
    m
}

/// [`new_image`] for an image the application described with a
/// `cl_image_desc`.
///
/// # Safety
/// `format` is NULL or a `cl_image_format`; `desc` NULL or a `cl_image_desc`.
unsafe fn new_image_of_desc(
    m: *mut c_void,
    flags: u64,
    format: *const c_void,
    desc: *const c_void,
    host_ptr: *mut c_void,
) {
    // SAFETY: `desc` is NULL or a cl_image_desc and `format` NULL or a cl_image_format (this fn's
    // contract), all that shape_of_desc and new_image read through them.
    unsafe {
        let shape = host_images::shape_of_desc(desc);
        new_image(m, flags, format, shape, host_ptr);
    }
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
        // SAFETY: `format` is NULL or a cl_image_format (this fn's contract), all that remember and
        // shape_bytes read through it.
        unsafe {
            host_images::remember(m, flags, format, shape);
            count_held(m, host_images::shape_bytes(&shape, format));
        }
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateImage2D's contract is
    // the generated forwarder's.
    let m = unsafe { gen::clCreateImage2D(ctx, flags, format, w, h, row, host_ptr, err) };
    let shape = host_images::Shape {
        image_type: CL_MEM_OBJECT_IMAGE2D,
        width: w,
        height: h,
        row_pitch: row,
        ..Default::default()
    };
    // SAFETY: `format` is NULL or a cl_image_format by clCreateImage2D's contract.
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
    // SAFETY: the arguments are the application's, passed unchanged: clCreateImage3D's contract is
    // the generated forwarder's.
    let m = unsafe { gen::clCreateImage3D(ctx, flags, format, w, h, d, row, slice, host_ptr, err) };
    let shape = host_images::Shape {
        image_type: CL_MEM_OBJECT_IMAGE3D,
        width: w,
        height: h,
        depth: d,
        row_pitch: row,
        slice_pitch: slice,
        ..Default::default()
    };
    // SAFETY: `format` is NULL or a cl_image_format by clCreateImage3D's contract.
    unsafe { new_image(m, flags, format, Some(shape), host_ptr) };
    m
}

/// An image's type and element size, which size its transfers' windows.
pub(crate) fn image_shape(image: *mut c_void) -> Result<(u32, u64), i32> {
    let elem = host_images::server_element_size(info_value(
        gen::clGetImageInfo,
        image,
        CL_IMAGE_ELEMENT_SIZE,
    )?)?;
    Ok((mem_info::<u32>(image, CL_MEM_TYPE)?, elem))
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
    // SAFETY: `ptr` is non-NULL and, by clEnqueueRead/WriteImage's contract (this fn's), holds the
    // host window that `row`, `slice` and `region` describe and stays valid until the non-blocking
    // transfer completes, as transfer_after_gate requires; `wl` holds `n` events and `ev` is NULL
    // or writable.
    Some(unsafe { transfer_after_gate(q, image, op, ptr, n, wl, ev) })
}

/// What an image read or write does before it is forwarded: settle it
/// (see [`settle_for`]; one that [`image_later`] did not take), and stash the
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
    // SAFETY: `wl` holds `n` events (this fn's contract), as settle_for requires.
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
            // SAFETY: the application's arguments, unchanged: `origin`/`region` are NULL or three
            // size_t, `ptr` holds the window they describe, `wl` `n` events, `ev` NULL or writable,
            // by this OpenCL function's contract, which is image_later's.
            let later = unsafe {
                image_later(
                    q, image, $write, blocking, origin, region, row, slice, app, n, wl, ev,
                )
            };
            if let Some(s) = later {
                return s;
            }
            // SAFETY: `wl` holds `n` events by this OpenCL function's contract on event_wait_list.
            if let Err(e) = unsafe { before_image_transfer(q, image, blocking, n, wl) } {
                return e;
            }
            // SAFETY: the arguments are the application's, passed unchanged: this OpenCL function's
            // contract is the generated forwarder's.
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
