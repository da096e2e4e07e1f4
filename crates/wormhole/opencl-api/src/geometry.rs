//! Size rules for rectangular and image transfers and image creation,
//! shared so that the server sizes buffers itself by the same rules the
//! client uses, rather than trust the client's numbers.

use crate::consts::*;

/// The bytes of a row of `width` elements of `elem` bytes, and the row pitch
/// (`pitch`, or those bytes when it is 0); `None` when the pitch is shorter
/// than the row or the numbers overflow.
fn row_and_pitch(width: u64, elem: u64, pitch: u64) -> Option<(u64, u64)> {
    let row_bytes = width.checked_mul(elem)?;
    let row = or_packed(pitch, row_bytes);
    (row >= row_bytes).then_some((row_bytes, row))
}

/// A pitch the application gave, or the packed one when it gave 0 (the
/// API's default for every row and slice pitch).
fn or_packed(pitch: u64, packed: u64) -> u64 {
    if pitch == 0 {
        packed
    } else {
        pitch
    }
}

/// Bytes of host memory a rectangular transfer touches, counted from its
/// host origin: `(r2-1)*slice + (r1-1)*row + r0`, with the API's defaults
/// for zero pitches. `None` when the numbers are invalid or overflow, which
/// the caller reports as `CL_INVALID_VALUE`.
pub fn rect_extent(
    region: [u64; 3],
    elem: u64,
    row_pitch: u64,
    slice_pitch: u64,
) -> Option<RectExtent> {
    if region.contains(&0) || elem == 0 {
        return None;
    }
    let (row_bytes, row) = row_and_pitch(region[0], elem, row_pitch)?;
    let slice = or_packed(slice_pitch, row.checked_mul(region[1])?);
    let extent = (region[2] - 1)
        .checked_mul(slice)?
        .checked_add((region[1] - 1).checked_mul(row)?)?
        .checked_add(row_bytes)?;
    Some(RectExtent { row, slice, extent })
}

/// See [`rect_extent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RectExtent {
    pub row: u64,
    pub slice: u64,
    pub extent: u64,
}

impl RectExtent {
    /// Offset of a host origin (in elements of `elem` bytes along x).
    pub fn offset(&self, origin: [u64; 3], elem: u64) -> Option<u64> {
        origin[2]
            .checked_mul(self.slice)?
            .checked_add(origin[1].checked_mul(self.row)?)?
            .checked_add(origin[0].checked_mul(elem)?)
    }

    /// The byte after the last one the rectangle at `origin` touches.
    pub fn end(&self, origin: [u64; 3], elem: u64) -> Option<u64> {
        self.offset(origin, elem)?.checked_add(self.extent)
    }
}

/// Reads three `size_t` values (an origin or region) from 24 wire bytes.
pub fn triple(bytes: &[u8]) -> Option<[u64; 3]> {
    if bytes.len() < 24 {
        return None;
    }
    let mut t = [0u64; 3];
    for (i, v) in t.iter_mut().enumerate() {
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        *v = u64::from_le_bytes(a);
    }
    Some(t)
}

/// Size in bytes of one image element of the given channel order and type,
/// or `None` for a combination this table does not know.
pub fn image_element_size(order: u32, ty: u32) -> Option<u64> {
    let channels = match order {
        0x10B0 | 0x10B1 | 0x10B8 | 0x10B9 | 0x10BA | 0x10BF | 0x10C0 => 1, // R A INTENSITY LUMINANCE Rx DEPTH DEPTH_STENCIL
        0x10B2 | 0x10B3 | 0x10BB => 2,                                     // RG RA RGx
        0x10B4 | 0x10BC | 0x10C1 => 3,                                     // RGB RGBx sRGB
        0x10B5 | 0x10B6 | 0x10B7 | 0x10BD | 0x10BE | 0x10C2 | 0x10C3 | 0x10C4 => 4,
        _ => return None,
    };
    let per = match ty {
        0x10D0 | 0x10D2 | 0x10D7 | 0x10DA => 1, // SNORM_INT8 UNORM_INT8 SIGNED_INT8 UNSIGNED_INT8
        0x10D1 | 0x10D3 | 0x10D8 | 0x10DB | 0x10DD => 2, // SNORM_INT16 UNORM_INT16 SIGNED_INT16 UNSIGNED_INT16 HALF_FLOAT
        0x10D9 | 0x10DC | 0x10DE => 4,                   // SIGNED_INT32 UNSIGNED_INT32 FLOAT
        // Packed formats: the whole element.
        0x10D4 | 0x10D5 => return Some(2), // UNORM_SHORT_565 UNORM_SHORT_555
        0x10D6 | 0x10E0 => return Some(4), // UNORM_INT_101010 (and _2)
        0x10DF => return Some(4),          // UNORM_INT24
        _ => return None,
    };
    Some(channels * per)
}

