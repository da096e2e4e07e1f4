//! Kernel launches: the `<<<...>>>` configuration nvcc's host code pushes
//! and pops, and the launch itself, its arguments packed by value by the
//! kernel's layout and batched once a launch of its shape has succeeded.

use std::cell::RefCell;
use std::ffi::c_void;

use wormhole_cuda_api::wire::Launch;
use wormhole_cuda_api::*;

use super::registration::{is_registered, kernel_layout};
use super::status_of;
use crate::call::Call;
use crate::state::{self, note};
use crate::Dim3;

#[derive(Clone, Copy)]
struct Config {
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: *mut c_void,
}

thread_local! {
    /// `<<<...>>>` configurations pushed and not yet popped.
    static CONFIGS: RefCell<Vec<Config>> = const { RefCell::new(Vec::new()) };
}

pub extern "C" fn __cudaPushCallConfiguration(
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: *mut c_void,
) -> u32 {
    CONFIGS.with(|c| {
        c.borrow_mut().push(Config {
            grid,
            block,
            shared_mem,
            stream,
        })
    });
    0
}

/// # Safety
/// Every pointer is writable (nvcc's host code passes locals).
pub unsafe extern "C" fn __cudaPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shared_mem: *mut usize,
    stream: *mut *mut c_void,
) -> i32 {
    let Some(c) = CONFIGS.with(|c| c.borrow_mut().pop()) else {
        return note(cudaErrorInvalidValue);
    };
    // SAFETY: each pointer is checked non-NULL below, and a non-NULL one is
    // writable for its type: this function's contract (nvcc's host code
    // passes the addresses of its locals).
    unsafe {
        if !grid.is_null() {
            *grid = c.grid;
        }
        if !block.is_null() {
            *block = c.block;
        }
        if !shared_mem.is_null() {
            *shared_mem = c.shared_mem;
        }
        if !stream.is_null() {
            *stream = c.stream;
        }
    }
    cudaSuccess
}

/// Packs the arguments by value (the kernel's layout from its cubin) and
/// queues the launch: like the OpenCL path's enqueues, it is batched until
/// the next synchronising call once a launch of the same shape succeeded.
///
/// # Safety
/// `args` holds one pointer per kernel parameter, each to that parameter's
/// value, as for the native call.
pub unsafe extern "C" fn cudaLaunchKernel(
    func: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: *mut c_void,
) -> i32 {
    let layout = match kernel_layout(func as usize as u64) {
        Ok(Some(l)) => l,
        // The kernel is in no cubin we could read: no layout to pack by.
        Ok(None) => return note(cudaErrorInvalidKernelImage),
        Err(e) => return note(e),
    };
    let sid = match state::handle_id(stream, Kind::Stream) {
        Ok(s) => s,
        Err(e) => return note(e),
    };
    if args.is_null() && !layout.params.is_empty() {
        return note(cudaErrorInvalidValue);
    }
    let packed = wormhole_cuda_api::launch::pack(&layout, |i, size| {
        // SAFETY: `args` is non-NULL where the kernel has parameters
        // (checked above), and args[i] points to parameter i's value,
        // `size` bytes by the kernel's own layout: cudaLaunchKernel's
        // contract for `args`.
        unsafe { std::slice::from_raw_parts(*args.add(i) as *const u8, size) }
    });
    let l = Launch {
        func: func as usize as u64,
        grid: [grid.x, grid.y, grid.z],
        block: [block.x, block.y, block.z],
        shared_mem: shared_mem as u64,
        stream: sid,
        args: packed,
    };
    status_of((|| {
        let mut c = Call::begin(func::cudaLaunchKernel)?;
        l.encode(&mut c.enc);
        for v in [
            l.func,
            u64::from(grid.x),
            u64::from(block.x),
            l.shared_mem,
            sid,
        ] {
            c.shape(v);
        }
        c.finish_async(false)
    })())
}

/// nvcc 12.x and 13's launch sites: the handle of a kernel is its host
/// stub's address, checked to be registered.
///
/// # Safety
/// `kernel` is NULL or writable.
pub unsafe extern "C" fn __cudaGetKernel(kernel: *mut *mut c_void, host_fun: *const c_void) -> i32 {
    if kernel.is_null() {
        return cudaErrorInvalidValue;
    }
    if !is_registered(host_fun as usize as u64) {
        return cudaErrorInvalidDeviceFunction;
    }
    // SAFETY: `kernel` is non-NULL (checked above), and a non-NULL one is a
    // writable cudaKernel_t slot: this function's contract.
    unsafe { *kernel = host_fun.cast_mut() };
    cudaSuccess
}

/// A launch through a handle from __cudaGetKernel, which is the stub's
/// address: cudaLaunchKernel's very arguments.
pub use cudaLaunchKernel as __cudaLaunchKernel;
/// The same under `--default-stream per-thread`. The tenant runs a client's
/// calls in order, so the legacy default stream (which serialises more) is
/// correct here, only less concurrent.
pub use cudaLaunchKernel as __cudaLaunchKernel_ptsz;

/// `cudaLaunchConfig_t` as CUDA 12 and 13 lay it out.
#[repr(C)]
struct LaunchConfig {
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: *mut c_void,
    attrs: *const LaunchAttribute,
    num_attrs: u32,
}

