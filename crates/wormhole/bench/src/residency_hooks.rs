//! What delay storing adds to each forwarded call when nothing has to move
//! (`wh-bench residency-hooks`, run by bench/delay-storing/run.sh): the
//! hooks a tenant runs around a call (`residency::Frame` and
//! `residency::ready`), timed in one process on a real tenant on the real
//! OpenCL platform, whose buffer is in a shared arena and set as a kernel's
//! argument, with residency attached to a socket pair answered by a thread
//! of its own. A kernel launch's request goes through the hooks (its
//! objects found resident: the method's check) and a scalar kernel
//! argument's (which residency only notes). The same loops with no
//! residency give the baseline. Timed alone, the hooks are not lost in the
//! noise of a machine's load as whole calls are.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, OwnedFd};

use serde::{Deserialize, Serialize};
use thiserror::Error;
use wormhole_opencl_api::{func, Kind};
use wormhole_residency::proto::{FromTenant, ToTenant, MAX_MESSAGE};
use wormhole_server::config::Config;
use wormhole_server::opencl::ffi;
use wormhole_server::opencl::tenant::{Limits, Tenant};
use wormhole_server::residency::{self, Frame, Held};
use wormhole_transport::arena::Arena;
use wormhole_wire::{Encoder, RequestHeader};

use crate::native::{check, first_device, Native, NativeError};
use crate::stats::per_call;

const CTX: u64 = 1;
const QUEUE: u64 = 2;
const BUF: u64 = 3;
const PROG: u64 = 4;
const KERNEL: u64 = 5;

