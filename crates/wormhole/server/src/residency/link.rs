//! A tenant's end of the socket pair to its device's ledger (held by the
//! listener): messages out from any thread, answers matched to the
//! question that waits for them. The tenant's residency thread is the one
//! reader; it hands answers over here.
//!
//! When the listener is gone (it died; tenants keep serving), the link is
//! dead and every question is answered [`Answer::Dead`]: the tenant goes on
//! without a ledger, as a tenant did before delay storing.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use wormhole_residency::proto::{FromTenant, MAX_MESSAGE};

/// How long a question may wait. The ledger answers every request for room
/// within its own limit (it refuses at that point), so waiting longer means
/// the listener is stuck or gone.
const ASK_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    Yes,
    No,
    /// No ledger any more (or it did not answer in time).
    Dead,
}

#[derive(Default)]
struct Waits {
    seq: u32,
    answers: FxHashMap<u32, bool>,
    dead: bool,
}

pub(super) struct Link {
    sock: OwnedFd,
    waits: Mutex<Waits>,
    answered: Condvar,
}

impl Link {
    pub(super) fn new(sock: OwnedFd) -> Link {
        Link {
            sock,
            waits: Mutex::default(),
            answered: Condvar::new(),
        }
    }

    fn waits(&self) -> MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn is_dead(&self) -> bool {
        self.waits().dead
    }

    /// Sends one message; false if the link is (now) dead.
    pub(super) fn send(&self, m: &FromTenant) -> bool {
        let b = m.encode();
        // SAFETY: `b` is a live buffer of `b.len()` bytes; the socket is ours.
        let n = unsafe {
            libc::send(
                self.sock.as_raw_fd(),
                b.as_ptr().cast(),
                b.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            self.die();
            return false;
        }
        true
    }

    /// Sends the question `make(seq)` makes and waits for its answer.
    pub(super) fn ask(&self, make: impl FnOnce(u32) -> FromTenant) -> Answer {
        let seq = {
            let mut w = self.waits();
            if w.dead {
                return Answer::Dead;
            }
            w.seq = w.seq.wrapping_add(1);
            w.seq
        };
        if !self.send(&make(seq)) {
            return Answer::Dead;
        }
        let deadline = Instant::now() + ASK_LIMIT;
        let mut w = self.waits();
        loop {
            if let Some(yes) = w.answers.remove(&seq) {
                return if yes { Answer::Yes } else { Answer::No };
            }
            if w.dead {
                return Answer::Dead;
            }
            let now = Instant::now();
            if now >= deadline {
                drop(w);
                log::warn!(
                    "tenant {}: the device's ledger did not answer in {} s; going on without it",
                    std::process::id(),
                    ASK_LIMIT.as_secs()
                );
                self.die();
                return Answer::Dead;
            }
            w = match self.answered.wait_timeout(w, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The reader: an answer to question `seq`. One nobody waits for (it
    /// gave up) is dropped: the ledger may have counted bytes for it, which
    /// only a dead link leaves behind.
    pub(super) fn deliver(&self, seq: u32, yes: bool) {
        let mut w = self.waits();
        if seq.wrapping_sub(w.seq) > u32::MAX / 2 || seq == w.seq {
            w.answers.insert(seq, yes);
            // At most a handful are ever pending (one per waiting thread).
            if w.answers.len() > 64 {
                let keep = w.seq;
                w.answers.retain(|&s, _| keep.wrapping_sub(s) < 64);
            }
        }
        drop(w);
        self.answered.notify_all();
    }

    /// The link is gone: every question now and later is answered `Dead`.
    pub(super) fn die(&self) {
        let first = !std::mem::replace(&mut self.waits().dead, true);
        if first {
            log::warn!(
                "tenant {}: lost the device's ledger (the listener is gone): serving on without it",
                std::process::id()
            );
        }
        self.answered.notify_all();
    }

    /// The reader: one datagram into `buf` (at most `MAX_MESSAGE` bytes;
    /// a longer one is cut, and refused by the decoder). `None` at the end.
    pub(super) fn recv(&self, buf: &mut [u8; MAX_MESSAGE + 1]) -> Option<usize> {
        loop {
            // SAFETY: `buf` is ours and as long as passed.
            let n =
                unsafe { libc::recv(self.sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n > 0 {
                return Some(n as usize);
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
    }
}
