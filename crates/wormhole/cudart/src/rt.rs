//! The client runtime the generated stubs call: the connection to the
//! server, the call/reply cycle, handles, the allocation tracker and the
//! last error.
//!
//! CUDA handles (streams, events) are opaque pointers to the application;
//! ours are the server's ids for them, which the client checks against the
//! ids it was given before sending them. The server never sees our
//! pointers and we never dereference theirs.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use wormhole_client::{copy_out, store, Cursor, Link, LinkError, Shape};
use wormhole_cuda_api::tracker::Tracker;
use wormhole_cuda_api::{cudaErrorInsufficientDriver, cudaErrorInvalidValue, cudaSuccess, Kind};
use wormhole_wire::{Decoder, Encoder};

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

/// The device allocations this process has (the published UVA tracker).
pub fn tracker() -> MutexGuard<'static, Tracker> {
    static T: OnceLock<Mutex<Tracker>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(Tracker::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn handles() -> MutexGuard<'static, HashMap<u64, Kind>> {
    static H: OnceLock<Mutex<HashMap<u64, Kind>>> = OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
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
        // SAFETY: caller's contract.
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
        // SAFETY: caller's contract.
        unsafe { *e = v };
    }
}

/// The connection to one server.
pub struct Conn {
    /// The channel; parking_lot's lock is eventually fair (see the OpenCL
    /// client's `Conn`).
    state: parking_lot::Mutex<Link>,
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

/// A call being marshalled; holds the channel.
pub struct Call<'a> {
    guard: parking_lot::MutexGuard<'a, Link>,
    pub enc: Encoder,
    shape: Shape,
}

/// A lost or misbehaving server looks like a machine without the driver.
fn lost(e: LinkError) -> i32 {
    wormhole_client::report_once("wormhole-cudart", &e.to_string());
    note(NO_SERVER)
}

impl Call<'static> {
    pub fn begin(func: u32) -> Result<Call<'static>, i32> {
        let conn = conn().ok_or(NO_SERVER).map_err(note)?;
        let mut guard = conn.state.lock();
        let switched = crate::manual::devices::follow_thread_device(&mut guard).map_err(lost)?;
        if switched != cudaSuccess {
            return Err(note(switched));
        }
        let enc = guard.request(func).map_err(lost)?;
        Ok(Call {
            guard,
            enc,
            shape: Shape::new(func),
        })
    }
}

impl<'a> Call<'a> {
    /// Adds a value to the call's shape (what can make it fail).
    pub fn shape(&mut self, v: u64) {
        self.shape.add(v);
    }

    /// A C string (a device's bus id), NULL as none; its bytes are part of
    /// the call's shape.
    ///
    /// # Safety
    /// `p` is NULL or a NUL-terminated string.
    pub unsafe fn str(&mut self, p: *const std::ffi::c_char) {
        if p.is_null() {
            self.shape(0);
            self.enc.opt_bytes(None);
        } else {
            // SAFETY: the caller's contract.
            let s = unsafe { std::ffi::CStr::from_ptr(p) };
            for chunk in s.to_bytes().chunks(8) {
                let mut a = [0u8; 8];
                a[..chunk.len()].copy_from_slice(chunk);
                self.shape(u64::from_le_bytes(a) | 1 << 63);
            }
            self.enc.opt_bytes(Some(s.to_bytes()));
        }
    }

    pub fn handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let id = handle_id(p, kind).map_err(note)?;
        self.shape(id);
        self.enc.u64(id);
        Ok(())
    }

    /// A device address, checked against the allocation tracker (the whole
    /// range when `size` is given).
    pub fn devptr(&mut self, p: *mut c_void, size: Option<u64>) -> Result<(), i32> {
        let a = p as usize as u64;
        tracker()
            .check(a, size.unwrap_or(0))
            .map_err(|_| note(cudaErrorInvalidValue))?;
        self.shape(size.unwrap_or(0));
        self.enc.u64(a);
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or points to `size` readable bytes.
    pub unsafe fn in_bytes(&mut self, p: *const c_void, size: u64) {
        if p.is_null() {
            self.enc.opt_bytes(None);
        } else {
            // SAFETY: caller's contract.
            let s = unsafe { std::slice::from_raw_parts(p as *const u8, size as usize) };
            self.enc.opt_bytes(Some(s));
            self.shape(s.len() as u64);
        }
    }

    /// A slot for a new handle returned through a pointer.
    pub fn out_new(&mut self, p: *mut *mut c_void) -> Option<u64> {
        if p.is_null() {
            self.enc.bool(false);
            None
        } else {
            let id = fresh_id();
            self.enc.bool(true);
            self.enc.u64(id);
            Some(id)
        }
    }

    /// Sends the request and waits for the reply.
    pub fn finish(self) -> Result<Reply<'a>, i32> {
        let Call { mut guard, enc, .. } = self;
        let a = guard.exchange(enc, None).map_err(lost)?;
        if let Some(d) = a.deferred_news {
            log(&format!("a deferred call failed with {d}"));
        }
        Ok(Reply {
            guard,
            cur: a.cursor,
            status: a.status,
            has_outputs: a.has_outputs,
        })
    }

    /// Queues a call the description marks async (a launch, a memset): it
    /// stays in the ring until the next synchronising call, and cudaSuccess
    /// is returned. As in the OpenCL path, a call is deferred only once one
    /// of the same shape succeeded synchronously, so the first of a kind
    /// reports its own error as natively; a deferred failure is reported by
    /// the next synchronising call. WORMHOLE_SYNC=1 forwards every call
    /// synchronously.
    pub fn finish_async(self, wake: bool) -> Result<i32, i32> {
        self.finish_async_as(wake, |r| {
            let own = r.status();
            (own, note(r.status_with_deferred()))
        })
    }

    /// `finish_async`, with `status` to read a synchronous reply: the call's
    /// own status (which decides whether its shape may be deferred next
    /// time) and the one to return.
    pub fn finish_async_as(
        mut self,
        wake: bool,
        status: impl FnOnce(&mut Reply<'a>) -> (i32, i32),
    ) -> Result<i32, i32> {
        let shape = self.shape;
        if !self.guard.deferrable(shape) {
            let mut r = self.finish()?;
            let (own, answer) = status(&mut r);
            if own == cudaSuccess {
                r.guard.succeeded(shape);
            }
            return Ok(answer);
        }
        let Call { mut guard, enc, .. } = self;
        guard.post(enc, None, wake).map_err(lost)?;
        Ok(cudaSuccess)
    }
}

