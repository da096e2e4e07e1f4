//! Client halves of the arguments the description marks `custom`. Each
//! module has `put` (marshal before the call) and `take` (unmarshal after);
//! the server's `custom` modules are the other halves.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{
    func, image_element_size, image_host_size, image_window, map_context_platform,
    map_context_platform_bytes, rect_extent, ImageWindow, Kind, RectExtent, CL_CONTEXT_PROPERTIES,
    CL_MEM_COPY_HOST_PTR, CL_MEM_FLAGS, CL_MEM_USE_HOST_PTR, IMAGE_DESC_LEN,
};

use crate::connection::{Call, Reply};
use crate::objects::{arg_object, obj, object_for, ArgObject};
use wormhole_opencl_api::CL_INVALID_VALUE;

/// Rewrites ids in custom info values into our objects.
pub fn info(f: u32, param: u32, v: &mut [u8], first: *mut c_void) {
    if f == func::clGetContextInfo && param == CL_CONTEXT_PROPERTIES {
        map_context_platform_bytes(v, |id| object_for(id, Kind::Platform, 0) as u64);
    }
    // CL_MEM_FLAGS: the server copied a USE_HOST_PTR buffer's memory; the
    // application asked for (and, through maps, gets) USE_HOST_PTR.
    if f == func::clGetMemObjectInfo && param == CL_MEM_FLAGS && v.len() >= 8 {
        let uses_host = obj(first, Kind::Mem)
            .ok()
            .flatten()
            .is_some_and(|o| o.host_ptr.load(Ordering::Relaxed) != 0);
        if uses_host {
            let flags = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
            let flags = (flags & !CL_MEM_COPY_HOST_PTR) | CL_MEM_USE_HOST_PTR;
            v[..8].copy_from_slice(&flags.to_le_bytes());
        }
    }
    if f == func::clGetMemObjectInfo && param == 0x1103 && v.len() >= 8 {
        let host = obj(first, Kind::Mem)
            .ok()
            .flatten()
            .map_or(0, |o| o.host_ptr.load(Ordering::Relaxed));
        v[..8].copy_from_slice(&host.to_le_bytes());
    }
}

/// Reads a zero-terminated list of 64-bit values (excluding the zero).
///
/// # Safety
/// `p` is NULL or a zero-terminated list, as the API requires.
pub(crate) unsafe fn zero_list(p: *const u64, pairs: bool) -> Option<Vec<u64>> {
    if p.is_null() {
        return None;
    }
    let mut v = Vec::new();
    let mut i = 0;
    // Bounded: a property list longer than this is not a property list.
    while i < 4096 {
        // SAFETY: `p` is non-NULL and, by the OpenCL properties rule (this fn's contract), readable
        // up to and including its zero entry; `i` has not passed that zero (the loop stops at it).
        let key = unsafe { *p.add(i) };
        if key == 0 {
            break;
        }
        v.push(key);
        if pairs {
            // SAFETY: `key` at `i` is non-zero, and in a property list every non-zero key is
            // followed by its value, so `i + 1` is still inside the list.
            v.push(unsafe { *p.add(i + 1) });
            i += 2;
        } else {
            i += 1;
        }
    }
    Some(v)
}

fn put_list(c: &mut Call, v: Option<Vec<u64>>) {
    match v {
        None => c.enc.bool(false),
        Some(v) => {
            c.enc.bool(true);
            c.enc.u64s(&v);
        }
    }
}

/// Encodes a list of `n` entries, absent unless `present`, each entry by
/// `each` (given its index), which may refuse the call.
fn put_entries(
    c: &mut Call,
    present: bool,
    n: u32,
    mut each: impl FnMut(&mut wormhole_wire::Encoder, usize) -> Result<(), i32>,
) -> Result<(), i32> {
    c.enc.bool(present);
    if present {
        c.enc.u32(n);
        for i in 0..n as usize {
            each(&mut c.enc, i)?;
        }
    }
    Ok(())
}

macro_rules! no_take {
    ($($dep:ident : $t:ty),*) => {
        // Unused where every function with this argument is async.
        #[allow(dead_code, clippy::too_many_arguments)]
        pub fn take(_s: (), _r: &mut Reply, _v: impl Sized $(, $dep: $t)*) -> Result<(), i32> {
            $(let _ = $dep;)*
            Ok(())
        }
    };
}

