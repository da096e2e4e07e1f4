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
}
