//! The OpenCL API as Wormhole forwards it.
//!
//! [`DESCRIPTION`] is the single description of every forwarded function
//! (`opencl.api`); the client and server build scripts generate their stubs
//! and dispatch from it. This crate also holds what both sides must agree on:
//! the handle kinds, the function ids, which info parameters hold handles, and
//! the size rules for rectangular and image transfers, which the server uses
//! to size buffers itself rather than trust the client's numbers.

/// The API description, for build scripts.
pub const DESCRIPTION: &str = include_str!("../opencl.api");

/// Kinds of OpenCL object; a tenant's handle table is typed by these, so a
/// handle of one kind can never be used as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    Platform = 0,
    Device,
    Context,
    Queue,
    Mem,
    Program,
    Kernel,
    Event,
    Sampler,
}

impl Kind {
    /// The `CL_INVALID_*` code for a bad handle of this kind.
    pub fn invalid(self) -> i32 {
        match self {
            Kind::Platform => CL_INVALID_PLATFORM,
            Kind::Device => CL_INVALID_DEVICE,
            Kind::Context => CL_INVALID_CONTEXT,
            Kind::Queue => CL_INVALID_COMMAND_QUEUE,
            Kind::Mem => CL_INVALID_MEM_OBJECT,
            Kind::Program => CL_INVALID_PROGRAM,
            Kind::Kernel => CL_INVALID_KERNEL,
            Kind::Event => CL_INVALID_EVENT,
            Kind::Sampler => CL_INVALID_SAMPLER,
        }
    }
}

/// What an info parameter's value holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoHandle {
    One(Kind),
    Array(Kind),
    /// Translated by hand on each side (e.g. context properties).
    Custom,
}

/// Kinds of callback the API takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CallbackKind {
    /// Context error notification: not forwarded (never called).
    Ctx = 0,
    /// Program build/compile/link notification: run on the client when the
    /// (synchronous) call returns.
    Program,
    /// Event status callback: delivered through the notification ring.
    Event,
    /// Memory object destructor callback: likewise.
    Memdtor,
}

include!(concat!(env!("OUT_DIR"), "/common_gen.rs"));

/// Frame kinds on the notification ring (server to client).
pub mod notify {
    /// An event callback fired: token (u64), event status (i32).
    pub const EVENT_CALLBACK: u8 = 1;
    /// A memory object's destructor callback fired: token (u64).
    pub const MEM_DESTRUCTOR: u8 = 2;
}

pub const CL_SUCCESS: i32 = 0;
pub const CL_DEVICE_NOT_FOUND: i32 = -1;
pub const CL_MEM_OBJECT_ALLOCATION_FAILURE: i32 = -4;
pub const CL_OUT_OF_RESOURCES: i32 = -5;
pub const CL_OUT_OF_HOST_MEMORY: i32 = -6;
pub const CL_INVALID_VALUE: i32 = -30;
pub const CL_INVALID_PLATFORM: i32 = -32;
pub const CL_INVALID_DEVICE: i32 = -33;
pub const CL_INVALID_CONTEXT: i32 = -34;
pub const CL_INVALID_COMMAND_QUEUE: i32 = -36;
pub const CL_INVALID_QUEUE_PROPERTIES: i32 = -35;
pub const CL_INVALID_HOST_PTR: i32 = -37;
pub const CL_INVALID_BUFFER_SIZE: i32 = -61;
pub const CL_INVALID_MEM_OBJECT: i32 = -38;
pub const CL_INVALID_IMAGE_FORMAT_DESCRIPTOR: i32 = -39;
pub const CL_INVALID_SAMPLER: i32 = -41;
pub const CL_INVALID_PROGRAM: i32 = -44;
pub const CL_INVALID_KERNEL: i32 = -48;
pub const CL_INVALID_ARG_VALUE: i32 = -50;
pub const CL_INVALID_ARG_SIZE: i32 = -51;
pub const CL_INVALID_EVENT: i32 = -58;
pub const CL_INVALID_OPERATION: i32 = -59;
pub const CL_PLATFORM_NOT_FOUND_KHR: i32 = -1001;

