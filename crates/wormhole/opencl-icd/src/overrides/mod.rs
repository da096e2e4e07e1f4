//! Client-side overrides: the entry points that need more than the
//! generated stub, and the hand-written functions of the dispatch table.
//! The generated code names each as `overrides::NAME`; it lives in the
//! file of its concern.

mod creation;
mod events;
mod images;
mod platform;
mod programs;
mod rects;
mod transfers;

use std::ffi::c_void;

use crate::connection::info_value;
use crate::gen;

pub use crate::event_state::clGetEventInfo;
pub use crate::maps::{clEnqueueMapBuffer, clEnqueueMapImage, clEnqueueUnmapMemObject};
pub use creation::{
    clCreateBuffer, clCreateBufferWithProperties, clCreateCommandQueue,
    clCreateCommandQueueWithProperties, clCreateKernel, clCreateSubBuffer, clSetKernelArg,
};
pub(crate) use events::settle_for;
pub use events::{
    clCreateUserEvent, clEnqueueMarker, clEnqueueMarkerWithWaitList, clFinish,
    clSetUserEventStatus, clWaitForEvents,
};
pub use images::{
    clCreateImage, clCreateImage2D, clCreateImage3D, clCreateImageWithProperties,
    clEnqueueReadImage, clEnqueueWriteImage,
};
pub use platform::{
    clGetExtensionFunctionAddress, clGetExtensionFunctionAddressForPlatform, clGetPlatformIDs,
    clGetPlatformInfo,
};
pub use programs::{clBuildProgram, clCompileProgram, clGetProgramInfo, clLinkProgram};
pub use rects::{clEnqueueReadBufferRect, clEnqueueWriteBufferRect};
pub use transfers::{clEnqueueReadBuffer, clEnqueueWriteBuffer};
pub(crate) use transfers::{copy_for, BufTransfer};

/// One fixed-size answer of `clGetMemObjectInfo`; `T` is the type the API
/// gives `param`.
pub(crate) fn mem_info<T: Copy + Default>(mem: *mut c_void, param: u32) -> Result<T, i32> {
    info_value(gen::clGetMemObjectInfo, mem, param)
}

pub(crate) const CL_QUEUE_CONTEXT: u32 = 0x1090;
pub(crate) const CL_QUEUE_DEVICE: u32 = 0x1091;
pub(crate) const CL_MEM_OBJECT_BUFFER: u32 = 0x10F0;
pub(crate) const CL_TRUE: u32 = 1;
pub(crate) const CL_COMPLETE: i32 = 0;
