//! An in-process driver for the fuzzer: a tenant on the real platform,
//! seeded with live objects under known ids, fed request frames through the
//! very code a tenant process runs ([`crate::serve::handle_frame`]).
//!
//! Each run gets a fresh [`Tenant`] whose table holds its own references to
//! the seeded objects; at the end the tenant drops every reference it holds
//! ([`Tenant::release_all`]), so runs are independent and nothing leaks.
//!
//! A few requests are valid but not worth fuzzing in-process, and are
//! answered `CL_INVALID_OPERATION` here (never by the server):
//! * compiling or loading programs (`clCreateProgramWith*`, `clBuildProgram`,
//!   `clCompileProgram`, `clLinkProgram` and their `wh*ProgramStart` forms
//!   for threads of their own): they run the vendor's compiler or
//!   binary loader on the tenant's input, and a kernel is arbitrary code that
//!   runs inside the tenant process on a CPU device by design;
//! * `clCreateUserEvent`: a wait on an unsignalled user event blocks the
//!   tenant until its own client signals it, which a single-threaded fuzzer
//!   never does;
//! * kernel launches of more than [`MAX_FUZZ_WORK_ITEMS`] work-items, which
//!   are slow, not wrong.

use std::ffi::c_void;
use std::sync::Arc;

use wormhole_opencl_api::{func, Kind, CL_INVALID_OPERATION, CL_SUCCESS};
use wormhole_transport::arena::Arena;
use wormhole_wire::{Decoder, Encoder, RequestHeader};

use crate::opencl::{self, ffi, tenant::Limits, tenant::Tenant};

/// Known ids of the seeded objects.
pub mod ids {
    use crate::opencl::tenant::SERVER_ID_BASE;
    pub const PLATFORM: u64 = SERVER_ID_BASE;
    pub const DEVICE: u64 = SERVER_ID_BASE + 1;
    pub const CONTEXT: u64 = 1;
    pub const QUEUE: u64 = 2;
    pub const BUFFER: u64 = 3;
    pub const PROGRAM: u64 = 4;
    pub const KERNEL: u64 = 5;
    pub const IMAGE: u64 = 6;
    pub const SAMPLER: u64 = 7;
    pub const EVENT: u64 = 8;
    pub const BUFFER2: u64 = 9;
}

/// Bytes in each seeded buffer.
pub const BUFFER_SIZE: usize = 4096;
/// Width and height of the seeded RGBA8 image.
pub const IMAGE_SIDE: usize = 16;
/// The tenant's allocation limit in the harness (a server's default is
/// 4 GiB per request, which is as valid, but exhausts a fuzzer's memory).
pub const FUZZ_MAX_ALLOC: u64 = 64 << 20;
/// The tenant's memory quota in the harness (`tenant_memory`), which also
/// keeps a run's many buffers within a fuzzer's memory.
pub const FUZZ_TENANT_MEMORY: u64 = 256 << 20;
/// Largest kernel launch the harness lets through.
pub const MAX_FUZZ_WORK_ITEMS: u64 = 1 << 12;

/// A kernel that is memory-safe for any arguments the fuzzer can set:
/// it touches one byte, and only through a non-NULL buffer.
const KERNEL_SRC: &str = "__kernel void k(__global uchar *a, uint x) {\n\
    if (a && get_global_id(0) == 0) a[0] = (uchar)x;\n}\n";

/// Why the harness could not start.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("no OpenCL platform with a device")]
    NoPlatform,
    #[error("{0} failed with {1}")]
    Call(&'static str, i32),
}

/// The seeded objects, created once.
pub struct Harness {
    platforms: Vec<*mut c_void>,
    device: *mut c_void,
    seeds: Vec<(u64, Kind, *mut c_void)>,
    queue: *mut c_void,
    enc: Encoder,
    shared: Option<Arc<crate::opencl::shared::SharedBuffers>>,
}

/// The arena every fuzzed tenant shares (buffers it creates are freed by
/// their destructor callbacks; when it is full, buffers are made as usual).
const FUZZ_ARENA: usize = 64 << 20;

fn check(what: &'static str, s: i32) -> Result<(), HarnessError> {
    if s == CL_SUCCESS {
        Ok(())
    } else {
        Err(HarnessError::Call(what, s))
    }
}

