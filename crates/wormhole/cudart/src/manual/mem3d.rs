//! Pitched 3D memory (`cudaMalloc3D`, `cudaMemset3D`, `cudaMemcpy3D` and
//! their async forms), answered by the client as the 2D calls of each
//! depth slice: no request of their own reaches the server, which checks
//! every slice as it checks any 2D call. Only linear memory: there are no
//! CUDA arrays (`cudaMallocArray` is not exported), so a copy naming one
//! is refused with cudaErrorInvalidValue.
#![allow(non_snake_case)] // the C names of the entry points

use std::ffi::c_void;

use wormhole_cuda_api::{cudaErrorInvalidValue, cudaSuccess};

use crate::state::note;

/// `cudaPitchedPtr`: rows of `pitch` bytes, `ysize` rows a slice.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PitchedPtr {
    pub ptr: *mut c_void,
    pub pitch: usize,
    pub xsize: usize,
    pub ysize: usize,
}

/// `cudaExtent` (in bytes, rows and slices, for linear memory).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Extent {
    pub width: usize,
    pub height: usize,
    pub depth: usize,
}

/// `cudaPos`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Pos {
    pub x: usize,
    pub y: usize,
    pub z: usize,
}

/// `cudaMemcpy3DParms`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Memcpy3DParms {
    pub src_array: *mut c_void,
    pub src_pos: Pos,
    pub src_ptr: PitchedPtr,
    pub dst_array: *mut c_void,
    pub dst_pos: Pos,
    pub dst_ptr: PitchedPtr,
    pub extent: Extent,
    pub kind: i32,
}

/// The address of row `y` of slice `z`, `x` bytes in (None on overflow).
fn at(p: &PitchedPtr, x: usize, y: usize, z: usize) -> Option<*mut c_void> {
    let off = z
        .checked_mul(p.ysize)?
        .checked_add(y)?
        .checked_mul(p.pitch)?
        .checked_add(x)?;
    (p.ptr as usize).checked_add(off).map(|a| a as *mut c_void)
}

/// Runs `slice(z)` for each of `depth` slices; the first failure ends it.
fn slices(depth: usize, mut slice: impl FnMut(usize) -> i32) -> i32 {
    for z in 0..depth {
        let s = slice(z);
        if s != cudaSuccess {
            return s;
        }
    }
    cudaSuccess
}

/// `extent.depth` slices of `extent.height` rows, one pitched block.
///
/// # Safety
/// `pitched` is NULL or writable.
pub unsafe extern "C" fn cudaMalloc3D(pitched: *mut PitchedPtr, extent: Extent) -> i32 {
    if pitched.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let Some(rows) = extent.height.checked_mul(extent.depth) else {
        return note(cudaErrorInvalidValue);
    };
    let (mut ptr, mut pitch) = (std::ptr::null_mut(), 0usize);
    // SAFETY: two valid out-pointers.
    let s =
        unsafe { crate::manual::memory::cudaMallocPitch(&mut ptr, &mut pitch, extent.width, rows) };
    if s == cudaSuccess {
        // SAFETY: `pitched` is non-NULL (checked above), and a non-NULL one
        // is a writable cudaPitchedPtr: cudaMalloc3D's contract.
        unsafe {
            *pitched = PitchedPtr {
                ptr,
                pitch,
                xsize: extent.width,
                ysize: extent.height,
            }
        };
    }
    s
}

fn memset3d(p: PitchedPtr, value: i32, e: Extent, stream: Option<*mut c_void>) -> i32 {
    slices(e.depth, |z| {
        let Some(slice) = at(&p, 0, 0, z) else {
            return note(cudaErrorInvalidValue);
        };
        // SAFETY: no host memory; the device range is the server's to check.
        unsafe {
            match stream {
                None => crate::gen::cudaMemset2D(slice, p.pitch, value, e.width, e.height),
                Some(s) => {
                    crate::gen::cudaMemset2DAsync(slice, p.pitch, value, e.width, e.height, s)
                }
            }
        }
    })
}

