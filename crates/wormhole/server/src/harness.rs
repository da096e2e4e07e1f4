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
//!   are slow, not wrong (a global size whose work-items overflow `size_t`
//!   goes through: the server must refuse it).
//!
//! The seeded kernels' arguments are the library's state, which outlives a
//! run's tenant; they are set to valid values again after every run
//! ([`Harness::run`]), as a tenant's kernels die with it.

use std::ffi::c_void;
use std::sync::Arc;

use wormhole_opencl_api::{func, Kind, CL_INVALID_OPERATION, CL_SUCCESS};
use wormhole_transport::arena::Arena;
use wormhole_wire::{Decoder, Encoder, RequestHeader};

use crate::opencl::{self, ffi, tenant::Limits, tenant::Tenant};

mod templates;
pub use templates::{mutated_frames, raw_frames, templates, INTERESTING};

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
    /// `ka` ([`super::KERNEL_SRC`]), every kind of argument, from the
    /// program built as the server builds (argument information on).
    pub const KERNEL_ALL: u64 = 10;
    /// A program from a binary, built without argument information (as a
    /// library that gives none would leave it).
    pub const PROGRAM_BIN: u64 = 11;
    /// `kb` ([`super::BINARY_SRC`]) from that program: its pointer
    /// arguments are found by probing.
    pub const KERNEL_BIN: u64 = 12;
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

/// Kernels that are memory-safe for any arguments the fuzzer can set
/// (the library itself follows the handles: that is what the server
/// checks): each touches one byte, and only through a non-NULL buffer.
const KERNEL_SRC: &str = "__kernel void k(__global uchar *a, uint x) {\n\
    if (a && get_global_id(0) == 0) a[0] = (uchar)x;\n}\n\
    __kernel void ka(__global uchar *a, __local uchar *l, __constant uchar *c,\n\
    sampler_t s, __read_only image2d_t im, uint x) {\n\
    if (a && get_global_id(0) == 0) a[0] = (uchar)x;\n}\n";