pub mod context_props {
    use super::*;
    /// # Safety
    /// `p` is NULL or a zero-terminated property list.
    pub unsafe fn put(c: &mut Call, p: *const isize) -> Result<(), i32> {
        // SAFETY: `p` is NULL or a zero-terminated cl_context_properties list by
        // clCreateContext/FromType's contract (this fn's), which is zero_list's.
        let mut v = unsafe { zero_list(p as *const u64, true) };
        if let Some(v) = v.as_mut() {
            map_context_platform(v, |p| {
                obj(p as *mut c_void, Kind::Platform).map(|o| o.map_or(0, |o| o.id))
            })?;
        }
        put_list(c, v);
        Ok(())
    }
    no_take!();
}

pub mod partition_props {
    use super::*;
    const BY_COUNTS: u64 = 0x1087;
    /// # Safety
    /// `p` is NULL or a partition property list.
    pub unsafe fn put(c: &mut Call, p: *const isize) -> Result<(), i32> {
        let p = p as *const u64;
        let v = if p.is_null() {
            None
        } else {
            // SAFETY: `p` is non-NULL and a partition property list (this fn's contract,
            // clCreateSubDevices'), which has at least its terminating entry.
            let first = unsafe { *p };
            if first == BY_COUNTS {
                // {BY_COUNTS, n1, n2, ..., LIST_END(0), 0}
                // SAFETY: a BY_COUNTS list is its counts ended by
                // CL_DEVICE_PARTITION_BY_COUNTS_LIST_END (0) by clCreateSubDevices' contract:
                // zero_list(.., false) reads up to that zero.
                let mut v = unsafe { zero_list(p, false) }.unwrap_or_default();
                v.push(0);
                Some(v)
            } else {
                // SAFETY: other partition lists are {key, value} pairs ended by 0 by
                // clCreateSubDevices' contract, the shape zero_list(.., true) reads.
                unsafe { zero_list(p, true) }
            }
        };
        put_list(c, v);
        Ok(())
    }
    no_take!();
}

pub mod queue_props {
    use super::*;
    /// # Safety
    /// `p` is NULL or a zero-terminated property list.
    pub unsafe fn put(c: &mut Call, p: *const u64) -> Result<(), i32> {
        // SAFETY: `p` is NULL or a zero-terminated {key, value} list by
        // clCreateCommandQueueWithProperties'/clCreateSamplerWithProperties' contract (this fn's).
        put_list(c, unsafe { zero_list(p, true) });
        Ok(())
    }
    no_take!();
}

pub use queue_props as sampler_props;

/// Tag 0: NULL; 1: data; 2: a pointer without USE/COPY (the server reports
/// CL_INVALID_HOST_PTR, as the library would).
///
/// # Safety
/// `p` is NULL or holds `size` bytes when the flags say it is read.
unsafe fn put_host(c: &mut Call, p: *mut c_void, flags: u64, size: Option<u64>) {
    // Whether there is a pointer, and whether the flags use it, decide
    // what a creation can fail on (not where it points).
    if p.is_null() {
        c.enc.u8(0);
        c.shape(0);
    } else if flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) == 0 {
        c.enc.u8(2);
        c.shape(2);
    } else {
        c.enc.u8(1);
        c.shape(1);
        let n = size.unwrap_or(0) as usize;
        // SAFETY: USE_HOST_PTR or COPY_HOST_PTR is set and `p` non-NULL, so by the creating call's
        // contract (this fn's) `p` holds the object's host size, which is `size` (the buffer's
        // size, or the image's computed from its desc and pitches; None reads 0 bytes).
        c.enc
            .bytes(unsafe { std::slice::from_raw_parts(p as *const u8, n) });
    }
}

pub mod host_ptr {
    use super::*;
    /// # Safety
    /// As the API requires of host_ptr.
    pub unsafe fn put(c: &mut Call, p: *mut c_void, flags: u64, size: usize) -> Result<(), i32> {
        // SAFETY: `p` is NULL or, when the flags use it, holds `size` bytes by clCreateBuffer's
        // contract on host_ptr.
        unsafe { put_host(c, p, flags, Some(size as u64)) };
        Ok(())
    }
    no_take!(flags: u64, size: usize);
}