#[derive(Debug, Error)]
pub enum HooksError {
    #[error(transparent)]
    Native(#[from] NativeError),
    #[error("the shared buffer arena: {0}")]
    Arena(#[from] wormhole_transport::TransportError),
    #[error("residency: {0}")]
    Residency(#[from] wormhole_server::residency::ResidencyError),
    #[error("{0}")]
    Sys(#[from] nix::Error),
    #[error("the launch's objects were not found resident: {0}")]
    NotReady(i32),
}

/// Nanoseconds per call of each hooked path (medians over batches), with
/// residency and without.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct HooksResult {
    pub launch_ns: f64,
    pub launch_without_ns: f64,
    pub set_arg_ns: f64,
    pub set_arg_without_ns: f64,
}

/// A request frame: the header, then what `body` writes.
fn frame(f: u32, body: impl FnOnce(&mut Encoder)) -> Vec<u8> {
    let mut e = Encoder::new();
    RequestHeader { func: f, flags: 0 }.encode(&mut e);
    body(&mut e);
    e.into_vec()
}

/// Answers as the listener's ledger does when there is room for all.
fn ledger(sock: OwnedFd) {
    let mut buf = [0u8; MAX_MESSAGE + 1];
    loop {
        // SAFETY: our socket; `buf` is ours and as long as passed.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return;
        }
        let answer = match FromTenant::decode(&buf[..n as usize]) {
            Ok(FromTenant::Need { seq, .. }) => Some(ToTenant::Grant { seq }),
            Ok(FromTenant::Active { seq }) if seq != 0 => Some(ToTenant::Switched { seq }),
            _ => None,
        };
        if let Some(a) = answer {
            let b = a.encode();
            // SAFETY: a live buffer of `b.len()` bytes; our socket.
            unsafe { libc::send(sock.as_raw_fd(), b.as_ptr().cast(), b.len(), 0) };
        }
    }
}

/// A tenant with a context, a queue, a buffer in an arena and a kernel
/// whose first argument is that buffer; with residency when `sock` is given.
fn tenant(sock: Option<OwnedFd>) -> Result<Tenant, HooksError> {
    let Native {
        platforms,
        device: _,
        context: ctx,
        queue: q,
    } = first_device()?;
    let mut t = Tenant::new(platforms, Limits::default(), None);
    t.shared = Some(wormhole_server::opencl::shared::SharedBuffers::new(
        Arena::create(64 << 20)?,
    ));
    if let Some(s) = sock {
        let config = Config {
            oversubscribe: true,
            device_memory: 1 << 30,
            ..Config::default()
        };
        residency::attach_to(&mut t, &config, s)?;
    }
    let mut err = 0;
    // SAFETY: `ctx` is the live context from first_device; flags 1
    // (read-write) with a null host pointer asks for no host memory, and
    // `err` is a live out-parameter.
    let buf = unsafe {
        wormhole_server::opencl::overrides::clCreateBuffer(
            &mut t,
            ctx,
            1,
            1 << 20,
            std::ptr::null_mut(),
            &mut err,
        )
    };
    check("clCreateBuffer", err)?;
    let src = c"__kernel void k(__global int *a, int b) { a[get_global_id(0)] += b; }";
    let srcp = src.as_ptr();
    // SAFETY: `srcp` points to one NUL-terminated string (a C literal),
    // so a null lengths array is allowed; `ctx` is live.
    let prog = unsafe { ffi::clCreateProgramWithSource(ctx, 1, &srcp, std::ptr::null(), &mut err) };
    check("clCreateProgramWithSource", err)?;
    // SAFETY: `prog` was just created (checked); no device list (count 0,
    // null), no options, no callback: the spec's defaults.
    check("clBuildProgram", unsafe {
        ffi::clBuildProgram(
            prog,
            0,
            std::ptr::null(),
            std::ptr::null(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    })?;
    // SAFETY: `prog` built above (checked); the name is a NUL-terminated
    // C literal; `err` is a live out-parameter.
    let k = unsafe { ffi::clCreateKernel(prog, c"k".as_ptr(), &mut err) };
    check("clCreateKernel", err)?;
    for (id, kind, raw) in [
        (CTX, Kind::Context, ctx),
        (QUEUE, Kind::Queue, q),
        (BUF, Kind::Mem, buf),
        (PROG, Kind::Program, prog),
        (KERNEL, Kind::Kernel, k),
    ] {
        t.insert(id, kind, raw).map_err(|code| NativeError::Cl {
            what: "insert",
            code,
        })?;
    }
    // The buffer as the kernel's argument, set as a request would be, so
    // that residency records it.
    let set = frame(func::clSetKernelArg, |e| {
        e.u64(KERNEL);
        e.u32(0);
        e.usize(8);
        e.u8(2);
        e.u8(0);
        e.u64(BUF);
    });
    let r = Frame::of(&t, None);
    let f = Frame::begin(r.as_ref());
    // SAFETY: the kernel's argument 0 is a __global pointer: a buffer.
    check("clSetKernelArg", unsafe {
        ffi::clSetKernelArg(
            k,
            0,
            std::mem::size_of::<*mut c_void>(),
            (&buf as *const *mut c_void).cast(),
        )
    })?;
    f.after(&t, &set, 0);
    drop(f);
    // The scalar argument once through the server's own clSetKernelArg,
    // which learns its declaration, as a tenant's first such call does.
    let b = 7i32;
    // SAFETY: `k` is the tenant's live kernel (inserted above); the value
    // points to `b`, the 4 bytes of the int argument 1 declares.
    check("clSetKernelArg", unsafe {
        wormhole_server::opencl::overrides::clSetKernelArg(
            &mut t,
            k,
            1,
            4,
            (&b as *const i32).cast(),
        )
    })?;
    Ok(t)
}

/// The hooks around one request, as the serve loop runs them (the call
/// itself left out).
fn hooked(t: &mut Tenant, r: Option<&Held>, f: u32, req: &[u8]) -> Result<(), HooksError> {
    let frame = Frame::begin(r);
    residency::ready(t, f, req).map_err(HooksError::NotReady)?;
    frame.after(t, req, 0);
    Ok(())
}

pub fn run(batches: usize, batch: usize) -> Result<HooksResult, HooksError> {
    let launch = frame(func::clEnqueueNDRangeKernel, |e| {
        e.u64(QUEUE);
        e.u64(KERNEL);
    });
    let set = frame(func::clSetKernelArg, |e| {
        e.u64(KERNEL);
        e.u32(1);
        e.usize(4);
        e.u8(1);
        e.bytes(&7i32.to_le_bytes());
    });
    let (ours, theirs) = nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    )?;
    std::thread::spawn(move || ledger(theirs));
    let mut with = tenant(Some(ours))?;
    let mut without = tenant(None)?;
    let (rw, rn) = (Frame::of(&with, None), Frame::of(&without, None));
    let mut r = HooksResult::default();
    for _ in 0..3 {
        // Alternated, the best of three: the machine may be busy.
        let l = per_call(batches, batch, || {
            hooked(
                &mut with,
                rw.as_ref(),
                func::clEnqueueNDRangeKernel,
                &launch,
            )
        })?;
        let lw = per_call(batches, batch, || {
            hooked(
                &mut without,
                rn.as_ref(),
                func::clEnqueueNDRangeKernel,
                &launch,
            )
        })?;
        let s = per_call(batches, batch, || {
            hooked(&mut with, rw.as_ref(), func::clSetKernelArg, &set)
        })?;
        let sw = per_call(batches, batch, || {
            hooked(&mut without, rn.as_ref(), func::clSetKernelArg, &set)
        })?;
        let best = |old: f64, new: f64| if old == 0.0 { new } else { old.min(new) };
        r.launch_ns = best(r.launch_ns, l);
        r.launch_without_ns = best(r.launch_without_ns, lw);
        r.set_arg_ns = best(r.set_arg_ns, s);
        r.set_arg_without_ns = best(r.set_arg_without_ns, sw);
    }
    Ok(r)
}
