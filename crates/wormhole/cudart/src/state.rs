//! The client's process state: the connection to the server (made on
//! first use), the handles the server gave out, the allocation tracker,
//! the last error and the soname major the stand-in was loaded as.
//!
//! CUDA handles (streams, events) are opaque pointers to the application;
//! ours are the server's ids for them, which the client checks against the
//! ids it was given before sending them. The server never sees our
//! pointers and we never dereference theirs.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use wormhole_client::Link;
use wormhole_cuda_api::tracker::Tracker;
use wormhole_cuda_api::{cudaErrorInsufficientDriver, cudaSuccess, Kind};

/// Prints one line on stderr when `WORMHOLE_LOG` is set.
pub fn log(msg: &str) {
    wormhole_client::log("wormhole-cudart", msg);
}

/// The soname major this library stands in for (12 or 13), set by the
/// stand-in library's constructor.
pub static MAJOR: AtomicU32 = AtomicU32::new(13);

/// What every call returns when there is no server: what the native
/// runtime returns on a machine without the NVIDIA driver.
pub const NO_SERVER: i32 = cudaErrorInsufficientDriver;

thread_local! {
    /// The last error of this thread's calls, as cudaGetLastError reports.
    static LAST: Cell<i32> = const { Cell::new(0) };
}

/// A failure to initialise: native runtimes report it from every later
/// call, cudaGetLastError included, so it is never reset.
static STICKY: AtomicI32 = AtomicI32::new(0);

/// Records a call's status as the thread's last error.
pub fn note(status: i32) -> i32 {
    if status != cudaSuccess {
        LAST.with(|l| l.set(status));
        if matches!(status, 3 | 35 | 100) {
            let _ = STICKY.compare_exchange(0, status, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    status
}

/// cudaGetLastError (`reset`) and cudaPeekAtLastError.
pub fn last_error(reset: bool) -> i32 {
    let sticky = STICKY.load(Ordering::Relaxed);
    let v = LAST.with(|l| if reset { l.replace(0) } else { l.get() });
    if sticky != 0 {
        sticky
    } else {
        v
    }
}

/// Which element of `slots` the handle `p` is the address of: handles the
/// client makes itself (memory pools, driver contexts), one per device,
/// which can be checked without a table.
pub fn slot_of<T>(slots: &'static [T], p: *const std::ffi::c_void) -> Option<usize> {
    let off = (p as usize).wrapping_sub(slots.as_ptr() as usize);
    let size = std::mem::size_of::<T>();
    (off.is_multiple_of(size) && off / size < slots.len()).then_some(off / size)
}

/// Process-wide state, made (`Default`) at first use and locked for each
/// access. A lock poisoned by a panicking holder is taken as it is: each
/// holder leaves the value consistent between its statements, and a
/// stand-in runtime must keep answering the application's other threads.
pub struct Global<T>(OnceLock<Mutex<T>>);

impl<T: Default> Global<T> {
    pub const fn new() -> Self {
        Global(OnceLock::new())
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Default> Default for Global<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The device allocations this process has (the published UVA tracker).
pub fn tracker() -> MutexGuard<'static, Tracker> {
    static T: Global<Tracker> = Global::new();
    T.lock()
}

fn handles() -> MutexGuard<'static, HashMap<u64, Kind>> {
    static H: Global<HashMap<u64, Kind>> = Global::new();
    H.lock()
}

/// The application's handle for a new server object.
pub fn adopt(id: u64, kind: Kind) -> *mut c_void {
    handles().insert(id, kind);
    id as usize as *mut c_void
}

/// The special stream handles `cudaStreamLegacy` (1) and
/// `cudaStreamPerThread` (2): they travel as themselves, and no id we
/// hand out is below [`FIRST_ID`].
pub const SPECIAL_STREAMS: [u64; 2] = [1, 2];
const FIRST_ID: u64 = 0x100;

/// The server id of an application handle (NULL: 0, the default stream).
pub fn handle_id(p: *mut c_void, kind: Kind) -> Result<u64, i32> {
    let id = p as usize as u64;
    if id == 0 || (kind == Kind::Stream && SPECIAL_STREAMS.contains(&id)) {
        return Ok(id);
    }
    match handles().get(&id) {
        Some(&k) if k == kind => Ok(id),
        _ => Err(kind.invalid()),
    }
}

pub fn retained(_p: *mut c_void, _kind: Kind) {}

/// Forgets a destroyed handle.
pub fn released(p: *mut c_void, kind: Kind) {
    let mut h = handles();
    if h.get(&(p as usize as u64)) == Some(&kind) {
        h.remove(&(p as usize as u64));
    }
}

/// # Safety
/// `p` is NULL or a writable handle slot.
pub unsafe fn adopt_new(id: Option<u64>, p: *mut *mut c_void, kind: Kind) {
    if let (Some(id), false) = (id, p.is_null()) {
        // SAFETY: `p` is not NULL (checked above), so by this function's
        // contract it is a writable handle slot.
        unsafe { *p = adopt(id, kind) };
    }
}

/// Unused: no CUDA function takes an errcode argument.
///
/// # Safety
/// `e` is NULL or writable.
#[allow(dead_code)]
pub unsafe fn set_errcode(e: *mut i32, v: i32) {
    if !e.is_null() {
        // SAFETY: `e` is not NULL (checked above), so by this function's
        // contract it points to a writable i32.
        unsafe { *e = v };
    }
}

/// The connection to one server.
pub struct Conn {
    /// The channel; parking_lot's lock is eventually fair (see the OpenCL
    /// client's `Conn`).
    pub(crate) state: parking_lot::Mutex<Link>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(FIRST_ID);

/// A fresh id for an object the client names (the server maps it).
pub fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn connect() -> Result<Conn, wormhole_transport::client::ConnectError> {
    // CUDA has no callbacks forwarded yet: the notification ring is unused.
    let chan = wormhole_transport::client::connect_from_env()?.chan;
    if std::env::var_os("WORMHOLE_LOG").is_some() {
        // SAFETY: the handler is a plain function that stays mapped (the
        // library is linked `-z nodelete`) and only try-locks the channel.
        if unsafe { libc::atexit(report_counts) } != 0 {
            log("cannot report call counts at exit");
        }
    }
    Ok(Conn {
        state: parking_lot::Mutex::new(Link::new(chan)),
    })
}

/// With `WORMHOLE_LOG`, at exit: how many calls reached the server and how
/// many of them waited for an answer (the rest were batched).
extern "C" fn report_counts() {
    let Some(conn) = conn() else { return };
    // A thread still in a call holds the lock: no report then.
    if let Some(link) = conn.state.try_lock() {
        let top: Vec<String> = link
            .exchanged_by_func()
            .iter()
            .take(8)
            .map(|&(f, n)| format!("{} {n}", wormhole_cuda_api::Library::func_name(f)))
            .collect();
        log(&format!(
            "{} calls forwarded, {} of them round trips ({}), {} batched",
            link.sent(),
            link.exchanged(),
            top.join(", "),
            link.sent() - link.exchanged()
        ));
    }
}

/// The connection, made on first use; `None` when there is no server.
pub fn conn() -> Option<&'static Conn> {
    static C: OnceLock<Option<Conn>> = OnceLock::new();
    C.get_or_init(|| match connect() {
        Ok(c) => Some(c),
        // A server that is there and refuses us is worth a line unasked
        // (see `ConnectError::is_no_server`).
        Err(e) if !e.is_no_server() => {
            eprintln!("wormhole-cudart: {e}; no CUDA device");
            None
        }
        Err(e) => {
            log(&e.to_string());
            None
        }
    })
    .as_ref()
}