/// What a buffer's size can make its creation fail on, as a call's shape: 0
/// is invalid, and every device that is not of the custom type takes any
/// size up to 1 MiB (the least CL_DEVICE_MAX_MEM_ALLOC_SIZE the embedded
/// profile allows); a larger size is its own class. Running out of memory
/// is the one failure left: a creation that could ([`crate::room`]) must
/// wait for its answer, so that it reports it itself.
pub fn buffer_shape(ctx: *mut c_void, size: usize) -> u64 {
    const ALWAYS_ALLOWED: usize = 1 << 20;
    if crate::room::may_run_out(ctx, size) {
        return crate::connection::ANSWER_NEEDED;
    }
    match size {
        0 => 0,
        1..=ALWAYS_ALLOWED => 1,
        s => s as u64,
    }
}

/// # Safety
/// `f` is NULL or a cl_image_format.
unsafe fn format_elem(f: *const c_void) -> Option<u64> {
    if f.is_null() {
        return None;
    }
    // SAFETY: `f` is non-NULL and a cl_image_format (this fn's contract): two cl_uints, order and
    // type.
    let (order, ty) = unsafe { (*(f as *const u32), *(f as *const u32).add(1)) };
    image_element_size(order, ty)
}

pub mod image_desc {
    use super::*;
    /// # Safety
    /// `p` is NULL or a cl_image_desc.
    pub unsafe fn put(c: &mut Call, p: *const c_void) -> Result<(), i32> {
        if p.is_null() {
            c.enc.opt_bytes(None);
            return Ok(());
        }
        // SAFETY: `p` is non-NULL and a cl_image_desc by clCreateImage's contract (this fn's),
        // IMAGE_DESC_LEN (72) bytes on 64-bit.
        let mut b = unsafe { std::slice::from_raw_parts(p as *const u8, IMAGE_DESC_LEN) }.to_vec();
        let mem = usize::from_le_bytes(b[64..72].try_into().unwrap_or([0; 8]));
        let id = obj(mem as *mut c_void, Kind::Mem)?.map_or(0, |o| o.id);
        b[64..72].copy_from_slice(&id.to_le_bytes());
        c.enc.opt_bytes(Some(&b));
        Ok(())
    }
    no_take!();
}

pub mod image_host_ptr {
    use super::*;
    /// # Safety
    /// As the API requires of its arguments.
    pub unsafe fn put(
        c: &mut Call,
        p: *mut c_void,
        flags: u64,
        fmt: *const c_void,
        desc: *const c_void,
    ) -> Result<(), i32> {
        let size = if desc.is_null() {
            None
        } else {
            let d = desc as *const u64;
            // SAFETY: `desc` is non-NULL and a cl_image_desc by clCreateImage's contract (this
            // fn's): a cl_mem_object_type padded to 8 bytes, then the six size_t read here.
            let (ty, w, h, dep, arr, row, slice) = unsafe {
                (
                    *(desc as *const u32),
                    *d.add(1),
                    *d.add(2),
                    *d.add(3),
                    *d.add(4),
                    *d.add(5),
                    *d.add(6),
                )
            };
            // SAFETY: `fmt` is NULL or a cl_image_format by clCreateImage's contract.
            unsafe { format_elem(fmt) }
                .and_then(|e| image_host_size(ty, w, h, dep, arr, row, slice, e))
        };
        // SAFETY: by clCreateImage's contract `p`, when the flags use it, holds at least the size
        // image_host_size computes from the desc's dimensions and pitches (the spec's row_pitch *
        // height * depth rule).
        unsafe { put_host(c, p, flags, size) };
        Ok(())
    }
    no_take!(flags: u64, fmt: *const c_void, desc: *const c_void);
}