/// Bytes of host memory an image of this shape occupies (what `clCreateImage`
/// reads from `host_ptr`), or `None` if the numbers are invalid.
#[allow(clippy::too_many_arguments)]
pub fn image_host_size(
    image_type: u32,
    width: u64,
    height: u64,
    depth: u64,
    array_size: u64,
    row_pitch: u64,
    slice_pitch: u64,
    elem: u64,
) -> Option<u64> {
    let (row_bytes, row) = row_and_pitch(width, elem, row_pitch)?;
    match image_type {
        CL_MEM_OBJECT_IMAGE1D | CL_MEM_OBJECT_IMAGE1D_BUFFER => Some(row_bytes),
        CL_MEM_OBJECT_IMAGE2D => row.checked_mul(height),
        CL_MEM_OBJECT_IMAGE3D => {
            or_packed(slice_pitch, row.checked_mul(height)?).checked_mul(depth)
        }
        CL_MEM_OBJECT_IMAGE2D_ARRAY => {
            or_packed(slice_pitch, row.checked_mul(height)?).checked_mul(array_size)
        }
        CL_MEM_OBJECT_IMAGE1D_ARRAY => or_packed(slice_pitch, row).checked_mul(array_size),
        _ => None,
    }
}

/// `cl_image_desc` as a 64-bit host lays it out, which is also how it
/// travels ([`crate::IMAGE_DESC_LEN`] little-endian bytes, with `mem_object`
/// as an id): the client reads an application's description with it, the
/// server decodes a request's and hands the library the same layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImageDesc {
    pub image_type: u32,
    pub width: usize,
    pub height: usize,
    pub depth: usize,
    pub array_size: usize,
    pub row_pitch: usize,
    pub slice_pitch: usize,
    pub num_mip_levels: u32,
    pub num_samples: u32,
    /// The buffer or image the image is made from: a handle, or on the wire
    /// its id; 0 for none.
    pub mem_object: usize,
}

impl ImageDesc {
    /// Decodes the [`crate::IMAGE_DESC_LEN`] bytes of a description; `None`
    /// for any other length.
    pub fn from_bytes(b: &[u8]) -> Option<ImageDesc> {
        if b.len() != crate::IMAGE_DESC_LEN {
            return None;
        }
        let word = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a) as usize
        };
        let half = |i: usize| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[i..i + 4]);
            u32::from_le_bytes(a)
        };
        Some(ImageDesc {
            image_type: half(0),
            width: word(8),
            height: word(16),
            depth: word(24),
            array_size: word(32),
            row_pitch: word(40),
            slice_pitch: word(48),
            num_mip_levels: half(56),
            num_samples: half(60),
            mem_object: word(64),
        })
    }

    /// Bytes of host memory the image occupies with elements of `elem`
    /// bytes (see [`image_host_size`]).
    pub fn host_size(&self, elem: u64) -> Option<u64> {
        image_host_size(
            self.image_type,
            self.width as u64,
            self.height as u64,
            self.depth as u64,
            self.array_size as u64,
            self.row_pitch as u64,
            self.slice_pitch as u64,
            elem,
        )
    }
}

/// The host side of an image transfer: row `y` of slice `z` of the region
/// starts `y * ystep + z * zstep` bytes into the window and is `row_bytes`
/// long; `extent` bytes in all. A 1D image array steps through its images
/// (the region's second coordinate) by the slice pitch; everything else
/// steps rows by the row pitch and slices by the slice pitch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageWindow {
    pub row_bytes: u64,
    pub ystep: u64,
    pub zstep: u64,
    pub extent: u64,
}

