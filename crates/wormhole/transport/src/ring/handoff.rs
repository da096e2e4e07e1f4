//! How a side waits for the other: a `*_waiting` word announces a sleeper
//! and a futex sequence word is what it sleeps on, so the other side makes
//! a wake-up system call only when someone sleeps.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Duration;

use super::layout::RingHeader;
use crate::futex;
use crate::TransportError;

/// How a side waits for the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Handoff {
    /// Sleep on a futex at once: no CPU while waiting (the default).
    #[default]
    Futex,
    /// Spin for up to this many polls of the ring, then sleep on the futex.
    /// Each consumer adapts its own budget below this: halved after a wait
    /// that outlasted it, doubled after one that ended while spinning.
    Spin { polls: u32 },
    /// Futex, and the server's thread follows the caller onto its CPU, so
    /// that the handler runs where the waiting caller sleeps (warm caches,
    /// no cross-core wake-up).
    SameCore,
}

/// Checks, while a side waits, whether the peer is still there.
pub type Liveness = Box<dyn Fn() -> bool + Send + Sync>;

/// How long a waiter sleeps before it checks the peer's liveness.
const LIVENESS_PERIOD: Duration = Duration::from_millis(200);

pub(super) fn sleep_on(
    seq: &AtomicU32,
    waiting: &AtomicU32,
    ready: impl Fn() -> bool,
    alive: Option<&Liveness>,
) -> Result<(), TransportError> {
    loop {
        let s = seq.load(Ordering::Acquire);
        waiting.store(1, Ordering::SeqCst);
        if ready() {
            waiting.store(0, Ordering::Relaxed);
            return Ok(());
        }
        let r = futex::wait(seq, s, alive.map(|_| LIVENESS_PERIOD));
        waiting.store(0, Ordering::Relaxed);
        if ready() {
            return Ok(());
        }
        if r == futex::Wait::TimedOut {
            if let Some(alive) = alive {
                if !alive() {
                    return Err(TransportError::PeerGone);
                }
            }
        }
    }
}

/// Wakes a ring's consumer if it sleeps, after what was published.
pub(super) fn wake_consumer(h: &RingHeader) {
    fence(Ordering::SeqCst);
    if h.consumer_waiting.load(Ordering::SeqCst) != 0 {
        h.data_seq.fetch_add(1, Ordering::SeqCst);
        futex::wake(&h.data_seq, 1);
    }
}
