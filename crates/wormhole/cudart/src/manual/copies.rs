//! Copies between host and device memory, linear and 2D: host data travel
//! in requests (or replies) of at most `MEMCPY_CHUNK` bytes, and copies to
//! the device go batched.

use std::ffi::c_void;

use wormhole_cuda_api::wire::{Memcpy, MEMCPY_CHUNK};
use wormhole_cuda_api::*;

use super::status_of;
use crate::call::Call;
use crate::state::{self, note, tracker};

/// Whether `address` lies in one of this client's device allocations.
pub(super) fn is_dev(address: u64) -> bool {
    address != 0 && tracker().find(address).is_some()
}

/// The pieces of a `count`-byte copy whose host side travels in frames:
/// `(offset, length)`, in order, each at most `MEMCPY_CHUNK` bytes.
pub(super) fn chunks(count: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..count)
        .step_by(MEMCPY_CHUNK as usize)
        .map(move |offset| (offset, (count - offset).min(MEMCPY_CHUNK)))
}

/// `[address, address + len)` must lie in one of this client's device
/// allocations.
pub(super) fn check_device_range(address: u64, len: u64) -> Result<(), i32> {
    tracker()
        .check(address, len)
        .map(|_| ())
        .map_err(|_| cudaErrorInvalidValue)
}

/// One copy, split into requests of at most `MEMCPY_CHUNK` host bytes.
///
/// # Safety
/// `dst` and `src` hold `count` bytes of the memory their direction says.
unsafe fn memcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: u64,
) -> i32 {
    let (dst_addr, src_addr) = (dst as usize as u64, src as usize as u64);
    let dir = match direction(kind, is_dev(dst_addr), is_dev(src_addr)) {
        Ok(dir) => dir,
        Err(e) => return note(e),
    };
    if count == 0 {
        return cudaSuccess;
    }
    let count = count as u64;
    status_of(match dir {
        Direction::HostToHost => {
            // SAFETY: neither side is a device address, so by this
            // function's contract both are host memory of `count` bytes.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count as usize) };
            Ok(cudaSuccess)
        }
        Direction::DeviceToDevice => copy_on_device(dst_addr, src_addr, count, stream),
        Direction::HostToDevice => {
            // SAFETY: `src` is host memory of `count` bytes (this
            // function's contract, the direction found above).
            unsafe { copy_to_device(dst_addr, src as *const u8, count, stream) }
        }
        Direction::DeviceToHost => {
            // SAFETY: `dst` is host memory of `count` writable bytes (this
            // function's contract, the direction found above).
            unsafe { copy_from_device(dst as *mut u8, src_addr, count, stream) }
        }
    })
}

/// Between two device ranges: one request, batched.
fn copy_on_device(dst: u64, src: u64, count: u64, stream: u64) -> Result<i32, i32> {
    check_device_range(dst, count)?;
    check_device_range(src, count)?;
    let dir = Direction::DeviceToDevice;
    let mut c = Call::begin(func::cudaMemcpy)?;
    Memcpy {
        dir,
        dst,
        src,
        count,
        stream,
    }
    .encode(&mut c.enc);
    for v in [dir as u64, count, stream] {
        c.shape(v);
    }
    c.finish_async(false)
}

/// To the device, the data in the requests: they can go without waiting,
/// as native copies from pageable memory return once the data are staged.
///
/// # Safety
/// `src` holds `count` readable bytes.
unsafe fn copy_to_device(dst: u64, src: *const u8, count: u64, stream: u64) -> Result<i32, i32> {
    check_device_range(dst, count)?;
    let dir = Direction::HostToDevice;
    for (offset, len) in chunks(count) {
        let mut c = Call::begin(func::cudaMemcpy)?;
        Memcpy {
            dir,
            dst: dst + offset,
            src: 0,
            count: len,
            stream,
        }
        .encode(&mut c.enc);
        // SAFETY: `offset + len <= count`, and `src` holds `count` bytes.
        let data = unsafe { std::slice::from_raw_parts(src.add(offset as usize), len as usize) };
        c.enc.bytes(data);
        for v in [dir as u64, len, stream] {
            c.shape(v);
        }
        let status = c.finish_async(false)?;
        if status != cudaSuccess {
            return Ok(status);
        }
    }
    Ok(cudaSuccess)
}

/// From the device, the data in the replies, each waited for.
///
/// # Safety
/// `dst` holds `count` writable bytes.
unsafe fn copy_from_device(dst: *mut u8, src: u64, count: u64, stream: u64) -> Result<i32, i32> {
    check_device_range(src, count)?;
    for (offset, len) in chunks(count) {
        let mut c = Call::begin(func::cudaMemcpy)?;
        Memcpy {
            dir: Direction::DeviceToHost,
            dst: 0,
            src: src + offset,
            count: len,
            stream,
        }
        .encode(&mut c.enc);
        let mut r = c.finish()?;
        let status = r.status_with_deferred();
        if status != cudaSuccess {
            return Ok(status);
        }
        let bytes = r.with(|d| d.bytes().map(<[u8]>::to_vec).map_err(|_| cudaErrorUnknown))?;
        if bytes.len() as u64 != len {
            return Err(cudaErrorUnknown);
        }
        // SAFETY: the reply holds exactly `len` bytes (checked above), and
        // `offset + len <= count`, the bytes `dst` holds.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(offset as usize), len as usize)
        };
    }
    Ok(cudaSuccess)
}

