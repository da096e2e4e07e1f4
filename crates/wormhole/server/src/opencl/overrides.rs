//! The index of the server's overrides: calls that cannot go to the library
//! as the client made them. The generated dispatch (`server_gen.rs`) and the
//! description's `check=` clauses name each as `overrides::NAME`; they live
//! in the module for their concern, re-exported here under that name. Each
//! has the C signature with the tenant in front (`d_NAME`: decodes its own
//! request).

pub use super::args::clSetKernelArg;
pub use super::builds::{
    whBuildProgramResult, whBuildProgramStart, whCompileProgramStart, whLinkProgramResult,
    whLinkProgramStart,
};
/// Residency drains a refused bulk request through this name.
pub use super::bulk::Bulk;
pub use super::bulk::{d_whEnqueueReadBufferBulk, d_whEnqueueWriteBufferBulk};
pub(crate) use super::extents::{
    buffer_range_ok, buffer_rect_ok, image_box_ok, image_span_ok, present,
};
pub use super::includes::d_whIncludeDir;
pub use super::launch::clCloneKernel;
pub use super::maps::{d_clEnqueueMapBuffer, d_clEnqueueMapImage, d_clEnqueueUnmapMemObject};
pub use super::objects::clCreateBuffer;
pub(crate) use super::objects::queue_supported;
pub use super::pending_maps::d_whFetchMapping;
pub use super::programs::{
    clCreateProgramWithBinary, clCreateProgramWithSource, clGetKernelArgInfo,
    clGetProgramBuildInfo, clLinkProgram,
};
pub use super::queries::{
    clGetDeviceInfo, clGetMemObjectInfo, clGetPlatformIDs, clGetPlatformInfo, clGetProgramInfo,
    whGetProgramBinary,
};
pub use super::retry::clBuildProgram;
pub use super::transfers::{clEnqueueReadBuffer, clEnqueueWriteBuffer};
pub use super::waits::{clFinish, clWaitForEvents};
