//! What a device is shown to offer beyond what the library says: pipes are
//! not offered. Wormhole does not forward `clCreatePipe` (the client refuses
//! it with `CL_INVALID_OPERATION`, what a device without pipe support
//! answers), so every device says it has none, and a program that asks
//! first never tries.

use std::ffi::c_void;

const CL_DEVICE_MAX_PIPE_ARGS: u32 = 0x1055;
const CL_DEVICE_PIPE_MAX_ACTIVE_RESERVATIONS: u32 = 0x1056;
const CL_DEVICE_PIPE_MAX_PACKET_SIZE: u32 = 0x1057;
const CL_DEVICE_PIPE_SUPPORT: u32 = 0x1071;
pub const CL_DEVICE_OPENCL_C_FEATURES: u32 = 0x106F;

/// `cl_name_version`: a 4-byte version and a 64-byte name.
const NAME_VERSION_LEN: usize = 68;

/// OpenCL C features that need what is not offered.
const WITHHELD_FEATURES: &[&[u8]] = &[b"__opencl_c_pipes"];

/// Overwrites the library's answer to a device query about pipes with
/// "none": `CL_FALSE` or 0, each a 4-byte value.
///
/// # Safety
/// `value` is NULL or holds `size` bytes that the library just wrote.
pub unsafe fn withhold(param: u32, value: *mut c_void, size: usize) {
    let pipes = matches!(
        param,
        CL_DEVICE_PIPE_SUPPORT
            | CL_DEVICE_MAX_PIPE_ARGS
            | CL_DEVICE_PIPE_MAX_ACTIVE_RESERVATIONS
            | CL_DEVICE_PIPE_MAX_PACKET_SIZE
    );
    if pipes && !value.is_null() && size >= 4 {
        // SAFETY: `value` is non-NULL and `size` >= 4 (checked above), and is
        // the decoder's `out_buf` of `size` bytes (`queries::clGetDeviceInfo`);
        // unaligned, as a byte buffer may be.
        unsafe { (value as *mut u32).write_unaligned(0) };
    }
}

/// `CL_DEVICE_OPENCL_C_FEATURES` without the features that need what is
/// not offered.
pub fn features(v: Vec<u8>) -> Vec<u8> {
    v.chunks_exact(NAME_VERSION_LEN)
        .filter(|c| {
            let name = c[4..].split(|&b| b == 0).next().unwrap_or(&[]);
            !WITHHELD_FEATURES.contains(&name)
        })
        .flatten()
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Vec<u8> {
        let mut e = vec![0u8; NAME_VERSION_LEN];
        e[..4].copy_from_slice(&0x0040_0000u32.to_le_bytes());
        e[4..4 + name.len()].copy_from_slice(name.as_bytes());
        e
    }

    #[test]
    fn pipes_leave_the_feature_list_and_the_rest_stays_in_order() {
        let list = [
            entry("__opencl_c_3d_image_writes"),
            entry("__opencl_c_pipes"),
            entry("__opencl_c_fp64"),
        ]
        .concat();
        let kept = features(list);
        assert_eq!(
            kept,
            [
                entry("__opencl_c_3d_image_writes"),
                entry("__opencl_c_fp64")
            ]
            .concat()
        );
        // A name that only starts like a withheld one stays.
        let longer = entry("__opencl_c_pipes_plus");
        assert_eq!(features(longer.clone()), longer);
    }

    #[test]
    fn pipe_answers_become_none_and_others_stay() {
        let mut v = [7u8; 8];
        // SAFETY: 8 writable bytes.
        unsafe { withhold(CL_DEVICE_PIPE_SUPPORT, v.as_mut_ptr().cast(), 4) };
        assert_eq!(v, [0, 0, 0, 0, 7, 7, 7, 7]);
        let mut w = [7u8; 4];
        // SAFETY: 4 writable bytes.
        unsafe { withhold(0x1030, w.as_mut_ptr().cast(), 4) };
        assert_eq!(w, [7; 4]);
        // Too small a buffer: left for the library's own answer.
        let mut x = [7u8; 2];
        // SAFETY: `size` says 2.
        unsafe { withhold(CL_DEVICE_MAX_PIPE_ARGS, x.as_mut_ptr().cast(), 2) };
        assert_eq!(x, [7; 2]);
    }
}
