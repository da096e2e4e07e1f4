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

pub mod consts;
mod geometry;

pub use consts::*;
pub use geometry::*;

/// Layout of `cl_image_desc` on a 64-bit host, as it travels on the wire
/// (with `mem_object` as an id).
pub const IMAGE_DESC_LEN: usize = 72;

/// A list of handles an info query answers (a context's devices, say):
/// `query(size, value, size_ret)` makes the call, with `value` NULL or
/// holding `size` bytes and `size_ret` NULL or one writable `usize`. The size
/// is asked first, then the list; `None` when either call fails or the list
/// is empty or longer than `max` handles.
pub fn handle_list(
    max: usize,
    mut query: impl FnMut(usize, *mut std::ffi::c_void, *mut usize) -> i32,
) -> Option<Vec<*mut std::ffi::c_void>> {
    let handle = std::mem::size_of::<*mut std::ffi::c_void>();
    let mut bytes = 0usize;
    if query(0, std::ptr::null_mut(), &mut bytes) != CL_SUCCESS {
        return None;
    }
    let n = bytes / handle;
    if n == 0 || n > max {
        return None;
    }
    let mut list = vec![std::ptr::null_mut::<std::ffi::c_void>(); n];
    let status = query(n * handle, list.as_mut_ptr().cast(), std::ptr::null_mut());
    (status == CL_SUCCESS).then_some(list)
}

/// Rewrites the platform in a context property list (key and value pairs
/// up to a zero key) with `map`: the client turns its object into the id the
/// server knows, the server that id into the library's handle, and back for
/// the answer to `CL_CONTEXT_PROPERTIES`.
pub fn map_context_platform<E>(
    list: &mut [u64],
    mut map: impl FnMut(u64) -> Result<u64, E>,
) -> Result<(), E> {
    for pair in list.chunks_exact_mut(2) {
        match pair[0] as isize {
            0 => break,
            CL_CONTEXT_PLATFORM => pair[1] = map(pair[1])?,
            _ => {}
        }
    }
    Ok(())
}

/// [`map_context_platform`] on a list as an info answer holds it: 8-byte
/// little-endian words (a partial word at the end is left as it is).
pub fn map_context_platform_bytes(props: &mut [u8], mut map: impl FnMut(u64) -> u64) {
    let mut list: Vec<u64> = props
        .chunks_exact(8)
        .map(|w| w.iter().rev().fold(0, |acc, &b| acc << 8 | u64::from(b)))
        .collect();
    let mapped: Result<(), std::convert::Infallible> =
        map_context_platform(&mut list, |v| Ok(map(v)));
    let Ok(()) = mapped;
    for (w, v) in props.chunks_exact_mut(8).zip(list) {
        w.copy_from_slice(&v.to_le_bytes());
    }
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
    fn only_the_platform_before_the_end_is_mapped() {
        let words: [u64; 7] = [0x1085, 7, CL_CONTEXT_PLATFORM as u64, 5, 0, 0x1084, 9];
        let mut props: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        map_context_platform_bytes(&mut props, |id| id + 100);
        let got: Vec<u64> = props
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        // The platform becomes 105; the other key's value, and whatever lies
        // past the terminating zero (an odd tail included), are untouched.
        assert_eq!(
            got,
            [0x1085, 7, CL_CONTEXT_PLATFORM as u64, 105, 0, 0x1084, 9]
        );
    }
}