pub mod image2d_host_ptr {
    use super::*;
    /// # Safety
    /// As the API requires of its arguments.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put(
        c: &mut Call,
        p: *mut c_void,
        flags: u64,
        fmt: *const c_void,
        w: usize,
        h: usize,
        row: usize,
    ) -> Result<(), i32> {
        // SAFETY: `fmt` is NULL or a cl_image_format by clCreateImage2D's contract.
        let size = unsafe { format_elem(fmt) }
            .and_then(|e| image_host_size(0x10F1, w as u64, h as u64, 1, 1, row as u64, 0, e));
        // SAFETY: by clCreateImage2D's contract `p`, when the flags use it, holds at least
        // row_pitch * height bytes, the size computed above.
        unsafe { put_host(c, p, flags, size) };
        Ok(())
    }
    no_take!(flags: u64, fmt: *const c_void, w: usize, h: usize, row: usize);
}

pub mod image3d_host_ptr {
    use super::*;
    /// # Safety
    /// As the API requires of its arguments.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put(
        c: &mut Call,
        p: *mut c_void,
        flags: u64,
        fmt: *const c_void,
        w: usize,
        h: usize,
        d: usize,
        row: usize,
        slice: usize,
    ) -> Result<(), i32> {
        // SAFETY: `fmt` is NULL or a cl_image_format by clCreateImage3D's contract.
        let size = unsafe { format_elem(fmt) }.and_then(|e| {
            image_host_size(
                0x10F2,
                w as u64,
                h as u64,
                d as u64,
                1,
                row as u64,
                slice as u64,
                e,
            )
        });
        // SAFETY: by clCreateImage3D's contract `p`, when the flags use it, holds at least
        // slice_pitch * depth bytes, the size computed above.
        unsafe { put_host(c, p, flags, size) };
        Ok(())
    }
    #[allow(clippy::too_many_arguments)]
    pub fn take(
        _s: (),
        _r: &mut Reply,
        _v: *mut c_void,
        _f: u64,
        _fmt: *const c_void,
        _w: usize,
        _h: usize,
        _d: usize,
        _row: usize,
        _slice: usize,
    ) -> Result<(), i32> {
        Ok(())
    }
}

pub mod sources {
    use super::*;
    /// # Safety
    /// `strings` holds `count` strings, NUL-terminated where `lengths` is
    /// NULL or has a zero.
    pub unsafe fn put(
        c: &mut Call,
        strings: *const *const c_char,
        count: u32,
        lengths: *const usize,
    ) -> Result<(), i32> {
        put_entries(c, !strings.is_null(), count, |enc, i| {
            // SAFETY: `strings` is non-NULL (`present`) and holds `count` entries by
            // clCreateProgramWithSource's contract; `i < count`.
            let s = unsafe { *strings.add(i) };
            let len = if lengths.is_null() {
                0
            } else {
                // SAFETY: `lengths` is non-NULL and holds `count` entries by
                // clCreateProgramWithSource's contract; `i < count`.
                unsafe { *lengths.add(i) }
            };
            let bytes = if s.is_null() {
                // A NULL entry is CL_INVALID_VALUE, as the API requires.
                return Err(CL_INVALID_VALUE);
            } else if len == 0 {
                // SAFETY: a zero (or absent) length means NUL-terminated by
                // clCreateProgramWithSource's contract; `s` is non-NULL.
                unsafe { CStr::from_ptr(s) }.to_bytes()
            } else {
                // SAFETY: a non-zero `lengths[i]` is the length of `strings[i]` by
                // clCreateProgramWithSource's contract; `s` is non-NULL.
                unsafe { std::slice::from_raw_parts(s as *const u8, len) }
            };
            enc.bytes(bytes);
            Ok(())
        })
    }
    no_take!(count: u32, lengths: *const usize);
}

pub mod source_lengths {
    use super::*;
    pub fn put(_c: &mut Call, _p: *const usize, _strings: *const *const c_char) -> Result<(), i32> {
        Ok(())
    }
    no_take!(strings: *const *const c_char);
}

pub mod binaries {
    use super::*;
    /// # Safety
    /// `lengths` and `binaries` hold `n` entries each.
    pub unsafe fn put(
        c: &mut Call,
        lengths: *const usize,
        n: u32,
        binaries: *const *const u8,
    ) -> Result<(), i32> {
        let present = !lengths.is_null() && !binaries.is_null();
        put_entries(c, present, n, |enc, i| {
            // SAFETY: `binaries` and `lengths` are non-NULL (`present`) and hold `n` entries by
            // clCreateProgramWithBinary's contract (num_devices of each); `i < n`.
            let (p, len) = unsafe { (*binaries.add(i), *lengths.add(i)) };
            if p.is_null() {
                enc.opt_bytes(None);
            } else {
                // SAFETY: `p` is non-NULL and holds `lengths[i]` bytes by
                // clCreateProgramWithBinary's contract.
                enc.opt_bytes(Some(unsafe { std::slice::from_raw_parts(p, len) }));
            }
            Ok(())
        })
    }
    no_take!(n: u32, binaries: *const *const u8);
}