/// # Safety
/// As for the native cudaMemcpy.
pub unsafe extern "C" fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: i32,
) -> i32 {
    // SAFETY: `dst` and `src` hold `count` bytes of the memory `kind` (or,
    // for cudaMemcpyDefault, the address) says: cudaMemcpy's contract,
    // which is memcpy's.
    unsafe { memcpy(dst, src, count, kind, 0) }
}

/// The host side of the copy is done when this returns, which the native
/// call only guarantees at the next synchronisation: a copy to the device
/// carries its data and goes batched, one from the device waits for them.
///
/// # Safety
/// As for the native cudaMemcpyAsync.
pub unsafe extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    let sid = match state::handle_id(stream, Kind::Stream) {
        Ok(s) => s,
        Err(e) => return note(e),
    };
    // SAFETY: `dst` and `src` hold `count` bytes of the memory their side
    // names: cudaMemcpyAsync's contract, as cudaMemcpy's, which is memcpy's.
    unsafe { memcpy(dst, src, count, kind, sid) }
}

/// A 2D copy: from the device, rows packed into replies of at most
/// MEMCPY_CHUNK bytes; otherwise as its rows' copies (batched).
///
/// # Safety
/// As for the native cudaMemcpy2D: each of the `height` rows of `width`
/// bytes, `dpitch` and `spitch` apart, lies in the memory its side names.
unsafe fn memcpy_2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    (width, height): (usize, usize),
    kind: i32,
    stream: u64,
) -> i32 {
    if width > dpitch || width > spitch {
        return note(cudaErrorInvalidPitchValue);
    }
    let (d, s) = (dst as usize as u64, src as usize as u64);
    let from_device = matches!(
        direction(kind, is_dev(d), is_dev(s)),
        Ok(Direction::DeviceToHost)
    );
    let rows_per_request = MEMCPY_CHUNK as usize / width.max(1);
    if from_device && rows_per_request > 0 {
        // SAFETY: `dst` holds `height` rows of `width` writable bytes,
        // `dpitch` apart: this function's contract (cudaMemcpy2D's) for
        // a host destination, which the direction found above says it is.
        return unsafe {
            memcpy_2d_back(
                dst,
                dpitch,
                s,
                spitch,
                (width, height),
                rows_per_request,
                stream,
            )
        };
    }
    for row in 0..height {
        let (Some(d), Some(s)) = (row.checked_mul(dpitch), row.checked_mul(spitch)) else {
            return note(cudaErrorInvalidValue);
        };
        // Device rows are addresses of the server's, not of this process:
        // offset without dereferencing.
        let (d, s) = (dst.wrapping_byte_add(d), src.wrapping_byte_add(s));
        // SAFETY: row `row` of each side, `width` bytes from its pitch
        // offset, lies in the memory that side names: this function's
        // contract (cudaMemcpy2D's) for every row below `height`.
        let status = unsafe { memcpy(d, s, width, kind, stream) };
        if status != cudaSuccess {
            return status;
        }
    }
    cudaSuccess
}

/// Rows `row..row + n` (`n` > 0) of a block at `src`, `pitch` apart and
/// `width` bytes each: the first one's address and the bytes from it to the
/// last one's end.
fn row_block(
    src: u64,
    pitch: usize,
    width: usize,
    row: usize,
    n: usize,
) -> Result<(u64, u64), i32> {
    let first = (row as u64)
        .checked_mul(pitch as u64)
        .and_then(|offset| src.checked_add(offset))
        .ok_or(cudaErrorInvalidValue)?;
    let extent = (pitch as u64)
        .checked_mul(n as u64 - 1)
        .and_then(|v| v.checked_add(width as u64))
        .ok_or(cudaErrorInvalidValue)?;
    Ok((first, extent))
}

