//! The lock a tenant's serving thread holds for the whole of each call,
//! and its residency thread takes between calls to evict: shared by the
//! OpenCL and the CUDA side.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::lock_api::{RawMutex as _, RawMutexTimed as _};

/// The lock a call holds, and the evictor takes between calls. The serving
/// thread's holding is remembered, so that letting go of it while waiting
/// is a no-op where it does not hold it.
pub(super) struct ServeLock {
    raw: parking_lot::RawMutex,
    serving: AtomicBool,
}

impl ServeLock {
    pub(super) fn enter(&self) {
        self.raw.lock();
        self.serving.store(true, Ordering::Relaxed);
    }

    pub(super) fn leave(&self) {
        // Only the serving thread writes `serving`: no locked swap needed.
        if self.serving.load(Ordering::Relaxed) {
            self.serving.store(false, Ordering::Relaxed);
            // SAFETY: the serving thread holds the lock (`serving` was set
            // by its `enter`, and only it clears it).
            unsafe { self.raw.unlock() };
        }
    }

    /// The serving thread waits: the evictor may run meanwhile.
    pub(super) fn pause(&self) -> bool {
        let held = self.serving.load(Ordering::Relaxed);
        self.leave();
        held
    }

    pub(super) fn resume(&self, held: bool) {
        if held {
            self.enter();
        }
    }
}

impl ServeLock {
    pub(super) const fn new() -> ServeLock {
        ServeLock {
            raw: parking_lot::RawMutex::INIT,
            serving: AtomicBool::new(false),
        }
    }

    /// The residency thread's turn: the lock within `wait`, else false
    /// (the tenant is in a call).
    pub(super) fn try_lock_for(&self, wait: std::time::Duration) -> bool {
        self.raw.try_lock_for(wait)
    }

    /// Ends a [`ServeLock::try_lock_for`] that succeeded.
    ///
    /// # Safety
    /// The calling thread holds the lock by `try_lock_for`.
    pub(super) unsafe fn unlock_evictor(&self) {
        // SAFETY: the caller holds it (this function's contract).
        unsafe { self.raw.unlock() }
    }
}