pub mod binary_ptrs {
    use super::*;
    pub fn put(_c: &mut Call, _p: *const *const u8, _lengths: *const usize) -> Result<(), i32> {
        Ok(())
    }
    no_take!(lengths: *const usize);
}

pub mod header_names {
    use super::*;
    /// # Safety
    /// `p` is NULL or holds `n` NUL-terminated strings.
    pub unsafe fn put(c: &mut Call, p: *const *const c_char, n: u32) -> Result<(), i32> {
        put_entries(c, !p.is_null(), n, |enc, i| {
            // SAFETY: `p` is non-NULL and holds `n` entries by clCompileProgram's contract on
            // header_include_names; `i < n`.
            let s = unsafe { *p.add(i) };
            let b = if s.is_null() {
                &[][..]
            } else {
                // SAFETY: `s` is non-NULL and a NUL-terminated header name by clCompileProgram's
                // contract.
                unsafe { CStr::from_ptr(s) }.to_bytes()
            };
            enc.bytes(b);
            Ok(())
        })
    }
    no_take!(n: u32);
}

pub mod kernel_arg {
    use super::*;
    /// A pointer-sized argument that holds one of our memory objects or
    /// samplers is sent as its id; anything else as bytes.
    ///
    /// # Safety
    /// `p` is NULL or holds `size` bytes.
    pub unsafe fn put(
        c: &mut Call,
        p: *const c_void,
        size: usize,
        _kernel: *mut c_void,
        _index: u32,
    ) -> Result<(), i32> {
        // The shape of a kernel argument is its size and kind (NULL, bytes,
        // which object), not a scalar's value: a new value for the same
        // argument fails only if the old one would. A NULL value can fail
        // where bytes succeeded (and the reverse), an object of another
        // context where one of this context succeeded, and a non-zero
        // pointer-sized value where zero (a NULL buffer) succeeded.
        c.shape(size as u64);
        if p.is_null() {
            c.shape(0x4e55_4c4c);
            c.enc.u8(0);
            return Ok(());
        }
        if size == std::mem::size_of::<usize>() {
            // SAFETY: `p` is non-NULL and holds `size` (pointer-sized) bytes by clSetKernelArg's
            // contract on arg_value, with no promise of alignment (the size may be wrong for the
            // value).
            let h = unsafe { std::ptr::read_unaligned(p as *const *mut c_void) };
            let o = match arg_object(h) {
                ArgObject::Live(o) => Some(o),
                // Natively a use after free, which the library may follow:
                // refused here as the handle it no longer is.
                ArgObject::Released(k) => return Err(k.invalid()),
                ArgObject::Bytes => None,
            };
            if let Some(o) = o {
                let tag = match o.kind {
                    Kind::Mem => Some(0u8),
                    Kind::Sampler => Some(1),
                    _ => None,
                };
                if let Some(tag) = tag {
                    c.shape(2 + tag as u64);
                    c.shape(o.shape_key());
                    c.enc.u8(2);
                    c.enc.u8(tag);
                    c.enc.u64(o.id);
                    return Ok(());
                }
            }
        }
        // SAFETY: `p` is non-NULL and holds `size` bytes by clSetKernelArg's contract on arg_value.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, size) };
        c.shape(if bytes.iter().all(|&b| b == 0) {
            1
        } else {
            0x4259_5445
        });
        c.enc.u8(1);
        c.enc.bytes(bytes);
        Ok(())
    }
    no_take!(size: usize, kernel: *mut c_void, index: u32);
}