/// Rows from the device, `rows` at a time, each batch one request whose
/// reply packs them.
///
/// # Safety
/// `dst` holds `height` rows of `width` bytes, `dpitch` apart.
unsafe fn memcpy_2d_back(
    dst: *mut c_void,
    dpitch: usize,
    src: u64,
    spitch: usize,
    (width, height): (usize, usize),
    rows: usize,
    stream: u64,
) -> i32 {
    let res = (|| -> Result<i32, i32> {
        let mut row = 0;
        while row < height {
            let n = rows.min(height - row);
            let (first, extent) = row_block(src, spitch, width, row, n)?;
            check_device_range(first, extent)?;
            let mut c = Call::begin(func::cudaMemcpy2D)?;
            for v in [first, spitch as u64, width as u64, n as u64, stream] {
                c.enc.u64(v);
            }
            let mut r = c.finish()?;
            let status = r.status_with_deferred();
            if status != cudaSuccess {
                return Ok(status);
            }
            let packed = r.with(|d| d.bytes().map(<[u8]>::to_vec).map_err(|_| cudaErrorUnknown))?;
            if packed.len() != n * width {
                return Err(cudaErrorUnknown);
            }
            for (i, line) in packed.chunks_exact(width.max(1)).enumerate() {
                // SAFETY: row `row + i` is below `height`, and each such row
                // of `dst` holds `width` writable bytes, `dpitch` apart
                // (this function's contract, from cudaMemcpy2D's).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        line.as_ptr(),
                        dst.cast::<u8>().add((row + i) * dpitch),
                        width,
                    )
                };
            }
            row += n;
        }
        Ok(cudaSuccess)
    })();
    status_of(res)
}

/// # Safety
/// As for the native call.
pub unsafe extern "C" fn cudaMemcpy2D(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
) -> i32 {
    // SAFETY: each of the `height` rows of `width` bytes, `dpitch` and
    // `spitch` apart, lies in the memory its side names: cudaMemcpy2D's
    // contract, which is memcpy_2d's.
    unsafe { memcpy_2d(dst, dpitch, src, spitch, (width, height), kind, 0) }
}

/// # Safety
/// As for the native call.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cudaMemcpy2DAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: i32,
    stream: *mut c_void,
) -> i32 {
    let sid = match state::handle_id(stream, Kind::Stream) {
        Ok(s) => s,
        Err(e) => return note(e),
    };
    // SAFETY: as cudaMemcpy2D's: each of the `height` rows lies in the
    // memory its side names (cudaMemcpy2DAsync's contract, memcpy_2d's).
    unsafe { memcpy_2d(dst, dpitch, src, spitch, (width, height), kind, sid) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_cuda_api::memcpy_kind::cudaMemcpyHostToHost;

    #[test]
    fn chunks_cover_a_copy_in_order() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(5).collect::<Vec<_>>(), [(0, 5)]);
        let big = 2 * MEMCPY_CHUNK + 3;
        assert_eq!(
            chunks(big).collect::<Vec<_>>(),
            [
                (0, MEMCPY_CHUNK),
                (MEMCPY_CHUNK, MEMCPY_CHUNK),
                (2 * MEMCPY_CHUNK, 3)
            ]
        );
    }

    #[test]
    fn row_blocks_span_first_row_to_last_row_end() {
        assert_eq!(
            row_block(0x1000, 512, 100, 2, 3),
            Ok((0x1400, 2 * 512 + 100))
        );
        assert_eq!(row_block(0x1000, 512, 100, 0, 1), Ok((0x1000, 100)));
        assert_eq!(
            row_block(u64::MAX - 10, 512, 100, 1, 1),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            row_block(0, usize::MAX, 1, 0, 3),
            Err(cudaErrorInvalidValue)
        );
    }

    /// Host-to-host copies never need a server: linear, and 2D row by row
    /// (pitches kept, the bytes between rows untouched).
    #[test]
    fn host_copies_are_made_here() {
        let src: Vec<u8> = (0..32).collect();
        let mut dst = [0u8; 32];
        // SAFETY: both buffers hold 32 bytes of host memory.
        let status = unsafe {
            cudaMemcpy(
                dst.as_mut_ptr().cast(),
                src.as_ptr().cast(),
                32,
                cudaMemcpyHostToHost,
            )
        };
        assert_eq!(status, cudaSuccess);
        assert_eq!(dst[..], src[..]);

        let mut block = [0xffu8; 24];
        // SAFETY: 3 rows of 4 bytes, 8 apart in `block` (24 bytes) and 10
        // apart in `src` (32 bytes).
        let status = unsafe {
            cudaMemcpy2D(
                block.as_mut_ptr().cast(),
                8,
                src.as_ptr().cast(),
                10,
                4,
                3,
                cudaMemcpyHostToHost,
            )
        };
        assert_eq!(status, cudaSuccess);
        assert_eq!(block[0..4], [0, 1, 2, 3]);
        assert_eq!(block[4..8], [0xff; 4]);
        assert_eq!(block[8..12], [10, 11, 12, 13]);
        assert_eq!(block[16..20], [20, 21, 22, 23]);
    }

    #[test]
    fn a_row_wider_than_its_pitch_is_refused() {
        let mut buf = [0u8; 16];
        // SAFETY: refused before any byte is touched.
        let status = unsafe {
            cudaMemcpy2D(
                buf.as_mut_ptr().cast(),
                4,
                buf.as_ptr().cast(),
                8,
                6,
                2,
                cudaMemcpyHostToHost,
            )
        };
        assert_eq!(status, cudaErrorInvalidPitchValue);
    }
}
