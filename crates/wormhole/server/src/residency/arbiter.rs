//! The listener's side: one ledger per device (`wormhole_residency`'s, no
//! I/O) behind one thread, which polls every tenant's socket and the
//! ledger's next deadline. What a tenant sends is decoded by the bounded
//! decoder and anything else is dropped; a tenant whose socket ends (its
//! process died) gives its share back at once. The thread only ever sends
//! without blocking: a tenant that stops reading loses its own answers.
//!
//! The listener never loads OpenCL, so the device's size (the default
//! budget) is what the first tenant's library reported, in its first
//! message, sent before it ran anything of its client's.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use wormhole_residency::ledger::{Ledger, LedgerConfig, Outbox, TenantId};
use wormhole_residency::proto::{FromTenant, MAX_MESSAGE};

use super::ResidencyError;
use crate::config::Config;

static ARBITER: OnceLock<Arc<Arbiter>> = OnceLock::new();

/// The listener's arbiter, if a ledger is configured.
pub fn get() -> Option<&'static Arc<Arbiter>> {
    ARBITER.get()
}

/// Starts the arbiter when the configuration asks for a ledger (the
/// listener calls this once, before it accepts anyone).
pub fn install(config: &Config) -> Result<(), ResidencyError> {
    if !config.ledger() {
        return Ok(());
    }
    let a = Arbiter::start(config)?;
    let _ = ARBITER.set(a);
    Ok(())
}

/// The listener's ledger, its tenants' sockets, and what the spawner needs.
pub struct Arbiter {
    ledger: Mutex<Ledger>,
    /// Tenants started, not yet polled.
    joining: Mutex<Vec<(TenantId, OwnedFd)>>,
    /// Wakes the polling thread (an eventfd).
    wake: OwnedFd,
    started: Instant,
    pub(super) store_dir: Option<std::path::PathBuf>,
}

impl Arbiter {
    fn start(config: &Config) -> Result<Arc<Arbiter>, ResidencyError> {
        let policy = super::engine::policy(config);
        let ledger = Ledger::new(LedgerConfig {
            budget: config.device_memory,
            oversubscribe: config.oversubscribe,
            policy,
            tenant_cap: super::quota_bytes(config),
            ..LedgerConfig::default()
        });
        // SAFETY: eventfd takes no pointers; a new descriptor or -1.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: just returned to us, owned by nothing else.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let a = Arc::new(Arbiter {
            ledger: Mutex::new(ledger),
            joining: Mutex::default(),
            wake,
            started: Instant::now(),
            store_dir: config.store_dir.clone(),
        });
        let run = a.clone();
        std::thread::Builder::new()
            .name("wh-arbiter".into())
            .spawn(move || run.run())?;
        Ok(a)
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// A tenant process started with the other end of `sock`.
    pub(super) fn join(&self, pid: TenantId, sock: OwnedFd) {
        self.joining
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((pid, sock));
        let one = 1u64.to_ne_bytes();
        // SAFETY: an eventfd we own; 8 bytes from a live array.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    fn run(self: Arc<Self>) {
        let mut socks: Vec<(TenantId, OwnedFd)> = Vec::new();
        let mut out = Outbox::new();
        let mut buf = [0u8; MAX_MESSAGE + 1];
        loop {
            let timeout = self.ledger().next_deadline().map_or(-1, |d| {
                let left = d.saturating_sub(self.now());
                // Rounded up, so that a deadline is never polled for early
                // in a loop.
                i32::try_from(left.div_ceil(1_000_000)).unwrap_or(i32::MAX)
            });
            let mut fds: Vec<libc::pollfd> = std::iter::once(self.wake.as_raw_fd())
                .chain(socks.iter().map(|(_, s)| s.as_raw_fd()))
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: `fds` is a live array of as many pollfds as passed.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                log::error!("residency: poll: {}", std::io::Error::last_os_error());
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let now = self.now();
            if fds[0].revents != 0 {
                let mut b = [0u8; 8];
                // SAFETY: reads 8 bytes into a live array (the counter).
                unsafe { libc::read(self.wake.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
                let new =
                    std::mem::take(&mut *self.joining.lock().unwrap_or_else(|p| p.into_inner()));
                let mut l = self.ledger();
                for (pid, s) in new {
                    l.join(pid);
                    socks.push((pid, s));
                }
            }
            let mut gone = Vec::new();
            for (i, pfd) in fds.iter().enumerate().skip(1) {
                if pfd.revents == 0 {
                    continue;
                }
                let (pid, sock) = &socks[i - 1];
                if !self.read_from(*pid, sock, &mut buf, now, &mut out) {
                    gone.push(*pid);
                }
            }
            {
                let mut l = self.ledger();
                for pid in &gone {
                    l.leave(*pid, now, &mut out);
                    log::debug!("residency: tenant {pid} left the ledger");
                }
                l.tick(now, &mut out);
            }
            socks.retain(|(p, _)| !gone.contains(p));
            for (pid, m) in out.drain(..) {
                if let Some((_, s)) = socks.iter().find(|(p, _)| *p == pid) {
                    let b = m.encode();
                    // SAFETY: a live buffer of `b.len()` bytes; our socket.
                    unsafe {
                        libc::send(
                            s.as_raw_fd(),
                            b.as_ptr().cast(),
                            b.len(),
                            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                        )
                    };
                }
            }
        }
    }

    /// Runs what one tenant sent (up to a bounded number of messages per
    /// round, so that one cannot keep the others waiting). False when its
    /// socket ended.
    fn read_from(
        &self,
        pid: TenantId,
        sock: &OwnedFd,
        buf: &mut [u8; MAX_MESSAGE + 1],
        now: u64,
        out: &mut Outbox,
    ) -> bool {
        for _ in 0..64 {
            // SAFETY: `buf` is ours and as long as passed. MSG_TRUNC makes
            // the result the datagram's real length.
            let n = unsafe {
                libc::recv(
                    sock.as_fd().as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            if n == 0 {
                return false;
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                );
            }
            let n = n as usize;
            if n > MAX_MESSAGE {
                log::warn!("residency: tenant {pid} sent a {n}-byte message: dropped");
                continue;
            }
            match FromTenant::decode(&buf[..n]) {
                Ok(m) => self.ledger().handle(pid, m, now, out),
                Err(e) => log::warn!("residency: tenant {pid} sent a bad message ({e}): dropped"),
            }
        }
        true
    }

    /// The listener's report: the device's ledger and each tenant's share.
    pub fn report(&self) {
        let l = self.ledger();
        let t = l.totals;
        log::warn!(
            "residency: device budget {} bytes, {} resident, last tenant {}, {} waiting; \
             grants {} refusals {} asks {} busy {} timeouts {} switches {} deaths {}; \
             bytes granted {} restored {} freed {} saved {}; tenants' counters: {}",
            l.budget(),
            l.used(),
            l.last().map_or("none".to_string(), |p| p.to_string()),
            l.waiting(),
            t.grants,
            t.refusals,
            t.asks,
            t.busy,
            t.timeouts,
            t.switches,
            t.deaths,
            t.bytes_granted,
            t.bytes_restored,
            t.bytes_freed,
            t.bytes_saved,
            l.counters()
        );
        for (pid, resident, c) in l.shares() {
            log::warn!("residency: tenant {pid}: {resident} bytes resident; {c}");
        }
    }
}
