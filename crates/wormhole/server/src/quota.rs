//! A tenant's memory quota: how many bytes of memory objects (OpenCL
//! buffers and images, CUDA allocations) it may hold at once. One per
//! tenant process, shared by its OpenCL and CUDA state; an OpenCL object is
//! charged until the library destroys it (its destructor callback), not
//! until the client lets go, because commands still queued keep it alive.
//!
//! So between the client's last release and the library's destruction
//! (microseconds after a command that used it ends, on one of the
//! library's threads) the bytes are still counted; an allocation refused
//! only for want of them waits for them, boundedly ([`ROOM_WAIT`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long an allocation refused for want of memory the client already
/// released waits for the library to destroy it. Past this (a long kernel
/// still uses it) the allocation fails, as it would on a device whose
/// memory is still taken.
pub const ROOM_WAIT: Duration = Duration::from_millis(500);

#[derive(Debug)]
pub struct Quota {
    /// Grows only, and only for a quota sized by the device (`from_device`):
    /// a CUDA device, known once CUDA starts, may be larger than the
    /// largest OpenCL device that sized it.
    limit: AtomicU64,
    from_device: bool,
    used: AtomicU64,
    /// Of `used`: bytes of objects the client let go of and the library
    /// has not destroyed yet.
    freeing: AtomicU64,
    /// Signalled whenever bytes come back.
    room: (Mutex<()>, Condvar),
    warned: AtomicBool,
}

impl Quota {
    pub fn new(limit: u64) -> Self {
        Quota {
            limit: AtomicU64::new(limit),
            from_device: false,
            used: AtomicU64::new(0),
            freeing: AtomicU64::new(0),
            room: (Mutex::new(()), Condvar::new()),
            warned: AtomicBool::new(false),
        }
    }

