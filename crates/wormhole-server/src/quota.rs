//! A tenant's memory quota: how many bytes of memory objects (OpenCL
//! buffers and images, CUDA allocations) it may hold at once. One per
//! tenant process, shared by its OpenCL and CUDA state; an OpenCL object is
//! charged until the library destroys it (its destructor callback), not
//! until the client lets go, because commands still queued keep it alive.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug)]
pub struct Quota {
    limit: u64,
    used: AtomicU64,
    warned: AtomicBool,
}

impl Quota {
    pub fn new(limit: u64) -> Self {
        Quota {
            limit,
            used: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether `bytes` more would fit now: a check before allocating (the
    /// charge itself is [`Quota::charge`]). A refusal is logged, as there.
    pub fn fits(&self, bytes: u64) -> bool {
        let ok = self
            .used()
            .checked_add(bytes)
            .is_some_and(|u| u <= self.limit);
        self.log_refusal(ok, bytes)
    }

    /// Counts `bytes` against the quota, or refuses them when they would
    /// take it past its limit.
    pub fn charge(&self, bytes: u64) -> bool {
        let ok = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(bytes).filter(|&n| n <= self.limit)
            })
            .is_ok();
        self.log_refusal(ok, bytes)
    }

    /// Says in the log, once per tenant, that the quota refused memory: the
    /// application sees only an allocation failure.
    fn log_refusal(&self, ok: bool, bytes: u64) -> bool {
        if !ok && !self.warned.swap(true, Ordering::Relaxed) {
            log::warn!(
                "tenant {}: memory quota refused {bytes} bytes ({} of {} in use); \
                 further refusals are not logged",
                std::process::id(),
                self.used(),
                self.limit
            );
        }
        ok
    }

    /// Gives back what a [`Quota::charge`] took.
    pub fn release(&self, bytes: u64) {
        // Never below zero, whatever a caller gets wrong.
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// What a device of `real` bytes should be said to have: no more than
    /// the quota, so that programs which size their work from the device
    /// plan within it.
    pub fn clamp(&self, real: u64) -> u64 {
        real.min(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_up_to_the_limit_and_no_further() {
        let q = Quota::new(100);
        assert!(q.fits(100));
        assert!(q.charge(60));
        assert!(!q.fits(41));
        assert!(!q.charge(41), "60 + 41 is past 100");
        assert_eq!(q.used(), 60, "a refused charge takes nothing");
        assert!(q.charge(40));
        assert!(!q.charge(1));
        q.release(60);
        assert_eq!(q.used(), 40);
        assert!(!q.charge(u64::MAX), "no overflow past the limit");
        q.release(1000);
        assert_eq!(q.used(), 0, "never below zero");
        assert_eq!(q.clamp(1 << 40), 100);
        assert_eq!(q.clamp(7), 7);
    }

    #[test]
    fn concurrent_charges_never_exceed_the_limit() {
        let q = std::sync::Arc::new(Quota::new(1000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || (0..1000).filter(|_| q.charge(3)).count())
            })
            .collect();
        let granted: usize = threads.into_iter().map(|t| t.join().expect("thread")).sum();
        assert_eq!(
            granted, 333,
            "exactly as many 3-byte charges as fit in 1000"
        );
        assert_eq!(q.used(), 999);
    }
}