/// The host window of a rectangular transfer.
///
/// # Safety
/// `region` and `origin` are NULL or 3 size_t each.
unsafe fn rect_window(
    region: *const c_void,
    origin: *const c_void,
    row: usize,
    slice: usize,
) -> Option<(RectExtent, u64)> {
    if region.is_null() || origin.is_null() {
        return None;
    }
    let (r, o) = (region as *const u64, origin as *const u64);
    // SAFETY: `region` and `origin` are non-NULL (checked above) and three size_t each by this fn's
    // contract (the rect calls' region and host_origin).
    let (r3, o3) = unsafe { ([*r, *r.add(1), *r.add(2)], [*o, *o.add(1), *o.add(2)]) };
    let ext = rect_extent(r3, 1, row as u64, slice as u64)?;
    Some((ext, ext.offset(o3, 1)?))
}

pub mod rect_out {
    use super::*;
    /// # Safety
    /// As the API requires of a rectangular read.
    /// (The buffer's side of the rectangle is the server's to check.)
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn put(
        c: &mut Call,
        p: *mut c_void,
        region: *const c_void,
        origin: *const c_void,
        row: usize,
        slice: usize,
        _buffer: *mut c_void,
        _buffer_origin: *const c_void,
        _buffer_row: usize,
        _buffer_slice: usize,
    ) -> Result<(), i32> {
        // SAFETY: `region` and `origin` are NULL or three size_t each by clEnqueueReadBufferRect's
        // contract (this fn's), all rect_window reads.
        c.enc
            .bool(!p.is_null() && unsafe { rect_window(region, origin, row, slice) }.is_some());
        Ok(())
    }
    /// # Safety
    /// As for `put`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn take(
        _s: (),
        r: &mut Reply,
        p: *mut c_void,
        region: *const c_void,
        origin: *const c_void,
        row: usize,
        slice: usize,
        _buffer: *mut c_void,
        _buffer_origin: *const c_void,
        _buffer_row: usize,
        _buffer_slice: usize,
    ) -> Result<(), i32> {
        let data = r.opt_bytes()?;
        // SAFETY: `region` and `origin` are NULL or three size_t each by clEnqueueReadBufferRect's
        // contract (this fn's).
        let window = unsafe { rect_window(region, origin, row, slice) };
        if let (Some(b), Some((ext, off))) = (data, window) {
            let r = region as *const u64;
            // SAFETY: non-NULL (rect_window checked), 3 size_t.
            let r3 = unsafe { [*r, *r.add(1), *r.add(2)] };
            let w = ImageWindow {
                row_bytes: r3[0],
                ystep: ext.row,
                zstep: ext.slice,
                extent: ext.extent,
            };
            // SAFETY: the window lies in the application's buffer, which
            // holds `ext.extent` bytes from `off`.
            unsafe { scatter_rows(&b, (p as *mut u8).add(off as usize), w, r3) };
        }
        Ok(())
    }
}

pub mod rect_in {
    use super::*;
    /// # Safety
    /// As the API requires of a rectangular write.
    pub unsafe fn put(
        c: &mut Call,
        p: *const c_void,
        region: *const c_void,
        origin: *const c_void,
        row: usize,
        slice: usize,
    ) -> Result<(), i32> {
        // SAFETY: `region` and `origin` are NULL or three size_t each by clEnqueueWriteBufferRect's
        // contract (this fn's).
        match (p.is_null(), unsafe {
            rect_window(region, origin, row, slice)
        }) {
            (false, Some((ext, off))) => {
                // SAFETY: the window lies in the application's buffer.
                let s = unsafe {
                    std::slice::from_raw_parts(
                        (p as *const u8).add(off as usize),
                        ext.extent as usize,
                    )
                };
                c.enc.opt_bytes(Some(s));
            }
            _ => c.enc.opt_bytes(None),
        }
        Ok(())
    }
    no_take!(region: *const c_void, origin: *const c_void, row: usize, slice: usize);
}

