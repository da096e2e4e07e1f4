//! A tenant process: it owns the tenant's objects and serves its channel.
//! Idle, its only thread that matters sleeps on a futex in the request ring
//! (or in `read` on a TCP socket); a watcher thread sleeps in `read` on the
//! control socket and ends the process when the client goes away, which
//! frees every object the tenant had.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use thiserror::Error;
use wormhole_cuda_api::Library;
use wormhole_opencl_api::{is_async, CL_INVALID_VALUE};
use wormhole_transport::arena::Arena;
use wormhole_transport::hello::{send_hello, Hello, PROTOCOL_VERSION};
use wormhole_transport::shm::{NotifySender, Region, ShmChannel, Side};
use wormhole_transport::stream::StreamChannel;
use wormhole_transport::Notify;
use wormhole_transport::{Channel, TransportError};
use wormhole_wire::{Decoder, Encoder, ReplyHeader, RequestHeader, FLAG_ASYNC, REPLY_HEADER_LEN};

use crate::config::Config;
use crate::cuda;
use crate::opencl::{self, tenant::Limits, tenant::Tenant};
use crate::quota::Quota;

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("the client broke the protocol; tenant cut off")]
    Protocol,
}

/// Serves requests until the client goes away: OpenCL requests go to `t`,
/// CUDA ones (a disjoint id range) to `cu`, or are refused as a machine
/// without the driver refuses them when CUDA is not exported (`cu` None).
pub fn serve(
    chan: &mut dyn Channel,
    t: &mut Tenant,
    mut cu: Option<&mut cuda::CudaTenant>,
) -> Result<(), ServeError> {
    let mut req = Vec::new();
    let mut enc = Encoder::new();
    let mut deferred = Deferred::default();
    let mut owed: Option<opencl::finish::Owed> = None;
    let residency = crate::residency::Frame::of(t, cu.as_deref());
    loop {
        if let Some(o) = owed.take() {
            o.settle(chan)?;
        }
        match chan.recv(&mut req) {
            Ok(()) => {}
            Err(TransportError::PeerGone) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        crate::report::count_call();
        // Held until the reply and its bulk data are out: this tenant's
        // objects stay put meanwhile (delay storing).
        let frame = crate::residency::Frame::begin(residency.as_ref());
        let done = run_frame(t, cu.as_deref_mut(), &req, &mut enc);
        // Bulk data that follows the frame goes straight where the request
        // put it (a mapped buffer), before the reply.
        let status = if t.bulk.is_some() {
            opencl::bulk::finish_bulk_in(t, chan, done.status)?
        } else {
            done.status
        };
        frame.after(t, &req, status);
        if t.broken {
            return Err(ServeError::Protocol);
        }
        if seal_reply(&mut enc, &done, status, &mut deferred) {
            // A wait whose reply the completion of what it waits for
            // publishes (`opencl::finish`): no wake-up here, the reply is
            // not seen yet.
            if let Some(w) = t.reply_when.take() {
                match chan.send_held(enc.as_slice())? {
                    Some(held) => {
                        owed = Some(opencl::finish::Owed::hand_over(w, held));
                        chan.end_reply()?;
                        continue;
                    }
                    // Not on this channel after all: the wait is made here.
                    None => w.wait_here(&mut enc),
                }
            }
            chan.send(enc.as_slice())?;
            chan.flush()?;
            opencl::bulk::finish_bulk_out(t, chan)?;
            chan.end_reply()?;
        }
    }
}

/// What running one frame gave.
pub struct FrameDone {
    func: u32,
    flags: u32,
    pub status: i32,
}

/// Decodes one request frame and runs it, leaving the reply's outputs in
/// `enc`. No I/O: a bulk transfer the request asks for is left in
/// `t.bulk` for the caller. CUDA requests go to `cu` (None: CUDA is not
/// exported, and they are refused as without a driver).
pub fn run_frame(
    t: &mut Tenant,
    cu: Option<&mut cuda::CudaTenant>,
    req: &[u8],
    enc: &mut Encoder,
) -> FrameDone {
    let mut d = Decoder::new(req);
    let (func, flags) = match RequestHeader::decode(&mut d) {
        Ok(h) => (h.func, h.flags),
        Err(_) => (u32::MAX, 0),
    };
    *enc = Encoder::with_buffer(std::mem::take(enc).into_vec());
    ReplyHeader {
        status: 0,
        deferred_status: 0,
    }
    .encode(enc);
    let status = if func == u32::MAX {
        Err(CL_INVALID_VALUE)
    } else if cuda::is_cuda(func) {
        match cu {
            Some(cu) => cuda::dispatch(cu, func, &mut d, enc),
            None => cuda::disabled(func),
        }
    } else if let Err(s) = crate::residency::ready(t, func, req) {
        Err(s)
    } else {
        opencl::dispatch(t, func, &mut d, enc)
    };
    let status = status.unwrap_or_else(|s| {
        enc.truncate(REPLY_HEADER_LEN);
        enc.u8(0);
        s
    });
    FrameDone {
        func,
        flags,
        status,
    }
}

/// The first failure of a deferred call not reported yet, kept in the
/// statuses of the library it came from.
#[derive(Debug, Default)]
pub struct Deferred {
    /// OpenCL's or the CUDA runtime's: sent in the next reply's header.
    first: i32,
    /// cuBLAS's, cuRAND's and cuSOLVER's: the next synchronous call of the same library
    /// answers it as its own status, if it succeeded itself.
    blas: i32,
    rand: i32,
    solver: i32,
}

impl Deferred {
    /// The slot of a function's library, and whether that library answers
    /// its deferred failures in its own calls' statuses.
    fn slot(&mut self, lib: Option<Library>) -> (&mut i32, bool) {
        match lib {
            Some(Library::Blas) => (&mut self.blas, true),
            Some(Library::Rand) => (&mut self.rand, true),
            Some(Library::Solver) => (&mut self.solver, true),
            Some(Library::Runtime) | None => (&mut self.first, false),
        }
    }
}

/// Finishes the reply's header. Returns false for a deferred call, which
/// has no reply: its failure is kept in `deferred` and reported later. The
/// client decides what is deferred, but only calls the description marks
/// async may be.
pub fn seal_reply(
    enc: &mut Encoder,
    done: &FrameDone,
    status: i32,
    deferred: &mut Deferred,
) -> bool {
    let lib = Library::of(done.func);
    let may_defer = match lib {
        Some(lib) => lib.is_async(done.func),
        None => is_async(done.func),
    };
    let (slot, own_statuses) = deferred.slot(lib);
    if done.flags & FLAG_ASYNC != 0 && may_defer {
        if status != 0 && !lib.is_some_and(|l| l.no_status(done.func)) {
            log::debug!("deferred call {} failed: {status}", done.func);
            if *slot == 0 {
                *slot = status;
            }
        }
        return false;
    }
    let status = if own_statuses && status == 0 {
        std::mem::take(slot)
    } else {
        status
    };
    enc.patch_i32(0, status);
    enc.patch_i32(4, std::mem::take(&mut deferred.first));
    true
}

/// One frame without a channel (the fuzzer's and the tests' entry point):
/// a bulk transfer it asks for is abandoned (mappings undone, no data
/// moved). Returns whether there is a reply in `enc`.
pub fn handle_frame(
    t: &mut Tenant,
    req: &[u8],
    enc: &mut Encoder,
    deferred: &mut Deferred,
) -> bool {
    let done = run_frame(t, None, req, enc);
    opencl::bulk::abandon_bulk(t);
    let status = done.status;
    seal_reply(enc, &done, status, deferred)
}

/// The platforms to export, found with our own ICD (if installed) hidden;
/// none when OpenCL is not exported.
fn export(config: &Config) -> Vec<*mut std::ffi::c_void> {
    if !config.opencl {
        return Vec::new();
    }
    opencl::platforms(&config.platforms)
}

/// A tenant's OpenCL state and its CUDA state (when CUDA is exported),
/// sharing one memory quota when there is one.
fn tenant_state(
    config: &Config,
    notify: Arc<dyn Notify>,
    client: String,
) -> (Tenant, Option<cuda::CudaTenant>) {
    let platforms = export(config);
    let quota = Quota::for_tenant(config.tenant_memory, || {
        opencl::largest_device_memory(&platforms)
    });
    crate::report::tenant_reporter(client, quota.clone());
    let mut t = Tenant::new(platforms, limits(config), Some(notify));
    t.memory = quota.clone();
    let cu = config.cuda.then(|| {
        cuda::set_runtime_path(config.cuda_runtime.clone());
        let mut cu = cuda::CudaTenant::new(config.max_alloc);
        cu.memory = quota;
        cu
    });
    (t, cu)
}

fn limits(config: &Config) -> Limits {
    Limits {
        max_alloc: config.max_alloc,
        ..Limits::default()
    }
}

/// The memory a tenant shares with its client for buffers, if configured;
/// without it transfers stream through the channel, so a failure to make
/// it is worth a warning, not the tenant.
fn shared_arena(config: &Config) -> Option<Arc<Arena>> {
    if !config.opencl || config.shared_buffers == 0 {
        return None;
    }
    let len = usize::try_from(config.shared_buffers).ok()?;
    match Arena::create(len) {
        Ok(a) => Some(a),
        Err(e) => {
            log::warn!("no shared buffers ({e}): transfers go through the channel");
            None
        }
    }
}

/// Ends the tenant as soon as its client is gone (it closed, was killed,
/// or, over TCP, stayed silent past `tcp_dead_peer`), even in the middle of
/// a long call: exiting frees every object the tenant holds, and a killed
/// program's kernel must not keep the device busy. It waits for the hang-up
/// alone (`POLLRDHUP`; errors and `POLLHUP` always wake it), never for data,
/// which over TCP is the serve loop's to read.
fn exit_when_client_hangs_up(sock: &impl AsFd, tcp: bool) {
    let mut pfd = libc::pollfd {
        fd: sock.as_fd().as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd we own, for a socket `sock` keeps open.
        let n = unsafe { libc::poll(&mut pfd, 1, -1) };
        if n > 0 {
            // Only the hang-up was asked for; anything else that comes
            // back (POLLHUP, POLLERR, POLLNVAL) ends the connection too.
            break;
        }
        let e = std::io::Error::last_os_error();
        if n < 0 && e.kind() != std::io::ErrorKind::Interrupted {
            // Cannot watch: the serve loop still sees the end, later.
            log::warn!(
                "tenant {}: not watching the client: {e}",
                wormhole_confine::host_pid()
            );
            return;
        }
    }
    // The error the connection ended with, if any: a dead peer's ETIMEDOUT.
    // A reset is a client that closed with our data unread (killed, say):
    // gone, as much as one that closed cleanly.
    match nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::SocketError) {
        Ok(errno) if errno != 0 && errno != libc::ECONNRESET => log::warn!(
            "tenant {}: client lost ({})",
            wormhole_confine::host_pid(),
            std::io::Error::from_raw_os_error(errno)
        ),
        // A TCP connection that is closed (POLLHUP; a peer's FIN alone
        // gives POLLRDHUP) with no error left: the error was there, and the
        // serve loop took it, reading a request or writing a reply (reading
        // SO_ERROR clears it). That loop then says why and ends the tenant;
        // give it a moment to, and end the tenant anyway (it may be in a
        // long call).
        Ok(0) if tcp && pfd.revents & libc::POLLHUP != 0 => {
            std::thread::sleep(SERVE_LOOP_GRACE);
            log::info!("tenant {}: client gone", wormhole_confine::host_pid());
        }
        _ => log::info!("tenant {}: client gone", wormhole_confine::host_pid()),
    }
    crate::opencl::includes::remove_kept();
    std::process::exit(0);
}

