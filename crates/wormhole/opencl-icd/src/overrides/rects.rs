//! Buffer rectangle reads and writes: checked against the buffer's size
//! here, and completed later while a user event is open.
#![allow(non_snake_case)]

use std::ffi::c_void;

use wormhole_opencl_api::{CL_INVALID_VALUE, CL_MEM_SIZE};

use super::events::settle_for;
use super::mem_info;
use crate::gen;
use crate::later::{transfer_after_gate, GatedOp, Rect};
use crate::waits;

/// What a buffer rectangle read or write does before it is forwarded:
/// settle a blocking one (see [`settle_for`]); complete later a non-blocking one
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
        // SAFETY: `wl` holds `n` events by clEnqueueRead/WriteBufferRect's contract on
        // event_wait_list (this fn's).
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
    // SAFETY: `ptr` is non-NULL and, by clEnqueueRead/WriteBufferRect's contract (this fn's), holds
    // the host window `host_origin`, `region` and the host pitches describe, valid until the
    // non-blocking transfer completes, as transfer_after_gate requires; the buffer side was checked
    // against the buffer's size by rect_inside; `wl` holds `n` events and `ev` is NULL or writable.
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
    // SAFETY: `origin` and `region` are non-NULL (checked above) and three size_t each by this fn's
    // contract (the OpenCL rect calls' buffer_origin and region).
    let [o, r] = [origin, region].map(|p| unsafe { (p as *const [u64; 3]).read_unaligned() });
    ends_inside(size as u64, o, r, row as u64, slice as u64)
}

/// Whether the rectangle of `region` bytes at `origin`, under the given
/// pitches (0: packed), ends inside a buffer of `size` bytes.
fn ends_inside(
    size: u64,
    origin: [u64; 3],
    region: [u64; 3],
    row: u64,
    slice: u64,
) -> Result<(), i32> {
    if region.contains(&0) {
        // The library's own refusal, with its own code.
        return Ok(());
    }
    match wormhole_opencl_api::rect_extent(region, 1, row, slice).and_then(|e| e.end(origin, 1)) {
        Some(end) if end <= size => Ok(()),
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
            // SAFETY: `buffer_origin` and `region` are NULL or three size_t each by this OpenCL
            // function's contract, all rect_inside reads.
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
            // SAFETY: the application's arguments, unchanged: three size_t at each non-NULL
            // geometry pointer, `ptr` holding the host window, `wl` `n` events, `ev` NULL or
            // writable, by this OpenCL function's contract, which is rect_shortcut's.
            let shortcut = unsafe {
                rect_shortcut(q, buf, $write, blocking, geometry, pitches, app, n, wl, ev)
            };
            if let Some(s) = shortcut {
                return s;
            }
            // SAFETY: the arguments are the application's, passed unchanged (the buffer side
            // checked by rect_inside): this OpenCL function's contract is the generated
            // forwarder's.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rectangle_must_end_inside_its_buffer() {
        // 16 bytes by 4 rows, packed: 64 bytes.
        assert_eq!(ends_inside(1024, [0, 0, 0], [16, 4, 1], 0, 0), Ok(()));
        // Its last byte is the buffer's last (row 60 of 16 bytes ends at 1024).
        assert_eq!(ends_inside(1024, [0, 60, 0], [16, 4, 1], 16, 0), Ok(()));
        assert_eq!(
            ends_inside(1024, [1, 60, 0], [16, 4, 1], 16, 0),
            Err(CL_INVALID_VALUE)
        );
        // A row pitch narrower than the region's rows.
        assert_eq!(
            ends_inside(1024, [0, 0, 0], [16, 4, 1], 8, 0),
            Err(CL_INVALID_VALUE)
        );
    }

    #[test]
    fn a_huge_or_overflowing_rectangle_is_refused_and_an_empty_one_left_to_the_library() {
        // 64 x 2^40 bytes past any buffer: the case that crashed applications.
        assert_eq!(
            ends_inside(1 << 20, [0, 0, 0], [64, 1 << 40, 1], 64, 0),
            Err(CL_INVALID_VALUE)
        );
        assert_eq!(
            ends_inside(u64::MAX, [0, 0, u64::MAX], [1, 1, 2], 0, 1 << 20),
            Err(CL_INVALID_VALUE)
        );
        assert_eq!(ends_inside(16, [1 << 40, 0, 0], [0, 1, 1], 0, 0), Ok(()));
    }
}
