//! The CUDA runtime API as Wormhole forwards it.
//!
//! [`DESCRIPTION`] is the single description of every forwarded function
//! (`cuda.api`); the client library and the server's CUDA backend generate
//! their stubs and dispatch from it. This crate also holds the logic both
//! sides share and that needs no GPU: the allocation tracker
//! ([`tracker`]), fat-binary and cubin parsing ([`fatbin`]), kernel
//! argument marshalling ([`launch`]) and the runtime's error texts
//! ([`errors`]).

pub mod errors;
pub mod fatbin;
pub mod launch;
pub mod tracker;
pub mod wire;

/// The API description, for build scripts.
pub const DESCRIPTION: &str = include_str!("../cuda.api");

/// Kinds of CUDA handle a tenant's table holds; a handle of one kind can
/// never be used as another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    Stream = 0,
    Event,
}

impl Kind {
    /// The status for a bad handle of this kind.
    pub fn invalid(self) -> i32 {
        cudaErrorInvalidResourceHandle
    }
}

/// Unused by CUDA (no info queries return handles); the generated common
/// code names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoHandle {
    One(Kind),
    Array(Kind),
    Custom,
}

// cudaError_t values this code uses (driver_types.h).
#[allow(non_upper_case_globals)]
mod status {
    pub const cudaSuccess: i32 = 0;
    pub const cudaErrorInvalidValue: i32 = 1;
    pub const cudaErrorMemoryAllocation: i32 = 2;
    pub const cudaErrorInitializationError: i32 = 3;
    pub const cudaErrorInvalidDevicePointer: i32 = 17;
    pub const cudaErrorInvalidSymbol: i32 = 13;
    pub const cudaErrorInvalidMemcpyDirection: i32 = 21;
    pub const cudaErrorInsufficientDriver: i32 = 35;
    pub const cudaErrorInvalidDeviceFunction: i32 = 98;
    pub const cudaErrorNoDevice: i32 = 100;
    pub const cudaErrorInvalidResourceHandle: i32 = 400;
    pub const cudaErrorInvalidKernelImage: i32 = 200;
    pub const cudaErrorNotSupported: i32 = 801;
    pub const cudaErrorUnknown: i32 = 999;
}
pub use status::*;

/// cudaMemcpyKind.
#[allow(non_upper_case_globals)]
pub mod memcpy_kind {
    pub const cudaMemcpyHostToHost: i32 = 0;
    pub const cudaMemcpyHostToDevice: i32 = 1;
    pub const cudaMemcpyDeviceToHost: i32 = 2;
    pub const cudaMemcpyDeviceToDevice: i32 = 3;
    pub const cudaMemcpyDefault: i32 = 4;
}

/// Which way a copy goes, once cudaMemcpyDefault is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HostToHost,
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

/// Resolves a copy's direction from its kind and, for cudaMemcpyDefault,
/// from whether each pointer is device memory (the tracker's answer); an
/// explicit kind is checked against the same answer: neither side may
/// treat a host address as a device one or the other way round.
#[allow(non_upper_case_globals)]
pub fn direction(kind: i32, dst_dev: bool, src_dev: bool) -> Result<Direction, i32> {
    use memcpy_kind::*;
    let d = match kind {
        cudaMemcpyHostToHost => Direction::HostToHost,
        cudaMemcpyHostToDevice => Direction::HostToDevice,
        cudaMemcpyDeviceToHost => Direction::DeviceToHost,
        cudaMemcpyDeviceToDevice => Direction::DeviceToDevice,
        cudaMemcpyDefault => match (dst_dev, src_dev) {
            (false, false) => Direction::HostToHost,
            (true, false) => Direction::HostToDevice,
            (false, true) => Direction::DeviceToHost,
            (true, true) => Direction::DeviceToDevice,
        },
        _ => return Err(cudaErrorInvalidMemcpyDirection),
    };
    let (want_dst, want_src) = match d {
        Direction::HostToHost => (false, false),
        Direction::HostToDevice => (true, false),
        Direction::DeviceToHost => (false, true),
        Direction::DeviceToDevice => (true, true),
    };
    // Either way round is refused: a device address the kind calls host
    // memory would be read or written in the client's own address space.
    if want_dst != dst_dev || want_src != src_dev {
        return Err(cudaErrorInvalidValue);
    }
    Ok(d)
}

/// The size of `cudaDeviceProp` in the headers of each major version
/// (12.9: 1032 bytes, 13.5: 1008; measured with sizeof against them).
pub fn devprop_size(major: u32) -> usize {
    if major == 12 {
        1032
    } else {
        1008
    }
}

/// The runtime version a client library reports, by soname major.
pub fn runtime_version(major: u32) -> i32 {
    match major {
        12 => 12090,
        _ => 13050,
    }
}

// No CUDA info query returns handles, so the generated `info_handle` is a
// match with only its default arm.
#[allow(clippy::match_single_binding)]
mod common {
    use super::InfoHandle;
    include!(concat!(env!("OUT_DIR"), "/common_gen.rs"));
}
pub use common::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_parses_with_disjoint_ids() {
        assert_eq!(func::cudaGetDeviceCount, 0x10000);
        assert!(FUNC_NAMES.contains(&"cudaLaunchKernel"));
        assert!(is_async(func::cudaMemset));
        assert!(!is_async(func::cudaMalloc));
    }

    #[test]
    fn memcpy_default_follows_the_pointers() {
        use memcpy_kind::*;
        assert_eq!(
            direction(cudaMemcpyDefault, true, false),
            Ok(Direction::HostToDevice)
        );
        assert_eq!(
            direction(cudaMemcpyDefault, false, true),
            Ok(Direction::DeviceToHost)
        );
        assert_eq!(
            direction(cudaMemcpyDefault, true, true),
            Ok(Direction::DeviceToDevice)
        );
        assert_eq!(
            direction(cudaMemcpyHostToDevice, false, false),
            Err(cudaErrorInvalidValue)
        );
        assert_eq!(
            direction(9, true, true),
            Err(cudaErrorInvalidMemcpyDirection)
        );
    }
}