/// The window an image transfer of `region` touches in host memory, with
/// the API's defaults for zero pitches; `None` (reported as
/// `CL_INVALID_VALUE`) when the numbers are invalid for the image type or
/// overflow.
pub fn image_window(
    image_type: u32,
    region: [u64; 3],
    elem: u64,
    row_pitch: u64,
    slice_pitch: u64,
) -> Option<ImageWindow> {
    if region.contains(&0) || elem == 0 {
        return None;
    }
    let (row_bytes, row) = row_and_pitch(region[0], elem, row_pitch)?;
    let (ystep, zstep) = match image_type {
        // 1D image array: one row per image, images a slice pitch apart.
        CL_MEM_OBJECT_IMAGE1D_ARRAY => {
            if region[2] != 1 {
                return None;
            }
            let slice = or_packed(slice_pitch, row);
            if slice < row {
                return None;
            }
            (slice, 0)
        }
        // 1D image and 1D image buffer: a single row.
        CL_MEM_OBJECT_IMAGE1D | CL_MEM_OBJECT_IMAGE1D_BUFFER
            if region[1] != 1 || region[2] != 1 =>
        {
            return None
        }
        // 2D image: a single slice.
        CL_MEM_OBJECT_IMAGE2D if region[2] != 1 => return None,
        CL_MEM_OBJECT_IMAGE1D | CL_MEM_OBJECT_IMAGE1D_BUFFER | CL_MEM_OBJECT_IMAGE2D => (row, 0),
        CL_MEM_OBJECT_IMAGE3D | CL_MEM_OBJECT_IMAGE2D_ARRAY => {
            let min_slice = row.checked_mul(region[1])?;
            let slice = or_packed(slice_pitch, min_slice);
            if slice < min_slice {
                return None;
            }
            (row, slice)
        }
        _ => return None,
    };
    let extent = (region[2] - 1)
        .checked_mul(zstep)?
        .checked_add((region[1] - 1).checked_mul(ystep)?)?
        .checked_add(row_bytes)?;
    Some(ImageWindow {
        row_bytes,
        ystep,
        zstep,
        extent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rect_extent_matches_the_spec() {
        // 4x3x2 region of 1-byte elements, tight pitches.
        let r = rect_extent([4, 3, 2], 1, 0, 0).expect("valid");
        assert_eq!((r.row, r.slice, r.extent), (4, 12, 24));
        // Padded rows: the last row needs only its region width.
        let r = rect_extent([4, 3, 1], 1, 10, 0).expect("valid");
        assert_eq!(r.extent, 24);
        assert_eq!(r.offset([1, 1, 0], 1), Some(11));
        assert_eq!(
            rect_extent([4, 1, 1], 1, 3, 0),
            None,
            "row pitch below width"
        );
        assert_eq!(rect_extent([0, 1, 1], 1, 0, 0), None);
        assert_eq!(rect_extent([u64::MAX, 2, 2], 8, 0, 0), None, "overflow");
    }

    #[test]
    fn element_sizes() {
        assert_eq!(image_element_size(0x10B5, 0x10DE), Some(16)); // RGBA float
        assert_eq!(image_element_size(0x10B0, 0x10D2), Some(1)); // R unorm8
        assert_eq!(image_element_size(0x9999, 0x10D2), None);
    }

    #[test]
    fn image_desc_reads_the_c_layout() {
        assert_eq!(std::mem::size_of::<ImageDesc>(), crate::IMAGE_DESC_LEN);
        let mut b = vec![0u8; crate::IMAGE_DESC_LEN];
        b[0..4].copy_from_slice(&CL_MEM_OBJECT_IMAGE3D.to_le_bytes());
        for (i, v) in [8u64, 4, 3, 1, 40, 160].iter().enumerate() {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b[64..72].copy_from_slice(&77u64.to_le_bytes());
        let d = ImageDesc::from_bytes(&b).expect("72 bytes");
        assert_eq!((d.width, d.height, d.depth, d.slice_pitch), (8, 4, 3, 160));
        assert_eq!(d.mem_object, 77);
        assert_eq!(d.host_size(4), Some(3 * 160));
        assert_eq!(ImageDesc::from_bytes(&b[..71]), None);
    }

    #[test]
    fn windows_are_exact_per_image_type() {
        // 3D, tight: 8x4x3 of 4-byte pixels is exactly 384 bytes.
        let w = image_window(0x10F2, [8, 4, 3], 4, 0, 0).expect("valid");
        assert_eq!((w.ystep, w.zstep, w.extent), (32, 128, 384));
        // 2D with a padded row pitch: the last row needs only its width.
        let w = image_window(0x10F1, [8, 4, 1], 4, 40, 0).expect("valid");
        assert_eq!(w.extent, 3 * 40 + 32);
        // 1D array: images a slice pitch apart.
        let w = image_window(0x10F5, [8, 4, 1], 4, 0, 48).expect("valid");
        assert_eq!((w.ystep, w.extent), (48, 3 * 48 + 32));
        assert_eq!(image_window(0x10F1, [8, 4, 2], 4, 0, 0), None);
        assert_eq!(image_window(0x10F4, [8, 2, 1], 4, 0, 0), None);
        assert_eq!(image_window(0x10F2, [8, 4, 2], 4, 0, 64), None);
        assert_eq!(image_window(0x10F1, [8, 4, 1], 4, 16, 0), None);
    }
}
