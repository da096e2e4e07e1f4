//! Images created with `CL_MEM_USE_HOST_PTR`. The server cannot use the
//! application's memory, so it holds a copy (`host_flags` on its side); but
//! a map of such an image must return the application's memory: `host_ptr`
//! plus the origin's offset, with the row and slice pitches the application
//! gave (programs rely on it, and the specification says so). The mapped
//! bytes come in the server's layout and are laid into the application's
//! rows here, and written back from them on unmap.
//!
//! The application's pitches are known from the creation: they are kept as
//! the image's `CL_IMAGE_ROW_PITCH` and `CL_IMAGE_SLICE_PITCH` answers,
//! which natively are those pitches too.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use wormhole_opencl_api::{
    func, image_element_size, image_window, ImageDesc, ImageWindow, Kind, CL_IMAGE_ELEMENT_SIZE,
    CL_IMAGE_ROW_PITCH, CL_IMAGE_SLICE_PITCH, CL_INVALID_VALUE, CL_MEM_OBJECT_IMAGE1D_ARRAY,
    CL_MEM_OBJECT_IMAGE1D_BUFFER, CL_MEM_OBJECT_IMAGE2D, CL_MEM_OBJECT_IMAGE2D_ARRAY,
    CL_MEM_OBJECT_IMAGE3D, CL_MEM_TYPE, CL_MEM_USE_HOST_PTR, CL_OUT_OF_RESOURCES, IMAGE_DESC_LEN,
};

use crate::connection::info_value;
use crate::gen;
use crate::objects::obj;

/// What an image's creation says about its size and host memory: the
/// application's `cl_image_desc`, or one made up for the 2D and 3D calls.
pub type Shape = ImageDesc;

/// Reads an application's `cl_image_desc`.
///
/// # Safety
/// `desc` is NULL or a `cl_image_desc`.
pub unsafe fn shape_of_desc(desc: *const c_void) -> Option<Shape> {
    if desc.is_null() {
        return None;
    }
    // SAFETY: `desc` is non-NULL and a cl_image_desc (this fn's contract, clCreateImage's): on the
    // 64-bit hosts the client runs on, IMAGE_DESC_LEN bytes, all inside it.
    let bytes = unsafe { std::slice::from_raw_parts(desc as *const u8, IMAGE_DESC_LEN) };
    ImageDesc::from_bytes(bytes)
}

/// The bytes the image's pixels take (a bound for `room`); 0 for an image
/// made from a buffer's memory (`mem_object`), which holds none of its own.
///
/// # Safety
/// `format` is NULL or a `cl_image_format`.
pub unsafe fn shape_bytes(shape: &Shape, format: *const c_void) -> u64 {
    if shape.mem_object != 0 {
        return 0;
    }
    // SAFETY: `format` is NULL or a cl_image_format (this fn's contract, the creating call's),
    // which element_size needs.
    let elem = unsafe { element_size(format) }.unwrap_or(0);
    [shape.width, shape.height, shape.depth, shape.array_size]
        .iter()
        .fold(elem, |n, &d| n.saturating_mul(d.max(1) as u64))
}

/// An image's element size as the server reports it (clGetImageInfo), checked to be a size
/// some OpenCL image format has (at most 4 channels of at most 4 bytes, or a packed format):
/// it sizes the windows copied into and out of the application's memory, so a broken reply
/// fails the call (`CL_OUT_OF_RESOURCES`) rather than overrunning them.
pub(crate) fn server_element_size(elem: usize) -> Result<u64, i32> {
    if matches!(elem, 1 | 2 | 3 | 4 | 6 | 8 | 12 | 16) {
        Ok(elem as u64)
    } else {
        Err(CL_OUT_OF_RESOURCES)
    }
}

/// The size of one pixel of `format`.
///
/// # Safety
/// `format` is NULL or a `cl_image_format`.
unsafe fn element_size(format: *const c_void) -> Option<u64> {
    if format.is_null() {
        return None;
    }
    // SAFETY: `format` is non-NULL and a cl_image_format (this fn's contract): its first two fields
    // are cl_uints.
    let (order, ty) = unsafe {
        (
            (format as *const u32).read_unaligned(),
            (format as *const u32).add(1).read_unaligned(),
        )
    };
    image_element_size(order, ty)
}