/// `cudaLaunchAttribute`: an id, then a 64-byte value at offset 8.
#[repr(C)]
struct LaunchAttribute {
    id: u32,
    _pad: u32,
    _value: [u8; 64],
}

/// Attributes a launch may drop and stay correct: an ignored entry, a
/// priority (a hint) and programmatic stream serialisation (which only
/// allows the next kernel to start early; without it launches serialise).
const DROPPABLE_LAUNCH_ATTRIBUTES: [u32; 3] = [0, 6, 8];

/// Whether a launch may go without `attrs`.
fn all_droppable(attrs: &[LaunchAttribute]) -> bool {
    attrs
        .iter()
        .all(|a| DROPPABLE_LAUNCH_ATTRIBUTES.contains(&a.id))
}

/// # Safety
/// `config` is NULL or a `cudaLaunchConfig_t` whose `attrs` hold
/// `numAttrs` entries; `args` as for cudaLaunchKernel.
pub unsafe extern "C" fn cudaLaunchKernelExC(
    config: *const c_void,
    kernel: *const c_void,
    args: *mut *mut c_void,
) -> i32 {
    // SAFETY: `config` is NULL (as_ref answers None) or points to a
    // readable cudaLaunchConfig_t: cudaLaunchKernelExC's contract.
    let Some(cfg) = (unsafe { config.cast::<LaunchConfig>().as_ref() }) else {
        return note(cudaErrorInvalidValue);
    };
    let attrs: &[LaunchAttribute] = if cfg.num_attrs == 0 || cfg.attrs.is_null() {
        &[]
    } else {
        // SAFETY: `attrs` is non-NULL (checked above) and holds `numAttrs`
        // entries: cudaLaunchKernelExC's contract for its config.
        unsafe { std::slice::from_raw_parts(cfg.attrs, cfg.num_attrs as usize) }
    };
    if !all_droppable(attrs) {
        return note(cudaErrorNotSupported);
    }
    // SAFETY: `args` is as cudaLaunchKernel needs (one pointer to each
    // parameter's value), cudaLaunchKernelExC's contract; the rest are
    // values read from the config.
    unsafe {
        cudaLaunchKernel(
            kernel,
            cfg.grid,
            cfg.block,
            args,
            cfg.shared_mem,
            cfg.stream,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(id: u32) -> LaunchAttribute {
        LaunchAttribute {
            id,
            _pad: 0,
            _value: [0; 64],
        }
    }

    #[test]
    fn only_hints_may_be_dropped() {
        assert!(all_droppable(&[]));
        assert!(all_droppable(&[attribute(0), attribute(6), attribute(8)]));
        // Cooperative (2) and cluster dimensions (4) change what runs.
        assert!(!all_droppable(&[attribute(6), attribute(2)]));
        assert!(!all_droppable(&[attribute(4)]));
    }

    /// nvcc's host code pushes `<<<...>>>` and its stub pops it, in the
    /// same thread, last in first out.
    #[test]
    fn call_configurations_pop_in_reverse() {
        let dim = |x| Dim3 { x, y: 1, z: 1 };
        assert_eq!(
            __cudaPushCallConfiguration(dim(1), dim(32), 0, std::ptr::null_mut()),
            0
        );
        assert_eq!(
            __cudaPushCallConfiguration(dim(2), dim(64), 128, std::ptr::null_mut()),
            0
        );
        let (mut grid, mut block, mut shared) = (Dim3::default(), Dim3::default(), 0usize);
        let mut stream = std::ptr::null_mut();
        for (want_grid, want_block, want_shared) in [(2, 64, 128), (1, 32, 0)] {
            // SAFETY: every pointer is a local.
            let status = unsafe {
                __cudaPopCallConfiguration(&mut grid, &mut block, &mut shared, &mut stream)
            };
            assert_eq!(status, cudaSuccess);
            assert_eq!(
                (grid, block, shared),
                (dim(want_grid), dim(want_block), want_shared)
            );
        }
        // SAFETY: NULL outputs are skipped.
        let empty = unsafe {
            __cudaPopCallConfiguration(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(empty, cudaErrorInvalidValue);
    }

    #[test]
    fn launches_need_a_registered_kernel_and_a_configuration() {
        static NOT_A_STUB: u8 = 0;
        let stub = std::ptr::from_ref(&NOT_A_STUB).cast::<c_void>();
        let mut kernel = std::ptr::null_mut();
        // SAFETY: `kernel` is writable.
        let status = unsafe { __cudaGetKernel(&mut kernel, stub) };
        assert_eq!(status, cudaErrorInvalidDeviceFunction);
        // SAFETY: refused before any argument is read.
        let status = unsafe {
            cudaLaunchKernel(
                stub,
                Dim3::default(),
                Dim3::default(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(status, cudaErrorInvalidDeviceFunction);
        // SAFETY: a NULL configuration is refused before anything is read.
        let status = unsafe { cudaLaunchKernelExC(std::ptr::null(), stub, std::ptr::null_mut()) };
        assert_eq!(status, cudaErrorInvalidValue);
    }
}