/// How long the hang-up watcher leaves the serve loop to end a tenant whose
/// connection error it took.
const SERVE_LOOP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs a tenant on an accepted connection (fd 3 in the tenant process).
pub fn run_tenant(fd: OwnedFd, config: &Config) -> Result<(), ServeError> {
    let client = std::env::var(crate::listen::CLIENT_ENV)
        .unwrap_or_else(|_| crate::listen::describe_client(fd.as_raw_fd()));
    let is_unix =
        nix::sys::socket::getsockname::<nix::sys::socket::UnixAddr>(fd.as_raw_fd()).is_ok();
    if is_unix {
        let sock = UnixStream::from(fd);
        let region = Region::create(config.layout())?;
        let arena = shared_arena(config);
        let hello = Hello {
            version: PROTOCOL_VERSION,
            handoff: config.handoff(),
            layout: Some(region.layout()),
            arena: arena.as_ref().map_or(0, |a| a.len() as u64),
        };
        let mut fds = vec![region.fd().as_raw_fd()];
        fds.extend(arena.as_ref().map(|a| a.fd().as_raw_fd()));
        match send_hello(&sock, &hello, &fds) {
            Ok(()) => {}
            // The client left before we greeted it (a probe, say): done.
            Err(TransportError::Sys(nix::errno::Errno::EPIPE | nix::errno::Errno::ECONNRESET)) => {
                return Ok(())
            }
            Err(e) => return Err(e.into()),
        }
        // The client never writes on this socket after the greeting: its
        // hang-up is the client closing or dying.
        let watch = sock.try_clone()?;
        std::thread::spawn(move || exit_when_client_hangs_up(&watch, false));
        let notify = Arc::new(NotifySender::new(region.clone()));
        let (mut t, mut cu) = tenant_state(config, notify, client.clone());
        t.shared = arena.map(opencl::shared::SharedBuffers::new);
        t.replies_held = config.hold_replies();
        crate::residency::attach(&mut t, cu.as_mut(), config);
        let mut chan = ShmChannel::new(region, Side::Server, config.handoff(), None);
        chan.set_max_frame(config.max_alloc.saturating_add(1 << 20));
        serve(&mut chan, &mut t, cu.as_mut())
    } else {
        // SAFETY: fd 3 is the accepted TCP socket, owned by this process.
        let mut stream = unsafe { std::net::TcpStream::from_raw_fd(fd.as_raw_fd()) };
        std::mem::forget(fd);
        let hello = Hello {
            version: PROTOCOL_VERSION,
            handoff: config.handoff(),
            layout: None,
            arena: 0,
        };
        stream.write_all(&hello.to_bytes())?;
        wormhole_transport::stream::give_up_on_silent_peer(
            &stream,
            std::time::Duration::from_secs(config.tcp_dead_peer),
        )?;
        let watch = stream.try_clone()?;
        std::thread::spawn(move || exit_when_client_hangs_up(&watch, true));
        let mut chan = StreamChannel::tcp(stream)?;
        chan.set_max_frame(config.max_alloc.saturating_add(1 << 20));
        let notify: Arc<dyn Notify> = Arc::new(chan.notifier());
        let (mut t, mut cu) = tenant_state(config, notify, client.clone());
        crate::residency::attach(&mut t, cu.as_mut(), config);
        match serve(&mut chan, &mut t, cu.as_mut()) {
            // The client's host or network went away (see `tcp_dead_peer`):
            // its tenant ends as if it had hung up, freeing what it held.
            Err(ServeError::Transport(TransportError::Io(e)))
                if e.kind() == std::io::ErrorKind::TimedOut =>
            {
                log::warn!("tenant {}: client lost ({e})", wormhole_confine::host_pid());
                Ok(())
            }
            // It closed with our data unread (killed, say), as the watcher
            // also reports.
            Err(ServeError::Transport(TransportError::Io(e)))
                if e.kind() == std::io::ErrorKind::ConnectionReset =>
            {
                log::info!("tenant {}: client gone", wormhole_confine::host_pid());
                Ok(())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_cuda_api::{blas, func, rand};

    /// Seals a reply to `func` (deferred if `flags` say so) that ran with
    /// `status`; the header's (status, deferred status) if it has one.
    fn seal(func: u32, flags: u32, status: i32, deferred: &mut Deferred) -> Option<(i32, i32)> {
        let mut enc = Encoder::new();
        ReplyHeader {
            status: 0,
            deferred_status: 0,
        }
        .encode(&mut enc);
        let done = FrameDone {
            func,
            flags,
            status,
        };
        seal_reply(&mut enc, &done, status, deferred).then(|| {
            let b = enc.as_slice();
            let word = |o: usize| i32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
            (word(0), word(4))
        })
    }

    /// A deferred cuBLAS failure is answered by the next synchronous cuBLAS
    /// call, in cuBLAS's statuses, and never reaches the runtime's calls; a
    /// deferred runtime failure still goes out with the next reply.
    #[test]
    fn deferred_failures_stay_in_their_librarys_statuses() {
        let mut d = Deferred::default();
        assert_eq!(
            seal(blas::func::cublasSgemm_v2, FLAG_ASYNC, 7, &mut d),
            None
        );
        // A later deferred failure does not replace the first.
        assert_eq!(
            seal(blas::func::cublasSaxpy_v2, FLAG_ASYNC, 13, &mut d),
            None
        );
        assert_eq!(seal(func::cudaMemcpy, 0, 0, &mut d), Some((0, 0)));
        // A call failing itself answers its own failure, and leaves the
        // deferred one for the next.
        assert_eq!(
            seal(blas::func::cublasSdot_v2, 0, 14, &mut d),
            Some((14, 0))
        );
        assert_eq!(seal(blas::func::cublasSnrm2_v2, 0, 0, &mut d), Some((7, 0)));
        assert_eq!(seal(blas::func::cublasSnrm2_v2, 0, 0, &mut d), Some((0, 0)));

        // cuRAND's are its own too.
        assert_eq!(
            seal(rand::func::curandGenerateUniform, FLAG_ASYNC, 105, &mut d),
            None
        );
        assert_eq!(seal(blas::func::cublasSnrm2_v2, 0, 0, &mut d), Some((0, 0)));
        assert_eq!(
            seal(rand::func::curandSetStream, 0, 0, &mut d),
            Some((105, 0))
        );

        assert_eq!(seal(func::cudaLaunchKernel, FLAG_ASYNC, 98, &mut d), None);
        assert_eq!(
            seal(blas::func::cublasSnrm2_v2, 0, 0, &mut d),
            Some((0, 98))
        );
        assert_eq!(seal(func::cudaMemcpy, 0, 0, &mut d), Some((0, 0)));
    }

    /// Kernel registrations go unanswered, and their failures (they return
    /// no status) are no later call's to report: they show at the launch.
    #[test]
    fn registrations_go_unanswered_and_leave_no_deferred_failure() {
        let mut d = Deferred::default();
        for f in [
            func::__cudaRegisterFatBinary,
            func::__cudaRegisterFunction,
            func::__cudaRegisterVar,
            func::__cudaRegisterFatBinaryEnd,
        ] {
            assert_eq!(seal(f, FLAG_ASYNC, 200, &mut d), None);
        }
        assert_eq!(seal(func::cudaMemcpy, 0, 0, &mut d), Some((0, 0)));
        // Sent waiting (the first of each kind), they answer their own.
        assert_eq!(
            seal(func::__cudaRegisterFunction, 0, 400, &mut d),
            Some((400, 0))
        );
    }

    /// What the description does not mark async is answered even when the
    /// client flags it (reductions write to host memory).
    #[test]
    fn only_async_calls_go_unanswered() {
        let mut d = Deferred::default();
        assert_eq!(
            seal(blas::func::cublasSdot_v2, FLAG_ASYNC, 0, &mut d),
            Some((0, 0))
        );
        assert_eq!(seal(func::cudaMalloc, FLAG_ASYNC, 0, &mut d), Some((0, 0)));
        assert_eq!(seal(func::cudaLaunchKernel, FLAG_ASYNC, 0, &mut d), None);
        assert_eq!(
            seal(blas::func::cublasSgemv_v2, FLAG_ASYNC, 0, &mut d),
            None
        );
    }
}