pub mod image_out {
    use super::*;
    pub fn put(
        c: &mut Call,
        p: *mut c_void,
        _img: *mut c_void,
        _region: *const c_void,
        _row: usize,
        _slice: usize,
    ) -> Result<(), i32> {
        c.enc.bool(!p.is_null());
        Ok(())
    }
    /// # Safety
    /// `p` holds the transfer's window, as the API requires; `region` is
    /// NULL or 3 size_t.
    pub unsafe fn take(
        _s: (),
        r: &mut Reply,
        p: *mut c_void,
        _img: *mut c_void,
        region: *const c_void,
        row: usize,
        slice: usize,
    ) -> Result<(), i32> {
        let data = r.opt_bytes()?;
        // SAFETY: `region` is NULL or three size_t by clEnqueueReadImage's contract (this fn's).
        let w = unsafe { image_window_of(region, row, slice) };
        if let (Some(b), false, Some(w)) = (data, p.is_null(), w) {
            // SAFETY: by clEnqueueReadImage's contract `p` holds the window of `region` under
            // `row`/`slice` (w.extent bytes, from the region, pitches and the element size the
            // server reported, checked to be a real format's in image_shape); scatter_rows writes
            // only within it.
            unsafe { scatter_rows(&b, p as *mut u8, w, region_of(region)) };
        }
        Ok(())
    }
}

/// # Safety
/// `region` is non-NULL and points to 3 size_t.
unsafe fn region_of(region: *const c_void) -> [u64; 3] {
    let r = region as *const u64;
    // SAFETY: `region` is non-NULL and three size_t (this fn's contract).
    unsafe { [*r, *r.add(1), *r.add(2)] }
}

/// The window of the image transfer being marshalled on this thread (its
/// image's type and element size are in [`IMAGE_SHAPE`]).
///
/// # Safety
/// `region` is NULL or 3 size_t.
unsafe fn image_window_of(region: *const c_void, row: usize, slice: usize) -> Option<ImageWindow> {
    if region.is_null() {
        return None;
    }
    let (ty, elem) = IMAGE_SHAPE.with(|c| c.get());
    // SAFETY: `region` is non-NULL (checked above) and three size_t (this fn's contract).
    image_window(
        ty,
        unsafe { region_of(region) },
        elem,
        row as u64,
        slice as u64,
    )
}

/// Copies the region's rows out of a window, leaving the bytes between
/// rows (the application's, not the transfer's) alone.
///
/// # Safety
/// `dst` holds `w.extent` bytes.
unsafe fn scatter_rows(src: &[u8], dst: *mut u8, w: ImageWindow, region: [u64; 3]) {
    let width = w.row_bytes as usize;
    for z in 0..region[2] {
        for y in 0..region[1] {
            let at = (z * w.zstep + y * w.ystep) as usize;
            let Some(part) = src.get(at..at + width) else {
                return;
            };
            // SAFETY: `at` is at most (region[2]-1)*zstep + (region[1]-1)*ystep, so `at + width <=
            // w.extent` (image_window/rect_extent compute extent so), which `dst` holds (this fn's
            // contract); `part` is inside `src`.
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), dst.add(at), width) };
        }
    }
}

thread_local! {
    /// Type and element size of the image being read or written, set by
    /// the clEnqueueReadImage/clEnqueueWriteImage overrides before they
    /// marshal the call.
    pub static IMAGE_SHAPE: std::cell::Cell<(u32, u64)> = const { std::cell::Cell::new((0, 0)) };
}

pub mod image_in {
    use super::*;
    /// # Safety
    /// `p` holds the transfer's extent, as the API requires.
    pub unsafe fn put(
        c: &mut Call,
        p: *const c_void,
        _img: *mut c_void,
        region: *const c_void,
        row: usize,
        slice: usize,
    ) -> Result<(), i32> {
        if p.is_null() {
            c.enc.opt_bytes(None);
            return Ok(());
        }
        // SAFETY: `region` is NULL or three size_t by clEnqueueWriteImage's contract (this fn's).
        match unsafe { image_window_of(region, row, slice) } {
            Some(w) => {
                // SAFETY: by clEnqueueWriteImage's contract `p` holds the window of `region` under
                // `row`/`slice`, w.extent bytes (image_window derives it from the region and
                // pitches; the element size the server reported was checked to be a real
                // format's, image_shape).
                c.enc.opt_bytes(Some(unsafe {
                    std::slice::from_raw_parts(p as *const u8, w.extent as usize)
                }))
            }
            None => c.enc.opt_bytes(None),
        }
        Ok(())
    }
    no_take!(img: *mut c_void, region: *const c_void, row: usize, slice: usize);
}
