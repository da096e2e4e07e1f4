//! One more try for a build that failed with nothing to say.
//!
//! PoCL 3.1 now and then fails a build from source with no compiler
//! message at all: its log holds only its own "Device ... failed to build
//! the program". Seen in CI, where sixteen tenants of one client user, which
//! share a kernel cache, built at once; the same program had built, and
//! built again, in the same run. A compile error always brings the
//! compiler's own lines, so a build whose log has nothing else is tried
//! once more, a moment later, and the second answer stands.
//!
//! Builds also take a lock on the kernel cache first ([`CacheLock`]): one
//! user's tenants share it, and in CI the failures came in bursts of
//! tenants building at once (a second try 100 ms later failed too).

#![allow(non_snake_case)]

use std::ffi::c_void;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{ffi, programs};

const CL_BUILD_PROGRAM_FAILURE: i32 = -11;
const CL_PROGRAM_BUILD_LOG: u32 = 0x1183;

/// PoCL's own line, the only one in the log of a build that failed with
/// no compiler message.
const GENERIC: &str = "failed to build the program";

/// How long the second try waits: long enough for another process's write
/// into the shared cache to finish.
const PAUSE: Duration = Duration::from_millis(100);

/// The most bytes of a build log read to decide.
const LOG_LIMIT: u64 = 1 << 20;

/// The longest a build waits for another tenant's: past it, it builds
/// without the lock (a tenant that keeps it, a hostile one of the same
/// user even, delays its user's builds by this much at most).
const LOCK_FOR: Duration = Duration::from_secs(30);

/// An exclusive lock on the kernel cache the tenant builds into, while it
/// lives: PoCL 3.1 writes its cache with no guard against another process
/// building the same program at the same moment, and one client user's
/// tenants share the cache (`shared_kernel_cache`). `None` inside when
/// there is no cache to lock or the lock could not be had in time.
pub struct CacheLock(#[allow(dead_code)] Option<File>);

impl CacheLock {
    pub fn take() -> CacheLock {
        let Some(dir) = cache_dir() else {
            return CacheLock(None);
        };
        let _ = std::fs::create_dir_all(&dir);
        let Ok(f) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(dir.join(".wormhole-build.lock"))
        else {
            return CacheLock(None);
        };
        let deadline = Instant::now() + LOCK_FOR;
        loop {
            // SAFETY: flock on a descriptor we own; no pointers.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return CacheLock(Some(f));
            }
            if Instant::now() >= deadline {
                log::warn!(
                    "the kernel cache stayed locked {LOCK_FOR:?}: building without the lock"
                );
                return CacheLock(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// PoCL's cache directory, as PoCL finds it.
fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("POCL_CACHE_DIR") {
        return Some(d.into());
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("pocl"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/pocl"))
}

/// Runs `build` (a `clBuildProgram` of `program`) holding the cache's
/// lock, and once more when it failed with a log that names no cause.
///
/// # Safety
/// `program` is a live program of the tenant's, for the whole call.
pub unsafe fn build_with_retry(program: *mut c_void, build: impl Fn() -> i32) -> i32 {
    let _lock = CacheLock::take();
    let status = build();
    // SAFETY: `program` is live (this function's contract).
    if status != CL_BUILD_PROGRAM_FAILURE || !unsafe { says_nothing(program) } {
        return status;
    }
    log::warn!("a build failed with no compiler message; trying it once more");
    std::thread::sleep(PAUSE);
    build()
}

/// `clBuildProgram` with [`build_with_retry`]; a build that calls the
/// application back is not tried again (it would hear twice).
///
/// # Safety
/// As `clBuildProgram`: `program` live, `device_list` NULL or `num_devices`
/// devices, `options` NULL or a C string, `notify` and `data` the
/// application's callback for the program (the decoder's, NULL for none).
pub unsafe fn clBuildProgram(
    _t: &super::tenant::Tenant,
    program: *mut c_void,
    num_devices: u32,
    device_list: *const *mut c_void,
    options: *const std::ffi::c_char,
    notify: *mut c_void,
    data: *mut c_void,
) -> i32 {
    // SAFETY: the arguments are as clBuildProgram takes them (this
    // function's contract), passed on unchanged.
    let build =
        || unsafe { ffi::clBuildProgram(program, num_devices, device_list, options, notify, data) };
    if !notify.is_null() {
        let _lock = CacheLock::take();
        return build();
    }
    // SAFETY: `program` is live for the call (this function's contract).
    unsafe { build_with_retry(program, build) }
}

/// Whether every device's build log holds nothing but PoCL's generic line.
///
/// # Safety
/// `program` is a live program.
unsafe fn says_nothing(program: *mut c_void) -> bool {
    // SAFETY: a live program (this function's contract).
    let devices = unsafe { programs::program_devices(program) };
    !devices.is_empty()
        && devices.iter().all(|&device| {
            // SAFETY: `program` is live and `device` one of its devices.
            let log =
                unsafe { programs::build_text(program, device, CL_PROGRAM_BUILD_LOG, LOG_LIMIT) };
            log.is_ok_and(|l| generic_only(&l))
        })
}

/// Whether a log's lines are all empty or PoCL's generic one.
fn generic_only(log: &[u8]) -> bool {
    let text = String::from_utf8_lossy(log);
    text.trim_end_matches('\0')
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.contains(GENERIC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_log_without_a_compiler_message_is_tried_again() {
        assert!(generic_only(
            b"Device pthread-skylake failed to build the program\n\0"
        ));
        assert!(generic_only(b"\0"));
        assert!(!generic_only(
            b"<source>:3:5: error: use of undeclared identifier 'x'\n\
              Device pthread failed to build the program\n\0"
        ));
    }
}