    /// The quota a tenant gets from the `tenant_memory` setting: none for
    /// 0; for `device`, the size `device_bytes` finds (the largest device
    /// the tenant exports), or the host's memory where it finds none.
    pub fn for_tenant(
        setting: crate::config::TenantMemory,
        device_bytes: impl FnOnce() -> u64,
    ) -> Option<std::sync::Arc<Quota>> {
        use crate::config::TenantMemory;
        let (limit, from_device) = match setting {
            TenantMemory::Bytes(0) => return None,
            TenantMemory::Bytes(n) => (n, false),
            TenantMemory::Device => match device_bytes() {
                0 => (host_memory()?, true),
                n => (n, true),
            },
        };
        let mut q = Quota::new(limit);
        q.from_device = from_device;
        Some(std::sync::Arc::new(q))
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// A device of `bytes` was found (CUDA's, once it starts): a quota sized
    /// by the device grows to it; a configured size stays.
    pub fn device_found(&self, bytes: u64) {
        if self.from_device {
            self.limit.fetch_max(bytes, Ordering::Relaxed);
        }
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether `bytes` more would fit: a check before allocating (the
    /// charge itself is [`Quota::charge`]). A refusal is logged, as there.
    pub fn fits(&self, bytes: u64) -> bool {
        let ok = self.with_room(bytes, || {
            self.used()
                .checked_add(bytes)
                .is_some_and(|u| u <= self.limit())
        });
        self.log_refusal(ok, bytes)
    }

    /// Counts `bytes` against the quota, or refuses them when they would
    /// take it past its limit.
    pub fn charge(&self, bytes: u64) -> bool {
        let ok = self.with_room(bytes, || {
            self.used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                    u.checked_add(bytes).filter(|&n| n <= self.limit())
                })
                .is_ok()
        });
        self.log_refusal(ok, bytes)
    }

    /// Runs `attempt` until it succeeds; while it fails but the bytes
    /// being freed would make room for `bytes`, waits for them (at most
    /// [`ROOM_WAIT`] in all).
    fn with_room(&self, bytes: u64, attempt: impl Fn() -> bool) -> bool {
        if attempt() {
            return true;
        }
        let deadline = Instant::now() + ROOM_WAIT;
        // Checked and waited under the lock that `release` notifies under,
        // so no return of bytes falls between the two.
        let mut guard = self.room.0.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if attempt() {
                return true;
            }
            let held = self
                .used()
                .saturating_sub(self.freeing.load(Ordering::Relaxed));
            let could = held.checked_add(bytes).is_some_and(|n| n <= self.limit());
            let now = Instant::now();
            if !could || now >= deadline {
                return false;
            }
            guard = match self.room.1.wait_timeout(guard, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Says in the log, once per tenant, that the quota refused memory: the
    /// application sees only an allocation failure.
    fn log_refusal(&self, ok: bool, bytes: u64) -> bool {
        if !ok && !self.warned.swap(true, Ordering::Relaxed) {
            log::warn!(
                "tenant {}: memory quota refused {bytes} bytes ({} of {} in use); \
                 further refusals are not logged",
                wormhole_confine::host_pid(),
                self.used(),
                self.limit()
            );
        }
        ok
    }

    /// Gives back what a [`Quota::charge`] took.
    pub fn release(&self, bytes: u64) {
        sub(&self.used, bytes);
        let _guard = self.room.0.lock().unwrap_or_else(|p| p.into_inner());
        self.room.1.notify_all();
    }

    /// `bytes` the client let go of will come back when the library
    /// destroys their object ([`Quota::freed`] then, before
    /// [`Quota::release`]).
    pub fn freeing(&self, bytes: u64) {
        self.freeing.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Ends a [`Quota::freeing`].
    pub fn freed(&self, bytes: u64) {
        sub(&self.freeing, bytes);
    }

    /// What a device of `real` bytes should be said to have: no more than
    /// the quota, so that programs which size their work from the device
    /// plan within it.
    pub fn clamp(&self, real: u64) -> u64 {
        real.min(self.limit())
    }
}

/// The host's physical memory, if the system says.
fn host_memory() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let n = u64::try_from(pages)
        .ok()?
        .checked_mul(u64::try_from(page).ok()?)?;
    (n > 0).then_some(n)
}

/// Subtracts, never below zero, whatever a caller gets wrong.
fn sub(counter: &AtomicU64, bytes: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
        Some(u.saturating_sub(bytes))
    });
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
    fn the_setting_gives_the_devices_size_a_size_or_no_limit() {
        use crate::config::TenantMemory;
        let limit = |s, dev: u64| Quota::for_tenant(s, || dev).map(|q| q.limit());
        assert_eq!(limit(TenantMemory::Device, 13 << 30), Some(13 << 30));
        assert_eq!(limit(TenantMemory::Bytes(1 << 20), 13 << 30), Some(1 << 20));
        assert_eq!(limit(TenantMemory::Bytes(0), 13 << 30), None);
        // No device to go by: the host's memory bounds it still.
        assert_eq!(limit(TenantMemory::Device, 0), host_memory());
    }

    #[test]
    fn a_device_found_later_grows_only_a_quota_the_device_sized() {
        use crate::config::TenantMemory;
        let by_device = Quota::for_tenant(TenantMemory::Device, || 6 << 30).expect("a quota");
        by_device.device_found(140 << 30);
        assert_eq!(by_device.limit(), 140 << 30, "the larger CUDA device");
        by_device.device_found(1 << 30);
        assert_eq!(by_device.limit(), 140 << 30, "never shrinks");
        assert!(by_device.charge(100 << 30));
        let sized = Quota::for_tenant(TenantMemory::Bytes(2 << 30), || 6 << 30).expect("a quota");
        sized.device_found(140 << 30);
        assert_eq!(sized.limit(), 2 << 30, "a configured size stays");
        assert!(host_memory().is_some_and(|n| n > 0));
    }

    #[test]
    fn a_charge_waits_for_bytes_the_client_let_go_of_and_no_others() {
        let q = std::sync::Arc::new(Quota::new(100));
        assert!(q.charge(80));
        q.freeing(80);
        let library = {
            let q = q.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                q.freed(80);
                q.release(80);
            })
        };
        assert!(q.charge(50), "the 80 bytes being freed make room");
        library.join().expect("thread");
        assert_eq!(q.used(), 50);
        assert!(!q.charge(51), "nothing being freed makes room for 51 more");
        assert!(!q.fits(51));
        assert_eq!(q.used(), 50);
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