/// The program the harness loads from its binary: no sampler or image
/// argument, which without argument information nothing can tell from a
/// scalar (docs/wormhole-security.md, "Library gaps").
const BINARY_SRC: &str = "__kernel void kb(__global uchar *a, __local uchar *l,\n\
    __constant uchar *c, ulong x) {\n\
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
        // Header directories are checked, never written: a fuzzer's runs
        // would leave one each.
        opencl::includes::keep_nothing();
        let opencl::FirstDevice {
            platforms,
            device,
            context: ctx,
            queue,
        } = opencl::first_device().map_err(|e| match e {
            opencl::FirstDeviceError::NoPlatform => HarnessError::NoPlatform,
            opencl::FirstDeviceError::Call(what, s) => HarnessError::Call(what, s),
        })?;
        let mut err = 0;
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
        let seeded = Seeded::make(ctx, device)?;
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
            (ids::PROGRAM, Kind::Program, seeded.program),
            (ids::KERNEL, Kind::Kernel, seeded.kernel),
            (ids::IMAGE, Kind::Mem, image),
            (ids::SAMPLER, Kind::Sampler, sampler),
            (ids::EVENT, Kind::Event, event),
            (ids::BUFFER2, Kind::Mem, buffer2),
            (ids::KERNEL_ALL, Kind::Kernel, seeded.kernel_all),
            (ids::PROGRAM_BIN, Kind::Program, seeded.program_bin),
            (ids::KERNEL_BIN, Kind::Kernel, seeded.kernel_bin),
        ];
        let h = Harness {
            platforms: platforms.into_iter().take(1).collect(),
            device,
            seeds,
            queue,
            enc: Encoder::new(),
            shared,
        };
        h.reset_args()?;
        Ok(h)
    }

    fn seed(&self, id: u64) -> *mut c_void {
        self.seeds
            .iter()
            .find(|s| s.0 == id)
            .map_or(std::ptr::null_mut(), |s| s.2)
    }

    /// Gives the seeded kernels valid arguments, so that a launch of any of
    /// them succeeds unless a run sets one wrong (which the server must
    /// refuse, or refuse the launch).
    fn reset_args(&self) -> Result<(), HarnessError> {
        let (buf, smp, img) = (
            self.seed(ids::BUFFER),
            self.seed(ids::SAMPLER),
            self.seed(ids::IMAGE),
        );
        let handle = |h: &*mut c_void| (8, h as *const *mut c_void as *const c_void);
        let x = 9u64;
        let scalar = (8, &x as *const u64 as *const c_void);
        let local = (16, std::ptr::null());
        let args: [(u64, &[(usize, *const c_void)]); 3] = [
            (ids::KERNEL, &[handle(&buf), (4, scalar.1)]),
            (
                ids::KERNEL_ALL,
                &[
                    handle(&buf),
                    local,
                    handle(&buf),
                    handle(&smp),
                    handle(&img),
                    (4, scalar.1),
                ],
            ),
            (
                ids::KERNEL_BIN,
                &[handle(&buf), local, handle(&buf), scalar],
            ),
        ];
        for (kernel, values) in args {
            for (i, &(size, value)) in values.iter().enumerate() {
                // SAFETY: a seeded kernel; `value` is NULL (local memory)
                // or holds `size` bytes that live across the call.
                let s = unsafe { ffi::clSetKernelArg(self.seed(kernel), i as u32, size, value) };
                check("clSetKernelArg", s)?;
            }
        }
        Ok(())
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
        unsafe { opencl::maps::unmap_all(&mut t, self.queue) };
        t.release_all();
        // Commands still running hold references (on the queue, say) until
        // they complete.
        // SAFETY: the harness's own queue.
        unsafe { ffi::clFinish(self.queue) };
        if let Err(e) = self.reset_args() {
            panic!("the seeded kernels' arguments could not be set again: {e}");
        }
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

/// The seeded programs and kernels.
struct Seeded {
    program: *mut c_void,
    kernel: *mut c_void,
    kernel_all: *mut c_void,
    program_bin: *mut c_void,
    kernel_bin: *mut c_void,
}

/// A program built from `src` with `options` (NULL: none).
fn built(
    ctx: *mut c_void,
    src: &str,
    options: *const std::ffi::c_char,
) -> Result<*mut c_void, HarnessError> {
    let mut err = 0;
    let (p, len) = (src.as_ptr() as *const std::ffi::c_char, src.len());
    // SAFETY: one source string with its length.
    let program = unsafe { ffi::clCreateProgramWithSource(ctx, 1, &p, &len, &mut err) };
    check("clCreateProgramWithSource", err)?;
    // SAFETY: a valid program; options NULL or a C string; no callback.
    let s = unsafe {
        ffi::clBuildProgram(
            program,
            0,
            std::ptr::null(),
            options,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    check("clBuildProgram", s)?;
    Ok(program)
}

fn kernel(program: *mut c_void, name: &std::ffi::CStr) -> Result<*mut c_void, HarnessError> {
    let mut err = 0;
    // SAFETY: a built program; a NUL-terminated name.
    let k = unsafe { ffi::clCreateKernel(program, name.as_ptr(), &mut err) };
    check("clCreateKernel", err)?;
    Ok(k)
}

impl Seeded {
    fn make(ctx: *mut c_void, device: *mut c_void) -> Result<Self, HarnessError> {
        // As the server builds an application's program.
        let options = opencl::programs::with_arg_info(&Some(c"".to_owned()))
            .map_err(|e| HarnessError::Call("the build options", e))?;
        let program = built(ctx, KERNEL_SRC, options.ptr())?;
        // The binary of a program, loaded and built without argument
        // information.
        let source = built(ctx, BINARY_SRC, std::ptr::null())?;
        let mut size = 0usize;
        // SAFETY: one device's binary size into our local.
        let s = unsafe {
            ffi::clGetProgramInfo(
                source,
                0x1165,
                8,
                (&mut size as *mut usize).cast(),
                std::ptr::null_mut(),
            )
        };
        check("CL_PROGRAM_BINARY_SIZES", s)?;
        let mut binary = vec![0u8; size];
        let mut at = binary.as_mut_ptr();
        // SAFETY: one pointer to `size` bytes, the size the library gave.
        let s = unsafe {
            ffi::clGetProgramInfo(
                source,
                0x1166,
                8,
                (&mut at as *mut *mut u8).cast(),
                std::ptr::null_mut(),
            )
        };
        check("CL_PROGRAM_BINARIES", s)?;
        // SAFETY: the harness's own reference.
        unsafe { opencl::release_real(Kind::Program, source) };
        let (mut err, bin) = (0, binary.as_ptr());
        // SAFETY: one device, one binary of `size` bytes.
        let program_bin = unsafe {
            ffi::clCreateProgramWithBinary(
                ctx,
                1,
                &device,
                &size,
                &bin,
                std::ptr::null_mut(),
                &mut err,
            )
        };
        check("clCreateProgramWithBinary", err)?;
        // Empty options, not NULL: PoCL 3.1 gives argument information for
        // a program built with none at all.
        // SAFETY: a valid program; a C string; no callback.
        let s = unsafe {
            ffi::clBuildProgram(
                program_bin,
                0,
                std::ptr::null(),
                c"".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        check("clBuildProgram of the binary", s)?;
        Ok(Seeded {
            program,
            kernel: kernel(program, c"k")?,
            kernel_all: kernel(program, c"ka")?,
            program_bin,
            kernel_bin: kernel(program_bin, c"kb")?,
        })
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
            // Past u64 (size_t), the server refuses it: let it.
            total = total.checked_mul(v)?;
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

/// Frame methods that write one value as the encoder's method of the same
/// name does, returning the frame so that calls chain.
macro_rules! frame_puts {
    ($($name:ident($ty:ty) => $put:ident;)*) => {
        impl Frame {
            $(pub fn $name(mut self, v: $ty) -> Self {
                self.0.$put(v);
                self
            })*
        }
    };
}

frame_puts! {
    u8(u8) => u8;
    u32(u32) => u32;
    u64(u64) => u64;
    bytes(&[u8]) => bytes;
    opt(Option<&[u8]>) => opt_bytes;
}

impl Frame {
    pub fn new(f: u32) -> Self {
        let mut e = Encoder::new();
        RequestHeader { func: f, flags: 0 }.encode(&mut e);
        Frame(e)
    }
    /// A handle (an id) or any u64.
    pub fn h(self, id: u64) -> Self {
        self.u64(id)
    }
    pub fn b(self, v: bool) -> Self {
        self.u8(v as u8)
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

    /// What each of `templates::argument_templates` gets, in order, and
    /// the kernel launched right after it with what that launch gets. The
    /// refusals are the server's: PoCL 3.1 takes each of those values and
    /// crashes or aborts at the launch (measured natively), so without the
    /// server's checks this test dies rather than fails. A kernel from the
    /// binary had its argument probed, then refused: its launch is refused
    /// as one with that argument never set.
    const ARGUMENTS: &[(i32, Option<(u64, i32)>)] = {
        use ids::*;
        const OK: i32 = 0;
        const MEM: i32 = -38;
        const SAMPLER: i32 = -41;
        const ARG_VALUE: i32 = -50;
        const ARGS_UNSET: i32 = -52;
        const RESOURCES: i32 = -5;
        &[
            (MEM, Some((KERNEL_ALL, OK))),
            (MEM, Some((KERNEL_ALL, OK))),
            (SAMPLER, Some((KERNEL_ALL, OK))),
            (MEM, Some((KERNEL_ALL, OK))),
            (ARG_VALUE, Some((KERNEL_ALL, OK))),
            (MEM, Some((KERNEL_ALL, OK))),
            (OK, Some((KERNEL_ALL, RESOURCES))),
            (OK, None),
            (OK, None),
            (MEM, Some((KERNEL_BIN, ARGS_UNSET))),
            (MEM, Some((KERNEL_BIN, ARGS_UNSET))),
            (ARG_VALUE, Some((KERNEL_BIN, ARGS_UNSET))),
            (OK, Some((KERNEL_BIN, RESOURCES))),
            (OK, Some((KERNEL_BIN, OK))),
            (OK, None),
            (-63, None),
            (-56, None),
            (-30, None),
            (OK, None),
            (OK, None),
            (OK, None),
        ]
    };

    /// The kernel-argument and launch templates get what [`ARGUMENTS`]
    /// says, twice (the seeded kernels' arguments are set again after each
    /// run).
    #[test]
    fn argument_templates_are_refused_by_the_server() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        let tpl = templates::argument_templates();
        assert_eq!(tpl.len(), ARGUMENTS.len());
        for round in 0..2 {
            for (i, (f, &(want, after))) in tpl.iter().zip(ARGUMENTS).enumerate() {
                let follow = after.map(|(k, _)| templates::launch(k, None, &[1]));
                let frames: Vec<&[u8]> = std::iter::once(f.as_slice())
                    .chain(follow.as_deref())
                    .collect();
                let s = h.run(frames.iter().copied());
                let mut expect = vec![Some(want)];
                expect.extend(after.map(|(_, code)| Some(code)));
                assert_eq!(s, expect, "argument template {i} (round {round})");
            }
        }
    }

    /// Every template is a valid request on the real platform (else the
    /// structured mode would mutate garbage), and a run cleans up after
    /// itself: the same templates succeed again on the next run. (The
    /// kernel-argument ones at the end: see the test above.)
    #[test]
    fn templates_are_valid_requests() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        let general = templates().len() - templates::argument_templates().len();
        for round in 0..2 {
            let tpl = templates();
            for (i, f) in tpl.iter().enumerate().take(general) {
                // The unmap and the fetch need their map before them.
                let frames: Vec<&[u8]> = match i {
                    UNMAP => vec![&tpl[UNMAP - 1], f],
                    // The fetch: second to last of the general templates.
                    _ if i == general - 2 => vec![&tpl[i - 1], f],
                    _ => vec![f],
                };
                let s = h.run(frames.iter().copied());
                // A sampler for a buffer argument: refused (by the server
                // as by PoCL, so the tests above are the ones that tell).
                let want = match i {
                    SAMPLER_AS_BUFFER => CL_INVALID_MEM_OBJECT,
                    _ => CL_SUCCESS,
                };
                assert_eq!(s.last(), Some(&Some(want)), "template {i} (round {round})");
                assert!(s.iter().all(|x| x.is_some()), "template {i}: {s:?}");
            }
        }
    }

    /// A buffer or image released after it was set as a kernel argument
    /// stays alive for the launch: the tenant holds a reference while it
    /// is set (PoCL 3.1 takes none, and aborted or crashed at the launch).
    #[test]
    fn an_argument_released_after_it_was_set_stays_alive_for_the_launch() {
        let Some((_turn, mut h)) = test_harness() else {
            return;
        };
        let before = h.seed_refcounts();
        let tpl = templates();
        let buffer = Frame::new(func::clCreateBuffer)
            .h(ids::CONTEXT)
            .u64(1)
            .u64(1024)
            .u8(0)
            .u64(102)
            .done();
        let image = tpl
            .iter()
            .find(|f| f.get(..4) == Some(&func::clCreateImage2D.to_le_bytes()[..]))
            .expect("an image template")
            .clone();
        let frames = [
            buffer,
            image,
            templates::set_arg_handle(ids::KERNEL_ALL, 0, 0, 102),
            templates::set_arg_handle(ids::KERNEL_ALL, 4, 0, 108),
            Frame::new(func::clReleaseMemObject).h(102).done(),
            Frame::new(func::clReleaseMemObject).h(108).done(),
            templates::launch(ids::KERNEL_ALL, None, &[1]),
            Frame::new(func::clFinish).h(ids::QUEUE).done(),
        ];
        let s = h.run(frames.iter().map(|f| f.as_slice()));
        assert_eq!(s, vec![Some(0); frames.len()]);
        assert_eq!(h.seed_refcounts(), before);
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
