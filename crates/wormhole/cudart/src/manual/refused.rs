//! Entry points exported only to be refused: interprocess sharing and
//! graphs. A framework that links them (PyTorch does) then gets an error
//! it can report at the call, where a missing symbol would kill the
//! process at its first use.
//!
//! - **IPC:** every tenant is isolated, and the server does not broker
//!   handles between tenants. A memory or event handle is a capability
//!   that the server would have to vouch for.
//! - **Graphs:** stream capture is not forwarded, so no stream ever
//!   captures (cudaStreamIsCapturing says so) and no graph exists.
//! - **Cooperative launches:** refused as the extensible launch refuses
//!   them (`launches::cudaLaunchKernelExC`).
//! - **Managed and mapped memory:** no address can be both the client's
//!   memory and the device's, which is in another process or on another
//!   host.
#![allow(non_snake_case)] // the C names of the entry points

use std::ffi::{c_char, c_void};

use wormhole_cuda_api::*;

use crate::state::note;
use crate::{Dim3, IpcHandle};

/// Leaves `*dev_ptr` as it was: the device cannot reach the client's
/// memory, mapped or not.
pub extern "C" fn cudaHostGetDevicePointer(
    _dev_ptr: *mut *mut c_void,
    _host: *mut c_void,
    _flags: u32,
) -> i32 {
    note(cudaErrorNotSupported)
}

/// Leaves `*dev_ptr` as it was.
pub extern "C" fn cudaMallocManaged(_dev_ptr: *mut *mut c_void, _size: usize, _flags: u32) -> i32 {
    note(cudaErrorNotSupported)
}

pub extern "C" fn cudaIpcGetMemHandle(_handle: *mut c_void, _dev_ptr: *mut c_void) -> i32 {
    note(cudaErrorNotSupported)
}

pub extern "C" fn cudaIpcOpenMemHandle(
    _dev_ptr: *mut *mut c_void,
    _handle: IpcHandle,
    _flags: u32,
) -> i32 {
    note(cudaErrorNotSupported)
}

/// Nothing was ever opened.
pub extern "C" fn cudaIpcCloseMemHandle(_dev_ptr: *mut c_void) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaIpcGetEventHandle(_handle: *mut c_void, _event: *mut c_void) -> i32 {
    note(cudaErrorNotSupported)
}

pub extern "C" fn cudaIpcOpenEventHandle(_event: *mut *mut c_void, _handle: IpcHandle) -> i32 {
    note(cudaErrorNotSupported)
}

pub extern "C" fn cudaStreamBeginCapture(_stream: *mut c_void, _mode: i32) -> i32 {
    note(cudaErrorNotSupported)
}

/// As natively for a stream that is not capturing.
pub extern "C" fn cudaStreamEndCapture(_stream: *mut c_void, _graph: *mut *mut c_void) -> i32 {
    note(cudaErrorIllegalState)
}

pub extern "C" fn cudaGraphInstantiateWithFlags(
    _exec: *mut *mut c_void,
    _graph: *mut c_void,
    _flags: u64,
) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaGraphLaunch(_exec: *mut c_void, _stream: *mut c_void) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaGraphDestroy(_graph: *mut c_void) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaGraphExecDestroy(_exec: *mut c_void) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaGraphGetNodes(
    _graph: *mut c_void,
    _nodes: *mut *mut c_void,
    _count: *mut usize,
) -> i32 {
    note(cudaErrorInvalidValue)
}

/// CUDA 13's four parameters; CUDA 12's three-parameter symbol reads only
/// the first, as every parameter is ignored.
pub extern "C" fn cudaGraphNodeGetDependencies(
    _node: *mut c_void,
    _deps: *mut *mut c_void,
    _edges: *mut c_void,
    _count: *mut usize,
) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaGraphDebugDotPrint(
    _graph: *mut c_void,
    _path: *const c_char,
    _flags: u32,
) -> i32 {
    note(cudaErrorInvalidValue)
}

pub extern "C" fn cudaLaunchCooperativeKernel(
    _func: *const c_void,
    _grid: Dim3,
    _block: Dim3,
    _args: *mut *mut c_void,
    _shared_mem: usize,
    _stream: *mut c_void,
) -> i32 {
    note(cudaErrorNotSupported)
}
