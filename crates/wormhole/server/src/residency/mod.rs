//! Delay storing in the server: a device's memory shared by more tenants
//! than it holds (docs/delay-storing.md).
//!
//! The decisions are `wormhole_residency`'s (no I/O); this module does the
//! moving and the talking:
//!
//! * in each tenant ([`Residency`], `local.rs`): before a command runs, the
//!   memory objects it uses are made resident (`uses.rs` reads them from
//!   the request; a kernel's from the arguments set on it); a thread of its
//!   own answers the listener's requests to evict, once the serving thread
//!   is between calls and the tenant's queues have nothing in flight
//!   (`queues.rs`); evicted objects go to a host store (`store.rs`);
//! * in the listener ([`arbiter`]): one ledger per device, which every
//!   tenant asks before it makes an object resident, over a socket pair it
//!   inherits at start (`spawn.rs`; fd [`ARBITER_FD`]);
//!
//! On a CPU device an object the server can evict is a buffer whose
//! storage is a piece of the tenant's arena (`opencl::shared`): its handle,
//! and so every kernel argument and sub-buffer naming it, stays as it is,
//! and only its pages go (saved to the store first if dirty) and come back.
//! Other memory objects (images not made from a buffer, buffers over a
//! host pointer) are counted in the ledger and stay resident.

pub mod arbiter;
mod cuda;
mod engine;
mod link;
mod local;
mod queues;
mod serve_lock;
pub mod spawn;
mod store;
mod uses;

use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

use thiserror::Error;

pub use cuda::{effect as cuda_effect, CudaResidency, Effect as CudaEffect};
pub use local::Residency;

use crate::config::{Config, ResidencyApi, TenantMemory};
use crate::opencl::tenant::Tenant;

/// Where a tenant finds its end of the socket pair to its device's ledger.
pub const ARBITER_FD: RawFd = 4;
/// Where a tenant finds its store file, when the listener opened one in
/// `store_dir` (5 is the configuration file's, `listen::CONFIG_FD`).
pub const STORE_FD: RawFd = 6;

#[derive(Debug, Error)]
pub enum ResidencyError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Sys(#[from] nix::Error),
    #[error("the host store is full ({0} bytes)")]
    StoreFull(u64),
    #[error("object {0:#x} has no place in the arena")]
    NotPlaced(u64),
    #[error("object {0:#x} has nothing to restore from")]
    NoBacking(u64),
    #[error("the arena: {0}")]
    Arena(#[from] wormhole_transport::TransportError),
}

/// Makes the descriptors the listener passed for residency this process's
/// own (closed across exec, so that the library's children, PoCL's
/// linker, never hold them).
pub fn claim_fds(config: &Config) {
    if !config.ledger() {
        return;
    }
    for fd in [ARBITER_FD, STORE_FD] {
        // SAFETY: fcntl on a descriptor number; one not open fails (EBADF)
        // and changes nothing.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// A tenant's `tenant_memory` in bytes, 0 for none; "device" (the
/// device's own size) is none here, since the ledger's budget is never more.
pub(crate) fn quota_bytes(config: &Config) -> u64 {
    match config.tenant_memory {
        TenantMemory::Bytes(n) => n,
        TenantMemory::Device => 0,
    }
}

/// The most one tenant may hold resident: its `tenant_memory`, and never
/// more than the device lends all tenants (what its store must hold at
/// most, and what the ledger lets it hold).
fn tenant_cap(config: &Config) -> u64 {
    let budget = match config.device_memory {
        0 => local::device_memory(&config.platforms),
        b => b,
    };
    match (quota_bytes(config), budget) {
        (0, b) | (b, 0) => b,
        (q, b) => q.min(b),
    }
}

/// The link the listener passed on fd 4.
fn inherited_link() -> Result<OwnedFd, ResidencyError> {
    store::inherited(ARBITER_FD).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no link to the device's ledger on fd 4 (not started by a listener with one)",
        )
        .into()
    })
}

/// Checks that `sock` is a ledger's link (a sequenced-packet socket).
fn check_link(sock: &OwnedFd) -> Result<(), ResidencyError> {
    let ty = nix::sys::socket::getsockopt(sock, nix::sys::socket::sockopt::SockType)?;
    if ty != nix::sys::socket::SockType::SeqPacket {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "fd 4 is not the ledger's socket",
        )
        .into());
    }
    Ok(())
}