pub extern "C" fn cudaMemset3D(pitched: PitchedPtr, value: i32, extent: Extent) -> i32 {
    memset3d(pitched, value, extent, None)
}

pub extern "C" fn cudaMemset3DAsync(
    pitched: PitchedPtr,
    value: i32,
    extent: Extent,
    stream: *mut c_void,
) -> i32 {
    memset3d(pitched, value, extent, Some(stream))
}

/// # Safety
/// `p` is NULL or readable; its pointers are valid as for cudaMemcpy2D.
unsafe fn memcpy3d(p: *const Memcpy3DParms, stream: Option<*mut c_void>) -> i32 {
    if p.is_null() {
        return note(cudaErrorInvalidValue);
    }
    // SAFETY: `p` is non-NULL (checked above), and a non-NULL one is a
    // readable cudaMemcpy3DParms: this function's contract, from
    // cudaMemcpy3D's.
    let p = unsafe { *p };
    if !p.src_array.is_null() || !p.dst_array.is_null() {
        return note(cudaErrorInvalidValue);
    }
    let (sp, dp, e) = (p.src_pos, p.dst_pos, p.extent);
    slices(e.depth, |z| {
        let (Some(src), Some(dst)) = (
            sp.z.checked_add(z)
                .and_then(|sz| at(&p.src_ptr, sp.x, sp.y, sz)),
            dp.z.checked_add(z)
                .and_then(|dz| at(&p.dst_ptr, dp.x, dp.y, dz)),
        ) else {
            return note(cudaErrorInvalidValue);
        };
        let (spitch, dpitch) = (p.src_ptr.pitch, p.dst_ptr.pitch);
        // SAFETY: the slices of the caller's valid pitched blocks.
        unsafe {
            match stream {
                None => crate::manual::copies::cudaMemcpy2D(
                    dst, dpitch, src, spitch, e.width, e.height, p.kind,
                ),
                Some(s) => crate::manual::copies::cudaMemcpy2DAsync(
                    dst, dpitch, src, spitch, e.width, e.height, p.kind, s,
                ),
            }
        }
    })
}

/// # Safety
/// As cudaMemcpy3D.
pub unsafe extern "C" fn cudaMemcpy3D(p: *const Memcpy3DParms) -> i32 {
    // SAFETY: `p` is NULL or a readable cudaMemcpy3DParms whose pointers
    // are valid for the copy it describes: cudaMemcpy3D's contract, which
    // is memcpy3d's.
    unsafe { memcpy3d(p, None) }
}

/// # Safety
/// As cudaMemcpy3DAsync.
pub unsafe extern "C" fn cudaMemcpy3DAsync(p: *const Memcpy3DParms, stream: *mut c_void) -> i32 {
    // SAFETY: as cudaMemcpy3D's: `p` NULL or a readable, valid
    // cudaMemcpy3DParms (cudaMemcpy3DAsync's contract, memcpy3d's).
    unsafe { memcpy3d(p, Some(stream)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_found_by_row_and_depth_with_every_overflow_refused() {
        let p = PitchedPtr {
            ptr: 0x1000 as *mut c_void,
            pitch: 64,
            xsize: 40,
            ysize: 10,
        };
        assert_eq!(
            at(&p, 5, 2, 1),
            Some((0x1000 + 640 + 128 + 5) as *mut c_void)
        );
        assert_eq!(at(&p, 0, 0, usize::MAX), None);
        assert_eq!(at(&p, usize::MAX, 0, 0), None);
        // The first failing slice ends the loop.
        let mut seen = Vec::new();
        let s = slices(5, |z| {
            seen.push(z);
            if z == 2 {
                1
            } else {
                0
            }
        });
        assert_eq!((s, seen), (1, vec![0, 1, 2]));
    }
}
