//! What the listener hands a tenant it starts, for residency: one end of a
//! socket pair to the device's ledger (on [`ARBITER_FD`]), and, with
//! `store_dir`, a store file opened there unlinked (`O_TMPFILE`, on
//! [`STORE_FD`]), so that the tenant itself opens no path. The listener
//! keeps only its end of the socket pair: the store file lives and dies
//! with the tenant.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use super::{arbiter, ResidencyError, ARBITER_FD, STORE_FD};

/// Descriptors for one tenant, made before it is started.
pub struct TenantLink {
    ours: OwnedFd,
    theirs: OwnedFd,
    store: Option<OwnedFd>,
}

/// `fd` moved above the numbers a tenant finds its descriptors on, so that
/// placing one there in the child never overwrites another.
fn above(fd: OwnedFd) -> Result<OwnedFd, ResidencyError> {
    if fd.as_raw_fd() > STORE_FD {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one
    // (or -1), which nothing else owns.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, STORE_FD + 1) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: `n` is the descriptor F_DUPFD_CLOEXEC just returned (checked >=
    // 0), which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

impl TenantLink {
    /// The descriptors for the next tenant; `None` when the listener keeps
    /// no ledger.
    pub fn new() -> Result<Option<TenantLink>, ResidencyError> {
        let Some(a) = arbiter::get() else {
            return Ok(None);
        };
        let (ours, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::SeqPacket,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )?;
        let store = match &a.store_dir {
            Some(dir) => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_TMPFILE)
                    .mode(0o600)
                    .open(dir)?;
                Some(above(f.into())?)
            }
            None => None,
        };
        Ok(Some(TenantLink {
            ours,
            theirs: above(theirs)?,
            store,
        }))
    }

    /// (from, to) for the child to place before exec; -1 where none.
    pub fn child_fds(&self) -> [(RawFd, RawFd); 2] {
        [
            (self.theirs.as_raw_fd(), ARBITER_FD),
            (self.store.as_ref().map_or(-1, |s| s.as_raw_fd()), STORE_FD),
        ]
    }

    /// The tenant runs as `pid`: the ledger takes our end; the tenant's
    /// copies close here.
    pub fn started(self, pid: u32) {
        if let Some(a) = arbiter::get() {
            a.join(pid, self.ours);
        }
    }
}
