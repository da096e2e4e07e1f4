//! The first OpenCL device with a context and an in-order queue on it, made
//! natively (through the same platforms the server loads), for the
//! benchmarks that time a real tenant in one process.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum NativeError {
    #[error("OpenCL: {what} failed with {code}")]
    Cl { what: &'static str, code: i32 },
    #[error("no OpenCL platform or device")]
    NoDevice,
}

/// `code` as a result: `what` failed unless it is CL_SUCCESS.
pub(crate) fn check(what: &'static str, code: i32) -> Result<(), NativeError> {
    if code == 0 {
        Ok(())
    } else {
        Err(NativeError::Cl { what, code })
    }
}

/// A context on one device and a queue; they live until the process ends.
pub(crate) use wormhole_server::opencl::FirstDevice as Native;

/// The first platform's first device, a context on it and a queue.
pub(crate) fn first_device() -> Result<Native, NativeError> {
    use wormhole_server::opencl::FirstDeviceError;
    wormhole_server::opencl::first_device().map_err(|e| match e {
        FirstDeviceError::NoPlatform => NativeError::NoDevice,
        FirstDeviceError::Call(what, code) => NativeError::Cl { what, code },
    })
}