/// The most one CUDA tenant may hold resident, for its store's size: as
/// [`tenant_cap`], but without asking OpenCL's device, and without
/// starting CUDA before the client does (the store is sparse: a large
/// size costs nothing until used).
fn cuda_cap(config: &Config) -> u64 {
    match (quota_bytes(config), config.device_memory) {
        (0, 0) => 1 << 40,
        (0, b) | (b, 0) => b,
        (q, b) => q.min(b),
    }
}

/// Starts residency in a tenant whose OpenCL state is `t` (its arena, if
/// any, already in place) and whose CUDA state is `cu`, for the API the
/// configuration names (`residency_api`): a ledger must be configured and
/// the listener must have passed the link. A tenant that cannot start it
/// serves on without it, and says so.
pub fn attach(t: &mut Tenant, cu: Option<&mut crate::cuda::CudaTenant>, config: &Config) {
    if !config.ledger() {
        return;
    }
    let started = match (config.residency_api, cu) {
        (ResidencyApi::Opencl, _) if config.opencl => {
            inherited_link().and_then(|sock| attach_to(t, config, sock))
        }
        (ResidencyApi::Cuda, Some(cu)) => inherited_link()
            .and_then(|sock| CudaResidency::start(config, sock, cuda_cap(config)))
            .map(|r| cu.residency = Some(r)),
        _ => return,
    };
    if let Err(e) = started {
        log::warn!(
            "tenant {}: no residency ({e}): this tenant is not counted against the device",
            std::process::id()
        );
    }
}

/// Starts residency in `t` on the link `sock` (whose other end answers as
/// the listener's ledger does): what [`attach`] does with fd 4, for
/// benchmarks and tests that run a tenant in their own process.
pub fn attach_to(t: &mut Tenant, config: &Config, sock: OwnedFd) -> Result<(), ResidencyError> {
    let (r, arena) = Residency::start(config, sock, t.shared.clone(), tenant_cap(config))?;
    t.shared = Some(arena);
    t.residency = Some(r);
    Ok(())
}

/// A tenant's residency, of whichever API the ledger counts.
pub enum Held {
    Opencl(Arc<Residency>),
    Cuda(Arc<CudaResidency>),
}

/// A frame's hold on residency: while it lives, this tenant's objects are
/// not evicted (the serving thread is in a call, or about to reply to it).
/// It borrows the tenant's residency, which the serve loop takes out of the
/// tenant once ([`Frame::of`]), so that a call costs no reference count.
pub struct Frame<'a>(Option<&'a Held>);

impl<'a> Frame<'a> {
    /// The tenant's residency, for the serve loop to hold.
    pub fn of(t: &Tenant, cu: Option<&crate::cuda::CudaTenant>) -> Option<Held> {
        match (&t.residency, cu.and_then(|c| c.residency.as_ref())) {
            (Some(r), _) => Some(Held::Opencl(r.clone())),
            (None, Some(r)) => Some(Held::Cuda(r.clone())),
            (None, None) => None,
        }
    }

    #[inline]
    pub fn begin(r: Option<&'a Held>) -> Frame<'a> {
        match r {
            Some(Held::Opencl(r)) => r.enter(),
            Some(Held::Cuda(r)) => r.enter(),
            None => {}
        }
        Frame(r)
    }

    /// After the call ran (and any bulk transfer into it): what it changed
    /// that residency tracks (kernel arguments, mappings).
    #[inline]
    pub fn after(&self, t: &Tenant, req: &[u8], status: i32) {
        if let Some(Held::Opencl(r)) = &self.0 {
            r.after(t, req, status);
        }
    }
}

impl Drop for Frame<'_> {
    fn drop(&mut self) {
        match &self.0 {
            Some(Held::Opencl(r)) => r.leave(),
            Some(Held::Cuda(r)) => r.leave(),
            None => {}
        }
    }
}

/// Before a call runs: makes the memory objects a command uses resident.
/// Fails the call (`CL_MEM_OBJECT_ALLOCATION_FAILURE`) when the device
/// could not make room for what must come back; data the client streams
/// after such a request is then drained, as for a request that fails its
/// own checks, so that the stream stays in step.
#[inline]
pub fn ready(t: &mut Tenant, func: u32, req: &[u8]) -> Result<(), i32> {
    let Some(r) = &t.residency else {
        return Ok(());
    };
    let e = match r.prepare(t, func, req) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if let Some(n) = uses::incoming(func, req) {
        t.bulk = Some(crate::opencl::overrides::Bulk::Drain(n));
    }
    Err(e)
}

/// This tenant's residency, for its `SIGUSR1` report.
pub fn report_line() -> Option<String> {
    local::current()
        .map(|r| r.summary())
        .or_else(|| cuda::current().map(|r| r.summary()))
}
