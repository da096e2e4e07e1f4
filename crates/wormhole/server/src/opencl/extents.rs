//! Bounds the library does not check itself: rectangles within buffers,
//! boxes within images, spans within buffers. The description's `check=`
//! clauses call these (through `overrides`) before a transfer is enqueued.

use std::ffi::c_void;

use wormhole_opencl_api::{
    rect_extent, triple, CL_IMAGE_ARRAY_SIZE, CL_IMAGE_DEPTH, CL_IMAGE_ELEMENT_SIZE,
    CL_IMAGE_HEIGHT, CL_IMAGE_WIDTH, CL_INVALID_MEM_OBJECT, CL_INVALID_VALUE, CL_MEM_OBJECT_BUFFER,
    CL_MEM_OBJECT_IMAGE1D_ARRAY, CL_MEM_OBJECT_IMAGE2D_ARRAY, CL_MEM_SIZE, CL_MEM_TYPE, CL_SUCCESS,
};

use super::ffi;

/// Reads three size_t values (an origin or a region) from a request.
///
/// # Safety
/// `p` is NULL or points to 24 bytes (the decoder checked the length).
unsafe fn triple_at(ptr: *const c_void) -> Option<[u64; 3]> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is non-NULL (checked above), so it points to 24 bytes
    // of the request (this function's contract: the decoder checked the
    // length); read as bytes, so unaligned is fine.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, 24) };
    triple(bytes)
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
    // SAFETY: `origin` and `region` are NULL or 24 bytes each (this
    // function's contract: the decoder's `bytes[24]?`), as `triple_at` needs.
    let (at, size) = unsafe { (triple_at(origin), triple_at(region)) };
    let (at, size) = (at.ok_or(CL_INVALID_VALUE)?, size.ok_or(CL_INVALID_VALUE)?);
    let end = rect_extent(size, 1, row as u64, slice as u64)
        .and_then(|ext| ext.end(at, 1))
        .ok_or(CL_INVALID_VALUE)?;
    if end > mem_size(buf)? {
        return Err(CL_INVALID_VALUE);
    }
    Ok(())
}

/// One fixed-size value from a library info query: `query(size, out)` makes
/// the call with `out` holding `size` bytes. Its status if it failed.
pub(crate) fn scalar_info<T: Default>(
    query: impl FnOnce(usize, *mut c_void) -> i32,
) -> Result<T, i32> {
    let mut value = T::default();
    match query(
        std::mem::size_of::<T>(),
        &mut value as *mut T as *mut c_void,
    ) {
        CL_SUCCESS => Ok(value),
        status => Err(status),
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
    // SAFETY: `origin` and `region` are NULL or 24 bytes each (this
    // function's contract: the decoder's `bytes[24]?`), as `triple_at` needs.
    let (at, size) = unsafe { (triple_at(origin), triple_at(region)) };
    let (at, size) = (at.ok_or(CL_INVALID_VALUE)?, size.ok_or(CL_INVALID_VALUE)?);
    let width = image_size(img, CL_IMAGE_WIDTH)?;
    let height = image_size(img, CL_IMAGE_HEIGHT)?.max(1);
    let depth = image_size(img, CL_IMAGE_DEPTH)?.max(1);
    let layers = image_size(img, CL_IMAGE_ARRAY_SIZE)?.max(1);
    let dims = match mem_type(img)? {
        CL_MEM_OBJECT_BUFFER => return Err(CL_INVALID_MEM_OBJECT),
        CL_MEM_OBJECT_IMAGE1D_ARRAY => [width, layers, 1],
        CL_MEM_OBJECT_IMAGE2D_ARRAY => [width, height, layers],
        _ => [width, height, depth],
    };
    for i in 0..3 {
        let end = at[i].checked_add(size[i]).ok_or(CL_INVALID_VALUE)?;
        if size[i] == 0 || end > dims[i] {
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

/// A linear transfer's span within its buffer (reads, writes, copies,
/// fills). The library checks it as well; a tenant's offsets are bounded
/// here first, so no library's omission can reach past a buffer.
///
/// # Safety
/// None: `unsafe` only to share the form of the other checks (`buf` is a
/// memory object from the table, as the decoder's `mem` kind ensures).
pub(crate) unsafe fn buffer_range_ok(
    buf: *mut c_void,
    offset: usize,
    size: usize,
) -> Result<(), i32> {
    buffer_span_ok(buf, offset as u64, size as u64)
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
    // SAFETY: `img` is a memory object from the table and `origin` and
    // `region` are NULL or 24 bytes each (this function's contract), as
    // `image_box_ok` needs.
    let elem = unsafe { image_box_ok(img, origin, region) }?;
    // SAFETY: `region` was checked non-NULL by `image_box_ok`, so it is
    // 24 bytes (this function's contract).
    let bytes = unsafe { box_bytes(region, elem) }?;
    buffer_span_ok(buf, offset as u64, bytes)
}

/// A value the API requires (a fill colour, say) that the client sent NULL.
///
/// # Safety
/// None: `unsafe` only to share the form of the other checks.
pub(crate) unsafe fn present(value: Option<&[u8]>) -> Result<(), i32> {
    value.map(|_| ()).ok_or(CL_INVALID_VALUE)
}

/// Bytes in an image box of `region` elements of `elem` bytes.
///
/// # Safety
/// `region` is 24 bytes (checked non-NULL by [`image_box_ok`] first).
unsafe fn box_bytes(region: *const c_void, elem: u64) -> Result<u64, i32> {
    // SAFETY: `region` is 24 bytes (this function's contract: checked
    // non-NULL by `image_box_ok` first), as `triple_at` needs.
    let size = unsafe { triple_at(region) }.ok_or(CL_INVALID_VALUE)?;
    size.iter()
        .try_fold(elem, |acc, &x| acc.checked_mul(x))
        .ok_or(CL_INVALID_VALUE)
}