pub const CL_MEM_USE_HOST_PTR: u64 = 1 << 3;
pub const CL_MEM_ALLOC_HOST_PTR: u64 = 1 << 4;
pub const CL_MEM_COPY_HOST_PTR: u64 = 1 << 5;
pub const CL_MAP_READ: u64 = 1;
pub const CL_MAP_WRITE: u64 = 2;
pub const CL_MAP_WRITE_INVALIDATE_REGION: u64 = 4;
pub const CL_CONTEXT_PLATFORM: isize = 0x1084;
pub const CL_IMAGE_ELEMENT_SIZE: u32 = 0x1111;
pub const CL_MEM_HOST_PTR: u32 = 0x1103;
pub const CL_MEM_FLAGS: u32 = 0x1101;
pub const CL_MEM_SIZE: u32 = 0x1102;
pub const CL_MEM_TYPE: u32 = 0x1100;
pub const CL_MEM_OBJECT_IMAGE2D: u32 = 0x10F1;

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
    let row_bytes = region[0].checked_mul(elem)?;
    let row = if row_pitch == 0 { row_bytes } else { row_pitch };
    if row < row_bytes {
        return None;
    }
    let slice = if slice_pitch == 0 {
        row.checked_mul(region[1])?
    } else {
        slice_pitch
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_parses_and_ids_are_stable() {
        assert_eq!(
            FUNC_NAMES[func::clGetPlatformIDs as usize],
            "clGetPlatformIDs"
        );
        assert_eq!(
            info_handle(func::clGetDeviceInfo, 0x1031),
            Some(InfoHandle::One(Kind::Platform))
        );
        assert_eq!(
            info_handle(func::clGetContextInfo, 0x1081),
            Some(InfoHandle::Array(Kind::Device))
        );
        assert_eq!(info_handle(func::clGetDeviceInfo, 0x1000), None);
    }

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
    let row_bytes = width.checked_mul(elem)?;
    let row = if row_pitch == 0 { row_bytes } else { row_pitch };
    if row < row_bytes {
        return None;
    }
    match image_type {
        0x10F4 | 0x10F6 => Some(row_bytes), // 1D, 1D buffer
        0x10F1 => row.checked_mul(height),  // 2D
        0x10F2 => {
            let slice = if slice_pitch == 0 {
                row.checked_mul(height)?
            } else {
                slice_pitch
            };
            slice.checked_mul(depth)
        }
        0x10F3 => {
            let slice = if slice_pitch == 0 {
                row.checked_mul(height)?
            } else {
                slice_pitch
            };
            slice.checked_mul(array_size)
        }
        0x10F5 => {
            let slice = if slice_pitch == 0 { row } else { slice_pitch };
            slice.checked_mul(array_size)
        }
        _ => None,
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
    let row_bytes = region[0].checked_mul(elem)?;
    let row = if row_pitch == 0 { row_bytes } else { row_pitch };
    if row < row_bytes {
        return None;
    }
    let (ystep, zstep) = match image_type {
        // 1D image array: one row per image, images a slice pitch apart.
        0x10F5 => {
            if region[2] != 1 {
                return None;
            }
            let slice = if slice_pitch == 0 { row } else { slice_pitch };
            if slice < row {
                return None;
            }
            (slice, 0)
        }
        // 1D image and 1D image buffer: a single row.
        0x10F4 | 0x10F6 if region[1] != 1 || region[2] != 1 => return None,
        // 2D image: a single slice.
        0x10F1 if region[2] != 1 => return None,
        0x10F4 | 0x10F6 | 0x10F1 => (row, 0),
        // 3D image and 2D image array.
        0x10F2 | 0x10F3 => {
            let min_slice = row.checked_mul(region[1])?;
            let slice = if slice_pitch == 0 {
                min_slice
            } else {
                slice_pitch
            };
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
mod image_window_tests {
    use super::*;

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

/// Layout of `cl_image_desc` on a 64-bit host, as it travels on the wire
/// (with `mem_object` as an id).
pub const IMAGE_DESC_LEN: usize = 72;