/// Notes the application's pitches of a new USE_HOST_PTR image (the
/// API's defaults for zero ones) as the image's pitch answers.
///
/// # Safety
/// `format` is NULL or a `cl_image_format`.
pub unsafe fn remember(image: *mut c_void, flags: u64, format: *const c_void, shape: Shape) {
    if flags & CL_MEM_USE_HOST_PTR == 0 {
        return;
    }
    let Ok(Some(o)) = obj(image, Kind::Mem) else {
        return;
    };
    // SAFETY: `format` is NULL or a cl_image_format (this fn's contract, the creating call's),
    // which element_size needs.
    let Some(elem) = (unsafe { element_size(format) }) else {
        return;
    };
    let Some(row) = (match shape.row_pitch {
        0 => shape.width.checked_mul(elem as usize),
        r => Some(r),
    }) else {
        return;
    };
    let slice = match (shape.image_type, shape.slice_pitch) {
        (CL_MEM_OBJECT_IMAGE3D | CL_MEM_OBJECT_IMAGE2D_ARRAY, 0) => row.checked_mul(shape.height),
        (CL_MEM_OBJECT_IMAGE1D_ARRAY, 0) => Some(row),
        (CL_MEM_OBJECT_IMAGE3D | CL_MEM_OBJECT_IMAGE2D_ARRAY | CL_MEM_OBJECT_IMAGE1D_ARRAY, s) => {
            Some(s)
        }
        _ => Some(0),
    };
    let Some(slice) = slice else { return };
    o.info
        .know(func::clGetImageInfo, CL_IMAGE_ROW_PITCH, &row.to_le_bytes());
    o.info.know(
        func::clGetImageInfo,
        CL_IMAGE_SLICE_PITCH,
        &slice.to_le_bytes(),
    );
}

/// How a map's bytes lie in the server's mapping and in the application's
/// memory: the same rows, different pitches.
#[derive(Debug, Clone, Copy)]
pub struct Reshape {
    region: [u64; 3],
    server: ImageWindow,
    host: ImageWindow,
}

impl Reshape {
    /// Lays the region's rows of `src` (the server's layout, `server.extent`
    /// bytes) into the application's memory at `dst`; the bytes between
    /// rows there are the application's and stay as they are.
    ///
    /// # Safety
    /// `dst` holds the host window's extent.
    pub unsafe fn scatter(&self, src: &[u8], dst: *mut u8) {
        self.rows(|s, h, n| {
            if let Some(part) = src.get(s..s + n) {
                // SAFETY: `h + n <= host.extent` (the windows' arithmetic: `h` is at most
                // (region[2]-1)*zstep + (region[1]-1)*ystep and `n` the row's bytes), and `dst`
                // holds the host window's extent (this fn's contract: the application's
                // USE_HOST_PTR image from the map's origin).
                unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), dst.add(h), n) };
            }
        });
    }

    /// The reverse of [`Reshape::scatter`]: the region's rows from the
    /// application's memory into `dst`, the server's layout; the bytes
    /// between rows there keep what the server sent (they are not the
    /// mapping's, and must go back as they came).
    ///
    /// # Safety
    /// `src` holds the host window's extent.
    pub unsafe fn gather(&self, src: *const u8, dst: &mut [u8]) {
        self.rows(|s, h, n| {
            if let Some(part) = dst.get_mut(s..s + n) {
                // SAFETY: as in `scatter`, the other way.
                unsafe { std::ptr::copy_nonoverlapping(src.add(h), part.as_mut_ptr(), n) };
            }
        });
    }

    /// Calls `f(server offset, host offset, bytes)` for each row.
    fn rows(&self, mut f: impl FnMut(usize, usize, usize)) {
        let n = self.server.row_bytes as usize;
        for z in 0..self.region[2] {
            for y in 0..self.region[1] {
                let s = z * self.server.zstep + y * self.server.ystep;
                let h = z * self.host.zstep + y * self.host.ystep;
                f(s as usize, h as usize, n);
            }
        }
    }
}

/// Where a map of a USE_HOST_PTR image lies in the application's memory.
pub struct HostMapping {
    pub at: *mut u8,
    pub row_pitch: usize,
    pub slice_pitch: usize,
    pub reshape: Reshape,
}

/// A USE_HOST_PTR image's memory as the application laid it out.
#[derive(Debug, Clone, Copy)]
pub struct HostLayout {
    host: usize,
    image_type: u32,
    elem: u64,
    row: usize,
    slice: usize,
}

/// `image`'s layout in the application's memory; `None` if it is not a
/// USE_HOST_PTR image. Asks (cached) queries: not while a call holds the
/// channel.
pub fn layout(image: *mut c_void) -> Result<Option<HostLayout>, i32> {
    let Some(o) = obj(image, Kind::Mem)? else {
        return Ok(None);
    };
    let host = o.host_ptr.load(Ordering::Relaxed);
    if host == 0 {
        return Ok(None);
    }
    let image_type: u32 = info_value(gen::clGetMemObjectInfo, image, CL_MEM_TYPE)?;
    if !(CL_MEM_OBJECT_IMAGE2D..=CL_MEM_OBJECT_IMAGE1D_BUFFER).contains(&image_type) {
        // A buffer: the map is the library's to refuse.
        return Ok(None);
    }
    let elem = server_element_size(info_value(
        gen::clGetImageInfo,
        image,
        CL_IMAGE_ELEMENT_SIZE,
    )?)?;
    Ok(Some(HostLayout {
        host,
        image_type,
        elem,
        row: info_value(gen::clGetImageInfo, image, CL_IMAGE_ROW_PITCH)?,
        slice: info_value(gen::clGetImageInfo, image, CL_IMAGE_SLICE_PITCH)?,
    }))
}

