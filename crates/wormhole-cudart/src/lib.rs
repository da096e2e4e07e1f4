//! Wormhole's CUDA runtime client: everything behind the libcudart
//! stand-ins (`wormhole-cudart-12`, `wormhole-cudart-13`), which only add
//! the ELF exports with NVIDIA's soname and symbol versions.
//!
//! Every function of `cuda.api` is here: generated stubs (`gen`) marshal a
//! call, send it to a Wormhole server over shared memory (or TCP) and
//! unmarshal the reply; `overrides` holds the hand-written ones (memory,
//! copies, kernel registration and launch, errors). The server is found as
//! the OpenCL client finds it (`WORMHOLE_SERVER`); with none, every call
//! returns what the native runtime returns on a machine without the NVIDIA
//! driver (cudaErrorInsufficientDriver).

pub mod overrides;
pub mod rt;

pub use rt::MAJOR;

/// The generated stubs.
#[allow(clippy::missing_safety_doc, unused_imports)]
pub mod gen {
    use std::ffi::{c_char, c_void};

    use wormhole_cuda_api::{cudaErrorNotSupported, cudaSuccess};
    use wormhole_cuda_api::{func, Kind};

    use crate::overrides;
    use crate::overrides as custom;
    use crate::rt::{adopt_new, released, retained, set_errcode, Call};

    include!(concat!(env!("OUT_DIR"), "/client_gen.rs"));
}

/// `dim3`, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dim3 {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}