impl Harness {
    /// Creates the seeded objects on the first platform with a device.
    pub fn new() -> Result<Self, HarnessError> {
        let platforms = opencl::platforms(&[]);
        let platform = *platforms.first().ok_or(HarnessError::NoPlatform)?;
        let mut device = std::ptr::null_mut();
        // SAFETY: room for one device handle.
        let s = unsafe {
            ffi::clGetDeviceIDs(platform, u64::MAX, 1, &mut device, std::ptr::null_mut())
        };
        check("clGetDeviceIDs", s)?;
        let mut err = 0;
        // SAFETY: one valid device; no properties, no callback.
        let ctx = unsafe {
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
        // SAFETY: a valid context and device.
        let queue = unsafe { ffi::clCreateCommandQueue(ctx, device, 0, &mut err) };
        check("clCreateCommandQueue", err)?;
        let mk_buffer = |err: &mut i32| {
            // SAFETY: a valid context; no host pointer.
            unsafe { ffi::clCreateBuffer(ctx, 1, BUFFER_SIZE, std::ptr::null_mut(), err) }
        };
        let buffer = mk_buffer(&mut err);
        check("clCreateBuffer", err)?;
        // The second buffer lives in a shared arena, as a CPU device's
        // buffers do for a real client: maps and transfers of it take the
        // shared paths (direct and deferred maps).
        let shared = Arena::create(FUZZ_ARENA)
            .ok()
            .map(crate::opencl::shared::SharedBuffers::new);
        let buffer2 = match &shared {
            Some(sb) => {
                // SAFETY: a valid context; no initial contents.
                let b = unsafe {
                    crate::opencl::shared::create(sb, ctx, 1, BUFFER_SIZE, std::ptr::null())
                };
                b.ok_or(HarnessError::Call("clCreateBuffer in the arena", -5))?
            }
            None => {
                let b = mk_buffer(&mut err);
                check("clCreateBuffer", err)?;
                b
            }
        };
        let src = KERNEL_SRC.as_ptr() as *const std::ffi::c_char;
        let len = KERNEL_SRC.len();
        // SAFETY: one source string with its length.
        let program = unsafe { ffi::clCreateProgramWithSource(ctx, 1, &src, &len, &mut err) };
        check("clCreateProgramWithSource", err)?;
        // SAFETY: a valid program; no options, no callback.
        let s = unsafe {
            ffi::clBuildProgram(
                program,
                0,
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        check("clBuildProgram", s)?;
        // SAFETY: a built program; a NUL-terminated name.
        let kernel = unsafe { ffi::clCreateKernel(program, c"k".as_ptr(), &mut err) };
        check("clCreateKernel", err)?;
        // CL_RGBA, CL_UNORM_INT8.
        let format: [u32; 2] = [0x10B5, 0x10D2];
        // SAFETY: a valid format; no host pointer.
        let image = unsafe {
            ffi::clCreateImage2D(
                ctx,
                1,
                format.as_ptr().cast(),
                IMAGE_SIDE,
                IMAGE_SIDE,
                0,
                std::ptr::null_mut(),
                &mut err,
            )
        };
        check("clCreateImage2D", err)?;
        // SAFETY: a valid context; CL_ADDRESS_CLAMP, CL_FILTER_NEAREST.
        let sampler = unsafe { ffi::clCreateSampler(ctx, 0, 0x1132, 0x1140, &mut err) };
        check("clCreateSampler", err)?;
        let mut event = std::ptr::null_mut();
        // SAFETY: a valid queue; the event is written on success.
        let s = unsafe { ffi::clEnqueueMarkerWithWaitList(queue, 0, std::ptr::null(), &mut event) };
        check("clEnqueueMarkerWithWaitList", s)?;
        // SAFETY: a valid queue.
        check("clFinish", unsafe { ffi::clFinish(queue) })?;
        // PoCL drops its own reference on a finished command's event a
        // moment after clFinish returns, from its worker: wait for it, so
        // that the seeds' counts start settled (a test comparing counts
        // before and after a run saw 2 then 1 under load). Bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        // SAFETY: the event was just created and we hold its reference.
        while unsafe { opencl::refcount(Kind::Event, event) } > 1
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let seeds = vec![
            (ids::CONTEXT, Kind::Context, ctx),
            (ids::QUEUE, Kind::Queue, queue),
            (ids::BUFFER, Kind::Mem, buffer),
            (ids::PROGRAM, Kind::Program, program),
            (ids::KERNEL, Kind::Kernel, kernel),
            (ids::IMAGE, Kind::Mem, image),
            (ids::SAMPLER, Kind::Sampler, sampler),
            (ids::EVENT, Kind::Event, event),
            (ids::BUFFER2, Kind::Mem, buffer2),
        ];
        Ok(Harness {
            platforms: vec![platform],
            device,
            seeds,
            queue,
            enc: Encoder::new(),
            shared,
        })
    }

    /// The seeded context.
    pub fn context(&self) -> *mut c_void {
        self.seeds[0].2
    }

    /// The seeded queue.
    pub fn queue(&self) -> *mut c_void {
        self.queue
    }

    /// A fresh tenant whose table holds one reference of its own to each
    /// seeded object, as if the client had created them.
    pub fn tenant(&self) -> Tenant {
        let limits = Limits {
            max_alloc: FUZZ_MAX_ALLOC,
            ..Limits::default()
        };
        let mut t = Tenant::new(self.platforms.clone(), limits, None);
        t.shared = self.shared.clone();
        let dev = t.id_for(Kind::Device, self.device);
        debug_assert_eq!(dev, ids::DEVICE);
        for &(id, kind, raw) in &self.seeds {
            opencl::retain_real(kind, raw);
            let _ = t.insert(id, kind, raw);
        }
        // After the seeds, which outlive every run: only what a run creates
        // is charged (and given back when the library destroys it).
        t.memory = Some(std::sync::Arc::new(crate::quota::Quota::new(
            FUZZ_TENANT_MEMORY,
        )));
        t
    }

    /// Runs `frames` in order on a fresh tenant; returns each reply's
    /// status (`None` for a deferred call) and tears the tenant down.
    pub fn run<'a>(&mut self, frames: impl IntoIterator<Item = &'a [u8]>) -> Vec<Option<i32>> {
        let mut t = self.tenant();
        let mut deferred = crate::serve::Deferred::default();
        let mut out = Vec::new();
        for f in frames {
            if refused(f) {
                out.push(Some(CL_INVALID_OPERATION));
                continue;
            }
            let replied = crate::serve::handle_frame(&mut t, f, &mut self.enc, &mut deferred);
            out.push(replied.then(|| {
                let b = self.enc.as_slice();
                i32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }));
        }
        // SAFETY: the harness's queue lives as long as the harness.
        unsafe { opencl::overrides::unmap_all(&mut t, self.queue) };
        t.release_all();
        // Commands still running hold references (on the queue, say) until
        // they complete.
        // SAFETY: the harness's own queue.
        unsafe { ffi::clFinish(self.queue) };
        out
    }

    /// The library's reference counts of the seeded objects. After every
    /// run they must be what they were before it: a run that leaves one
    /// higher leaks, and one that leaves one lower will free an object that
    /// is still in use. The queue is left out: the library's own recent
    /// commands hold references on it that come and go.
    pub fn seed_refcounts(&self) -> Vec<u32> {
        self.seeds
            .iter()
            .filter(|s| s.1 != Kind::Queue)
            // SAFETY: the harness holds a reference on every seed.
            .map(|&(_, kind, raw)| unsafe { opencl::refcount(kind, raw) })
            .collect()
    }
}

/// The requests the harness does not run (see the module comment).
fn refused(frame: &[u8]) -> bool {
    let mut d = Decoder::new(frame);
    let Ok(h) = RequestHeader::decode(&mut d) else {
        return false;
    };
    match h.func {
        func::clCreateProgramWithSource
        | func::clCreateProgramWithBinary
        | func::clCreateProgramWithBuiltInKernels
        | func::clBuildProgram
        | func::clCompileProgram
        | func::clLinkProgram
        | func::whBuildProgramStart
        | func::whCompileProgramStart
        | func::whLinkProgramStart
        | func::clCreateUserEvent => true,
        func::clEnqueueNDRangeKernel => launch_too_big(&mut d),
        _ => false,
    }
}

/// True when an NDRange request asks for more than [`MAX_FUZZ_WORK_ITEMS`];
/// a frame too malformed to tell goes through (the decoder rejects it).
fn launch_too_big(d: &mut Decoder<'_>) -> bool {
    let mut size = || -> Option<u64> {
        d.u64().ok()?;
        d.u64().ok()?;
        let dim = d.u32().ok()?;
        d.opt_bytes().ok()?;
        let global = d.opt_bytes().ok()??;
        let mut total: u64 = 1;
        for c in global.chunks_exact(8).take(dim as usize) {
            let v = u64::from_le_bytes(c.try_into().ok()?);
            total = total.saturating_mul(v);
        }
        Some(total)
    };
    size().is_some_and(|n| n > MAX_FUZZ_WORK_ITEMS)
}

impl Drop for Harness {
    fn drop(&mut self) {
        for &(_, kind, raw) in self.seeds.iter().rev() {
            // SAFETY: the reference the harness took when it made the seed.
            unsafe { opencl::release_real(kind, raw) };
        }
    }
}

/// Builds a request frame, argument by argument in wire order (the
/// fuzzer's templates and the raw-protocol tests use it).
pub struct Frame(Encoder);

impl Frame {
    pub fn new(f: u32) -> Self {
        let mut e = Encoder::new();
        RequestHeader { func: f, flags: 0 }.encode(&mut e);
        Frame(e)
    }
    /// A handle (an id) or any u64.
    pub fn h(mut self, id: u64) -> Self {
        self.0.u64(id);
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.u32(v);
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.u64(v);
        self
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.u8(v);
        self
    }
    pub fn b(self, v: bool) -> Self {
        self.u8(v as u8)
    }
    pub fn bytes(mut self, v: &[u8]) -> Self {
        self.0.bytes(v);
        self
    }
    pub fn opt(mut self, v: Option<&[u8]>) -> Self {
        self.0.opt_bytes(v);
        self
    }
    /// A present array of ids (or of property values).
    pub fn ids(mut self, v: &[u64]) -> Self {
        self.0.bool(true);
        self.0.u64s(v);
        self
    }
    /// An info-style tail: param, size, value wanted, size wanted.
    pub fn info(self, param: u32, size: u64) -> Self {
        self.u32(param).u64(size).b(true).b(true)
    }
    /// No wait list, no event.
    pub fn no_events(self) -> Self {
        self.u32(0).b(false).b(false)
    }
    pub fn done(self) -> Vec<u8> {
        self.0.into_vec()
    }
}

/// Three size_t values, as origins and regions travel.
pub fn triple(a: u64, b: u64, c: u64) -> Vec<u8> {
    [a, b, c].iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Valid requests on the seeded objects, one per interesting path: the
/// structured fuzz mode mutates these. Ids 100 and up are fresh.
pub fn templates() -> Vec<Vec<u8>> {
    use func::*;
    use ids::*;
    let zero = triple(0, 0, 0);
    let r441 = triple(4, 4, 1);
    vec![
        Frame::new(clGetPlatformInfo)
            .h(PLATFORM)
            .info(0x0902, 64)
            .done(),
        Frame::new(clGetDeviceInfo)
            .h(DEVICE)
            .info(0x1030, 4096)
            .done(),
        Frame::new(clGetDeviceIDs)
            .h(PLATFORM)
            .u64(u64::from(u32::MAX))
            .u32(4)
            .b(true)
            .b(true)
            .done(),
        Frame::new(clCreateContext)
            .ids(&[0x1084, PLATFORM])
            .u32(1)
            .ids(&[DEVICE])
            // No callback, no user data.
            .b(false)
            .b(false)
            .u64(100)
            .done(),
        Frame::new(clCreateCommandQueue)
            .h(CONTEXT)
            .h(DEVICE)
            .u64(0)
            .u64(101)
            .done(),
        Frame::new(clCreateBuffer)
            .h(CONTEXT)
            .u64(1)
            .u64(1024)
            .u8(0)
            .u64(102)
            .done(),
        Frame::new(clCreateBuffer)
            .h(CONTEXT)
            .u64(0x21)
            .u64(16)
            .u8(1)
            .bytes(&[7; 16])
            .u64(103)
            .done(),
        Frame::new(clEnqueueReadBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u32(1)
            .u64(0)
            .u64(64)
            .b(true)
            .u32(0)
            .b(false)
            .b(true)
            .u64(104)
            .done(),
        Frame::new(clEnqueueWriteBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u32(1)
            .u64(8)
            .u64(16)
            .opt(Some(&[1; 16]))
            .no_events()
            .done(),
        Frame::new(clEnqueueCopyBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .h(BUFFER2)
            .u64(0)
            .u64(64)
            .u64(128)
            .no_events()
            .done(),
        Frame::new(clEnqueueFillBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .opt(Some(&[1, 2, 3, 4]))
            .u64(4)
            .u64(0)
            .u64(64)
            .no_events()
            .done(),
        Frame::new(clEnqueueReadBufferRect)
            .h(QUEUE)
            .h(BUFFER)
            .u32(1)
            .opt(Some(&zero))
            .opt(Some(&zero))
            .opt(Some(&triple(8, 2, 1)))
            .u64(16)
            .u64(0)
            .u64(8)
            .u64(0)
            .b(true)
            .no_events()
            .done(),
        Frame::new(clSetKernelArg)
            .h(KERNEL)
            .u32(0)
            .u64(8)
            .u8(2)
            .u8(0)
            .h(BUFFER)
            .done(),
        Frame::new(clSetKernelArg)
            .h(KERNEL)
            .u32(1)
            .u64(4)
            .u8(1)
            .bytes(&[9, 0, 0, 0])
            .done(),
        Frame::new(clEnqueueNDRangeKernel)
            .h(QUEUE)
            .h(KERNEL)
            .u32(1)
            .opt(None)
            .opt(Some(&4u64.to_le_bytes()))
            .opt(None)
            .u32(0)
            .b(false)
            .b(true)
            .u64(105)
            .done(),
        Frame::new(clEnqueueMapBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u64(3)
            .u64(0)
            .u64(64)
            .u32(0)
            .b(false)
            .b(false)
            .u64(1)
            .u8(1)
            .done(),
        // Map id, written-back bytes follow (64 of them, which the harness,
        // having no channel, abandons), then queue and buffer.
        Frame::new(clEnqueueUnmapMemObject)
            .u64(1)
            .b(true)
            .u64(64)
            .h(QUEUE)
            .h(BUFFER)
            .no_events()
            .done(),
        Frame::new(clReleaseMemObject).h(BUFFER).done(),
        Frame::new(clRetainMemObject).h(BUFFER).done(),
        Frame::new(clCreateSubBuffer)
            .h(BUFFER)
            .u64(1)
            .u32(0x1220)
            .opt(Some(&[0u64.to_le_bytes(), 64u64.to_le_bytes()].concat()))
            .u64(106)
            .done(),
        Frame::new(clGetMemObjectInfo)
            .h(BUFFER)
            .info(0x1106, 8)
            .done(),
        Frame::new(clEnqueueReadImage)
            .h(QUEUE)
            .h(IMAGE)
            .u32(1)
            .opt(Some(&zero))
            .opt(Some(&r441))
            .u64(0)
            .u64(0)
            .b(true)
            .no_events()
            .done(),
        Frame::new(clWaitForEvents).u32(1).ids(&[EVENT]).done(),
        Frame::new(clGetEventInfo).h(EVENT).info(0x11D0, 8).done(),
        Frame::new(clGetKernelInfo).h(KERNEL).info(0x1194, 8).done(),
        Frame::new(clCreateKernel)
            .h(PROGRAM)
            .opt(Some(b"k"))
            .u64(107)
            .done(),
        Frame::new(clCreateKernelsInProgram)
            .h(PROGRAM)
            .u32(4)
            .b(true)
            .b(true)
            .done(),
        Frame::new(clReleaseKernel).h(KERNEL).done(),
        Frame::new(clReleaseEvent).h(EVENT).done(),
        Frame::new(clEnqueueMapImage)
            .h(QUEUE)
            .h(IMAGE)
            .u64(1)
            .bytes(&zero)
            .bytes(&r441)
            .u32(0)
            .b(false)
            .b(false)
            .u64(2)
            .u8(0)
            .done(),
        Frame::new(clEnqueueCopyImage)
            .h(QUEUE)
            .h(IMAGE)
            .h(IMAGE)
            .opt(Some(&zero))
            .opt(Some(&triple(8, 0, 0)))
            .opt(Some(&r441))
            .no_events()
            .done(),
        Frame::new(clGetContextInfo)
            .h(CONTEXT)
            .info(0x1081, 8)
            .done(),
        Frame::new(clCreateImage2D)
            .h(CONTEXT)
            .u64(1)
            .opt(Some(&[0xB5, 0x10, 0, 0, 0xD2, 0x10, 0, 0]))
            .u64(4)
            .u64(4)
            .u64(0)
            .u8(0)
            .u64(108)
            .done(),
        Frame::new(clEnqueueWriteImage)
            .h(QUEUE)
            .h(IMAGE)
            .u32(1)
            .opt(Some(&zero))
            .opt(Some(&triple(2, 2, 1)))
            .u64(0)
            .u64(0)
            .opt(Some(&[3; 24]))
            .no_events()
            .done(),
        Frame::new(whGetProgramBinary)
            .h(PROGRAM)
            .u32(0)
            .u64(1 << 20)
            .b(true)
            .done(),
        Frame::new(clGetProgramInfo)
            .h(PROGRAM)
            .info(0x1165, 8)
            .done(),
        Frame::new(clReleaseContext).h(CONTEXT).done(),
        Frame::new(clSetKernelArg)
            .h(KERNEL)
            .u32(0)
            .u64(8)
            .u8(2)
            .u8(1)
            .h(SAMPLER)
            .done(),
        Frame::new(clEnqueueCopyBufferRect)
            .h(QUEUE)
            .h(BUFFER)
            .h(BUFFER2)
            .opt(Some(&zero))
            .opt(Some(&zero))
            .opt(Some(&triple(16, 4, 1)))
            .u64(16)
            .u64(0)
            .u64(32)
            .u64(0)
            .no_events()
            .done(),
        Frame::new(clEnqueueFillImage)
            .h(QUEUE)
            .h(IMAGE)
            .opt(Some(&[1; 16]))
            .opt(Some(&zero))
            .opt(Some(&triple(2, 2, 1)))
            .no_events()
            .done(),
        Frame::new(clGetKernelWorkGroupInfo)
            .h(KERNEL)
            .h(DEVICE)
            .info(0x11B0, 8)
            .done(),
        Frame::new(clCloneKernel).h(KERNEL).u64(109).done(),
        Frame::new(clEnqueueMigrateMemObjects)
            .h(QUEUE)
            .u32(1)
            .ids(&[BUFFER])
            .u64(0)
            .no_events()
            .done(),
        Frame::new(clEnqueueCopyImageToBuffer)
            .h(QUEUE)
            .h(IMAGE)
            .h(BUFFER)
            .opt(Some(&zero))
            .opt(Some(&r441))
            .u64(0)
            .no_events()
            .done(),
        Frame::new(clGetImageInfo).h(IMAGE).info(0x1111, 8).done(),
        Frame::new(clGetSupportedImageFormats)
            .h(CONTEXT)
            .u64(1)
            .u32(0x10F1)
            .u32(64)
            .b(true)
            .b(true)
            .done(),
        // A map that does not wait (pending: the client fetches its bytes
        // once its event completed), then the fetch.
        Frame::new(clEnqueueMapBuffer)
            .h(QUEUE)
            .h(BUFFER)
            .u64(1)
            .u64(0)
            .u64(64)
            .u32(0)
            .b(false)
            .b(true)
            .u64(110)
            .u64(2)
            .u8(4)
            .done(),
        Frame::new(whFetchMapping).u64(2).done(),
    ]
}

/// Values worth trying wherever a number goes: every seeded id, fresh ids,
/// other tenants' kinds of ids, and sizes at and past every boundary.
pub const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    100,
    104,
    ids::PLATFORM,
    ids::DEVICE,
    ids::DEVICE + 1,
    ids::PLATFORM - 1,
    8,
    16,
    24,
    64,
    4095,
    4096,
    4097,
    1 << 16,
    1 << 31,
    1 << 32,
    1 << 60,
    (1 << 63) - 1,
    u64::MAX - 7,
    u64::MAX,
];

/// The structured fuzz mode: `data` picks templates and patches them
/// (overwrite a u64/u32/byte, truncate, insert, mark async), up to eight
/// frames per run so that sequences (create, use, release, use again) occur.
pub fn mutated_frames(data: &[u8]) -> Vec<Vec<u8>> {
    let tpl = templates();
    let mut frames = Vec::new();
    let mut it = data.iter().copied();
    while frames.len() < 8 {
        let Some(pick) = it.next() else { break };
        let mut f = tpl[pick as usize % tpl.len()].clone();
        let n = it.next().unwrap_or(0) % 5;
        for _ in 0..n {
            let (Some(a), Some(b), Some(what), Some(val)) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                break;
            };
            let pos = usize::from(u16::from_le_bytes([a, b])) % (f.len() + 1);
            let v = INTERESTING[val as usize % INTERESTING.len()];
            match what % 6 {
                0 => patch(&mut f, pos, &v.to_le_bytes()),
                1 => patch(&mut f, pos, &(v as u32).to_le_bytes()),
                2 => patch(&mut f, pos, &[val]),
                3 => f.truncate(pos),
                4 => {
                    let tail = f.split_off(pos);
                    f.extend_from_slice(&v.to_le_bytes());
                    f.extend_from_slice(&tail);
                }
                _ => patch(&mut f, 4, &wormhole_wire::FLAG_ASYNC.to_le_bytes()),
            }
        }
        frames.push(f);
    }
    frames
}

fn patch(f: &mut [u8], pos: usize, v: &[u8]) {
    let end = (pos + v.len()).min(f.len());
    if pos < end {
        f[pos..end].copy_from_slice(&v[..end - pos]);
    }
}

/// Splits raw fuzz input into frames: each is a u16 length then its bytes;
/// a short last piece is a frame of whatever is left.
pub fn raw_frames(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() && out.len() < 8 {
        if rest.len() < 2 {
            out.push(rest);
            break;
        }
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let body = &rest[2..];
        let n = n.min(body.len());
        out.push(&body[..n]);
        rest = &body[n..];
    }
    out
}

/// One fuzz input: an even first byte means raw frames, odd means mutated
/// templates.
pub fn fuzz_one(h: &mut Harness, data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        h.run(raw_frames(rest));
    } else {
        let frames = mutated_frames(rest);
        h.run(frames.iter().map(|f| f.as_slice()));
    }
}

/// A harness on the machine's OpenCL, or None (and a note) on a machine
/// without one. Tests take turns: run side by side, the first OpenCL
/// calls of several threads raced (clGetDeviceIDs failed with
/// CL_DEVICE_NOT_FOUND) and most of these tests skipped themselves.
/// Any other failure to start fails the test.
#[cfg(test)]
pub(crate) fn test_harness() -> Option<(std::sync::MutexGuard<'static, ()>, Harness)> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    match Harness::new() {
        Ok(h) => Some((turn, h)),
        Err(HarnessError::NoPlatform) => {
            eprintln!("no OpenCL platform: skipped");
            None
        }
        Err(e) => panic!("the harness did not start: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_opencl_api::{CL_INVALID_MEM_OBJECT, CL_SUCCESS};

    const UNMAP: usize = 16;
    const SAMPLER_AS_BUFFER: usize = 37;

    /// Every template is a valid request on the real platform (else the
    /// structured mode would mutate garbage), and a run cleans up after
    /// itself: the same templates succeed again on the next run.
    #[test]
    fn templates_are_valid_requests() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        for round in 0..2 {
            let tpl = templates();
            for (i, f) in tpl.iter().enumerate() {
                // The unmap and the fetch need their map before them.
                let frames: Vec<&[u8]> = match i {
                    UNMAP => vec![&tpl[UNMAP - 1], f],
                    _ if i == tpl.len() - 1 => vec![&tpl[i - 1], f],
                    _ => vec![f],
                };
                let s = h.run(frames.iter().copied());
                // A sampler for a buffer argument: valid bytes, refused.
                let want = match i {
                    SAMPLER_AS_BUFFER => CL_INVALID_MEM_OBJECT,
                    _ => CL_SUCCESS,
                };
                assert_eq!(s.last(), Some(&Some(want)), "template {i} (round {round})");
                assert!(s.iter().all(|x| x.is_some()), "template {i}: {s:?}");
            }
        }
    }

    /// Found by the fuzzer: PoCL maps an empty box (a zero height) of an image,
    /// and the mapping (with its reference on the image) outlived the
    /// request that failed. The box is refused before the library sees it.
    #[test]
    fn a_map_of_an_empty_box_is_refused_and_leaves_no_reference() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        let before = h.seed_refcounts();
        let map = Frame::new(func::clEnqueueMapImage)
            .h(ids::QUEUE)
            .h(ids::IMAGE)
            .u64(1)
            .bytes(&triple(0, 0, 0))
            .bytes(&triple(4, 0, 1))
            .u32(0)
            .b(false)
            .b(false)
            .u64(9)
            .u8(0)
            .done();
        let s = h.run([map.as_slice()]);
        assert_eq!(s.last(), Some(&Some(wormhole_opencl_api::CL_INVALID_VALUE)));
        assert_eq!(h.seed_refcounts(), before);
    }

    /// Found by the fuzzer: PoCL writes CL_CONTEXT_PROPERTIES' size through
    /// a NULL size_ret when the context was made without properties (a
    /// SEGV in the tenant). The library always gets a size_ret to write.
    #[test]
    fn context_properties_without_a_size_ret_do_not_crash() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        let create = Frame::new(func::clCreateContext)
            .b(false)
            .u32(1)
            .ids(&[ids::DEVICE])
            .b(false)
            .b(false)
            .u64(100)
            .done();
        let query = Frame::new(func::clGetContextInfo)
            .h(100)
            .u32(0x1082)
            .u64(0)
            .b(false)
            .b(false)
            .done();
        let s = h.run([create.as_slice(), query.as_slice()]);
        assert_eq!(s, vec![Some(0), Some(0)]);
    }

    /// PoCL leaves clSetCommandQueueProperty out of its dispatch table, so
    /// the loader jumps to NULL: the fuzzer crashed a tenant with it. It is
    /// refused, not forwarded.
    #[test]
    fn a_queue_property_change_is_refused_not_forwarded() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        let set = Frame::new(func::clSetCommandQueueProperty)
            .h(ids::QUEUE)
            .u64(1)
            .u32(1)
            .b(false)
            .done();
        let s = h.run([set.as_slice()]);
        assert!(matches!(s.last(), Some(&Some(code)) if code != 0), "{s:?}");
    }
}

/// Replays a trace written by the fuzz target (`WORMHOLE_FUZZ_TRACE`): one
/// hex-encoded input per line, run in order on one harness, printing each
/// run's statuses. Used to reduce a crash that depends on earlier runs.
/// Replays a trace; returns the first run after which the seeds' reference
/// counts differ from before it (given two seconds to settle), if any.
pub fn replay(h: &mut Harness, trace: &str, verbose: bool) -> Option<usize> {
    for (n, line) in trace.lines().enumerate() {
        let bytes: Vec<u8> = (0..line.len() / 2)
            .filter_map(|i| u8::from_str_radix(&line[2 * i..2 * i + 2], 16).ok())
            .collect();
        if verbose {
            eprintln!("run {n}: {line}");
        }
        let before = h.seed_refcounts();
        fuzz_one(h, &bytes);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while h.seed_refcounts() != before {
            if std::time::Instant::now() > deadline {
                eprintln!(
                    "run {n} changed the seeds' counts: {before:?} -> {:?}",
                    h.seed_refcounts()
                );
                return Some(n);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    None
}

#[cfg(test)]
mod replay_tests {
    /// `WORMHOLE_REPLAY=FILE cargo test -p wormhole-server --lib replay -- --ignored`
    #[test]
    #[ignore]
    fn replay_trace() {
        let Some(path) = std::env::var_os("WORMHOLE_REPLAY") else {
            return;
        };
        let trace = std::fs::read_to_string(path).unwrap_or_default();
        let mut h = super::Harness::new().expect("harness");
        assert_eq!(super::replay(&mut h, &trace, true), None);
    }
}