/// A reply being unmarshalled; still holds the channel.
pub struct Reply<'a> {
    guard: parking_lot::MutexGuard<'a, Link>,
    cur: Cursor,
    status: i32,
    has_outputs: bool,
}

impl Drop for Reply<'_> {
    fn drop(&mut self) {
        self.guard.recycle(&mut self.cur);
    }
}

fn proto<T>(_: T) -> i32 {
    note(cudaErrorInsufficientDriver)
}

impl Reply<'_> {
    /// The call's status (recorded as the last error).
    pub fn status(&self) -> i32 {
        note(self.status)
    }

    /// The call's status, not recorded as the runtime's last error (for
    /// cuBLAS and cuRAND, whose statuses are their own).
    pub fn raw_status(&self) -> i32 {
        self.status
    }

    /// The call's status, or, if it succeeded, the failure of an earlier
    /// deferred call not yet reported.
    pub fn status_with_deferred(&mut self) -> i32 {
        if self.status == cudaSuccess {
            let d = self.guard.take_deferred();
            if d != 0 {
                return note(d);
            }
        }
        note(self.status)
    }

    /// Outputs are written only when the call succeeded: the native
    /// runtime leaves them untouched on failure.
    pub fn has_outputs(&self) -> bool {
        self.has_outputs && self.status == cudaSuccess
    }

    /// Runs `f` over the rest of the reply.
    pub fn with<T>(
        &mut self,
        f: impl FnOnce(&mut Decoder<'_>) -> Result<T, i32>,
    ) -> Result<T, i32> {
        self.cur.with(f)
    }

    /// # Safety
    /// `p` is NULL or holds `cap` bytes.
    pub unsafe fn out_bytes(&mut self, p: *mut c_void, cap: u64) -> Result<(), i32> {
        self.with(|d| {
            if let Some(b) = d.opt_bytes().map_err(proto)? {
                // SAFETY: the caller's contract.
                unsafe { copy_out(b, p, cap) };
            }
            Ok(())
        })
    }

    /// # Safety
    /// `p` is NULL or a writable unsigned long long.
    pub unsafe fn out_u64(&mut self, p: *mut u64) -> Result<(), i32> {
        let v = self.with(|d| d.u64().map_err(proto))?;
        // SAFETY: the caller's contract.
        unsafe { store(p, v) };
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or a writable unsigned int.
    pub unsafe fn out_u32(&mut self, p: *mut u32) -> Result<(), i32> {
        let v = self.with(|d| d.u32().map_err(proto))?;
        // SAFETY: the caller's contract.
        unsafe { store(p, v) };
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or a writable i32.
    pub unsafe fn out_i32(&mut self, p: *mut i32) -> Result<(), i32> {
        let v = self.with(|d| d.i32().map_err(proto))?;
        // SAFETY: the caller's contract.
        unsafe { store(p, v) };
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or a writable size_t.
    pub unsafe fn out_usize(&mut self, p: *mut usize) -> Result<(), i32> {
        let v = self.with(|d| d.usize().map_err(proto))?;
        // SAFETY: the caller's contract.
        unsafe { store(p, v) };
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or a writable handle slot.
    pub unsafe fn out_new(
        &mut self,
        id: Option<u64>,
        p: *mut *mut c_void,
        kind: Kind,
        status: i32,
    ) {
        if let (Some(id), false, true) = (id, p.is_null(), status == cudaSuccess) {
            // SAFETY: caller's contract.
            unsafe { *p = adopt(id, kind) };
        }
    }
}
