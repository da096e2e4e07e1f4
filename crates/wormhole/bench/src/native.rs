//! The first OpenCL device with a context and an in-order queue on it, made
//! natively (through the same platforms the server loads), for the
//! benchmarks that time a real tenant in one process.

use std::ffi::c_void;

use thiserror::Error;
use wormhole_server::opencl::ffi;

const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;

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
pub(crate) struct Native {
    /// The platforms the server would load (a tenant table wants them).
    pub platforms: Vec<*mut c_void>,
    pub context: *mut c_void,
    pub queue: *mut c_void,
}

/// The first platform's first device, a context on it and a queue.
pub(crate) fn first_device() -> Result<Native, NativeError> {
    let platforms = wormhole_server::opencl::platforms(&[]);
    let p = *platforms.first().ok_or(NativeError::NoDevice)?;
    let mut device = std::ptr::null_mut();
    // SAFETY: `p` is a platform the ICD loader listed; `device` is room for
    // the one handle asked for, and the count pointer may be null.
    check("clGetDeviceIDs", unsafe {
        ffi::clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &mut device, std::ptr::null_mut())
    })?;
    let mut err = 0;
    // SAFETY: `&device` is an array of the one device just returned (the
    // count passed); no properties and no callback, so the null pointers
    // are the spec's "none"; `err` is a live out-parameter.
    let context = unsafe {
        ffi::clCreateContext(
            std::ptr::null(),
            1,
            &device,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut err,
        )
    };
    check("clCreateContext", err)?;
    // SAFETY: `context` was just created (checked above) on `device`;
    // `err` is a live out-parameter.
    let queue = unsafe { ffi::clCreateCommandQueue(context, device, 0, &mut err) };
    check("clCreateCommandQueue", err)?;
    Ok(Native {
        platforms,
        context,
        queue,
    })
}