impl HostLayout {
    /// Where a map at `origin` of `region` lies, whose mapping the server
    /// laid out with `server_row` and `server_slice` as its pitches.
    pub fn mapping(
        &self,
        origin: [u64; 3],
        region: [u64; 3],
        server_row: usize,
        server_slice: usize,
    ) -> Result<HostMapping, i32> {
        let window = |r: usize, s: usize| {
            image_window(self.image_type, region, self.elem, r as u64, s as u64)
        };
        let (Some(server), Some(host)) = (
            window(server_row, server_slice),
            window(self.row, self.slice),
        ) else {
            return Err(CL_INVALID_VALUE);
        };
        let offset = origin[0]
            .checked_mul(self.elem)
            .zip(origin[1].checked_mul(host.ystep))
            .zip(origin[2].checked_mul(host.zstep))
            .and_then(|((x, y), z)| x.checked_add(y)?.checked_add(z))
            .and_then(|off| usize::try_from(off).ok())
            .and_then(|off| self.host.checked_add(off))
            .ok_or(CL_INVALID_VALUE)?;
        Ok(HostMapping {
            at: offset as *mut u8,
            row_pitch: self.row,
            // A 1D or 2D image has no slices: its maps say 0, as natively.
            slice_pitch: if self.image_type == CL_MEM_OBJECT_IMAGE2D || server_slice == 0 {
                0
            } else {
                self.slice
            },
            reshape: Reshape {
                region,
                server,
                host,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_element_sizes_of_real_formats_pass() {
        for ok in [1, 2, 3, 4, 6, 8, 12, 16] {
            assert_eq!(server_element_size(ok), Ok(ok as u64));
        }
        for bad in [0, 5, 7, 9, 15, 17, 32, 1 << 20, usize::MAX] {
            assert_eq!(server_element_size(bad), Err(CL_OUT_OF_RESOURCES));
        }
        // Every format the client knows has one of them.
        for order in 0x10B0..=0x10C4 {
            for ty in 0x10D0..=0x10E0 {
                if let Some(e) = image_element_size(order, ty) {
                    assert!(
                        server_element_size(e as usize).is_ok(),
                        "{order:#x} {ty:#x}"
                    );
                }
            }
        }
    }

    fn layout(image_type: u32, row: usize, slice: usize) -> HostLayout {
        HostLayout {
            host: 0x10000,
            image_type,
            elem: 4,
            row,
            slice,
        }
    }

    /// The offsets PoCL returns natively for these maps (`image_host_ptr.c`).
    #[test]
    fn a_mapping_starts_at_the_origin_in_the_applications_layout() {
        let m = layout(CL_MEM_OBJECT_IMAGE2D, 64, 0)
            .mapping([2, 3, 0], [4, 2, 1], 64, 0)
            .expect("2D");
        assert_eq!(m.at as usize - 0x10000, 200);
        assert_eq!((m.row_pitch, m.slice_pitch), (64, 0));
        let m = layout(CL_MEM_OBJECT_IMAGE3D, 20, 80)
            .mapping([1, 1, 1], [2, 2, 1], 16, 48)
            .expect("3D");
        assert_eq!(m.at as usize - 0x10000, 104);
        assert_eq!((m.row_pitch, m.slice_pitch), (20, 80));
        // An origin whose offset overflows is refused, not wrapped.
        assert!(layout(CL_MEM_OBJECT_IMAGE2D, 64, 0)
            .mapping([u64::MAX / 2, 0, 0], [1, 1, 1], 64, 0)
            .is_err());
    }

    /// Rows move between the server's tight layout and the application's
    /// padded one; the bytes between rows stay whose they are.
    #[test]
    fn rows_go_across_and_back_leaving_the_gaps() {
        let m = layout(CL_MEM_OBJECT_IMAGE2D, 12, 0)
            .mapping([0, 0, 0], [2, 3, 1], 8, 0)
            .expect("mapping");
        let server: Vec<u8> = (1..=24).collect();
        let mut host = vec![0xaau8; 36];
        // SAFETY: `host` holds the host window (3 rows of 12 bytes).
        unsafe { m.reshape.scatter(&server, host.as_mut_ptr()) };
        for y in 0..3 {
            assert_eq!(&host[y * 12..y * 12 + 8], &server[y * 8..y * 8 + 8]);
            assert_eq!(&host[y * 12 + 8..y * 12 + 12], &[0xaa; 4]);
        }
        for b in host.iter_mut().filter(|b| **b != 0xaa) {
            *b += 100;
        }
        let mut back = server.clone();
        // SAFETY: `host` still holds the host window (3 rows of 12 bytes).
        unsafe { m.reshape.gather(host.as_ptr(), &mut back) };
        assert_eq!(back, server.iter().map(|b| b + 100).collect::<Vec<_>>());
    }
}
