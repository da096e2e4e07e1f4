//! The two futex operations the ring needs, on words that live in memory
//! shared between processes (hence the non-private operations).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Outcome of [`wait`].
#[derive(Debug, PartialEq, Eq)]
pub enum Wait {
    /// Woken, or the word no longer held the expected value.
    Woken,
    TimedOut,
}

/// Sleeps while `*word == expected`, for at most `timeout` when given.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> Wait {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call;
    // the kernel only reads it and the timespec, which outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            0,
            0,
        )
    };
    if r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT) {
        Wait::TimedOut
    } else {
        Wait::Woken
    }
}

/// Wakes at most `n` waiters on `word`.
pub fn wake(word: &AtomicU32, n: u32) {
    // SAFETY: `word` is a live, aligned u32 (it is a reference); FUTEX_WAKE
    // uses its address only as a key and takes no other pointer.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n, 0, 0, 0);
    }
}
