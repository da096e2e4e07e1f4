//! The client runtime that the generated stubs call: the connection to the
//! server, the call/reply cycle, and the registry of objects handed to the
//! application.
//!
//! Every object the application sees is an [`Obj`] whose first field is the
//! ICD dispatch table, as the loaders require. It carries the id under which
//! the server knows the object. The server never sees our pointers.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use wormhole_client::{copy_out, force_sync, store, Cursor, Link, LinkError, Shape};
use wormhole_opencl_api::{
    info_handle, CallbackKind, InfoHandle, Kind, CL_OUT_OF_RESOURCES, CL_SUCCESS,
};
use wormhole_transport::stream::StreamNotes;
use wormhole_transport::TransportError;
use wormhole_wire::{Decoder, Encoder};

/// Prints one line on stderr when `WORMHOLE_LOG` is set.
pub fn log(msg: &str) {
    wormhole_client::log("wormhole", msg);
}

/// See [`wormhole_client::report_once`].
pub fn report_once(msg: &str) {
    wormhole_client::report_once("wormhole", msg);
}

const MAGIC: u64 = u64::from_le_bytes(*b"WHOLEOBJ");

/// An OpenCL object as the application sees it.
#[repr(C)]
pub struct Obj {
    /// Must be first: the ICD loader calls through it.
    dispatch: *const c_void,
    magic: u64,
    pub id: u64,
    pub kind: Kind,
    refs: AtomicU32,
    /// For memory objects created with CL_MEM_USE_HOST_PTR: the
    /// application's pointer, which maps return into.
    pub host_ptr: AtomicUsize,
    /// A user event whose status the application has not set yet.
    pub user_pending: std::sync::atomic::AtomicBool,
    /// For buffers: whether the server keeps them in the shared arena, as
    /// learned from the first large transfer (see [`Placement`]).
    pub placement: std::sync::atomic::AtomicU8,
    /// Answers to queries that cannot change while the object lives.
    pub info: crate::info_cache::InfoCache,
    /// What this object contributes to a call's shape (0: its id). Buffers
    /// alike in context, flags and size share one, so that the first
    /// transfer to or launch with a fresh buffer is batched too.
    shape_key: AtomicU64,
    /// For queues: created to execute in order (and never changed since),
    /// so a command that completed had every earlier one complete first.
    pub in_order: std::sync::atomic::AtomicBool,
    /// For kernels: the arguments set so far (bit i: argument i).
    args_set: AtomicU64,
    /// For queues and buffers: the id of the context they were created in
    /// (0: not known here).
    pub created_in: AtomicU64,
    /// For memory objects created here (buffers, images; not sub-buffers):
    /// their flags, with [`FLAGS_KNOWN`].
    created_flags: AtomicU64,
    /// For buffers from clCreateBuffer: their size, counted as held by the
    /// application until its last release (`room`).
    pub counted: AtomicU64,
    /// For contexts: the least global memory of their devices (0: not
    /// asked yet; u64::MAX: not known), for `room`.
    pub mem_budget: AtomicU64,
    /// For events that stand for a command the client completes itself (a
    /// barrier behind a transfer or map gated on a user event): the
    /// command type the application's command has natively (0: none).
    pub stands_for: AtomicU32,
    /// For events: the status the server said it ended with
    /// (`event_state::NOT_ENDED` until then).
    pub ended: std::sync::atomic::AtomicI32,
}

/// Marks `Obj::created_flags` as set (no OpenCL memory flag uses the top bit).
const FLAGS_KNOWN: u64 = 1 << 63;

/// Where a buffer's storage lives, as far as this side knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Placement {
    Unknown = 0,
    /// In memory this process maps too: transfers are a local copy.
    Shared = 1,
    /// Only on the server: transfers stream through the channel.
    Server = 2,
}

/// An object's shape key made from what decides its calls' failures; the
/// top bit keeps a key apart from every id.
fn shape_of(v: impl Hash) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    v.hash(&mut h);
    h.finish() | 1 << 63
}

impl Obj {
    /// What can make a call that names this object fail, as far as the
    /// object goes: the object itself, or what a buffer was created as.
    pub fn shape_key(&self) -> u64 {
        match self.shape_key.load(Ordering::Relaxed) {
            0 => self.id,
            // Which arguments are set decides whether a launch can fail.
            k if self.kind == Kind::Kernel => shape_of((k, self.args_set.load(Ordering::Relaxed))),
            k => k,
        }
    }

    /// Makes calls that name this kernel shaped by what it was created
    /// from: kernels of one program and name take the same arguments and
    /// fail alike (CLBlast creates a kernel for every call it makes).
    pub fn shape_as_kernel_of(&self, program: u64, name: &[u8]) {
        self.shape_key
            .store(shape_of((0x4b45_524eu32, program, name)), Ordering::Relaxed);
    }

    /// Notes that a kernel's argument `index` was set; past the 64 this
    /// counts, the kernel is shaped as itself.
    pub fn arg_set(&self, index: u32) {
        match 1u64.checked_shl(index) {
            Some(bit) => {
                self.args_set.fetch_or(bit, Ordering::Relaxed);
            }
            None => self.shape_as_itself(),
        }
    }

    /// Makes calls that name this buffer shaped by how it was created: the
    /// context, flags and size decide what a transfer or argument with it
    /// can fail on (range, host access, context), not which buffer it is.
    pub fn shape_as_created(&self, context: u64, flags: u64, size: usize) {
        self.shape_key.store(
            shape_of((0x4255_4646u32, context, flags, size)),
            Ordering::Relaxed,
        );
    }

    /// Makes calls that name this program shaped by its latest build (or
    /// compilation): a kernel name or argument that one build has, the
    /// next, with other options or a failure, may not, so what succeeded
    /// before tells nothing about it. Kernels take the program's shape
    /// ([`Obj::shape_as_kernel_of`]).
    pub fn shape_as_new_build(&self) {
        static BUILDS: AtomicU64 = AtomicU64::new(0);
        let n = BUILDS.fetch_add(1, Ordering::Relaxed);
        self.shape_key
            .store(shape_of((0x4255_494cu32, self.id, n)), Ordering::Relaxed);
    }

    /// Back to the object itself as its shape: a buffer with sub-buffers
    /// overlaps them, which its twins do not (a copy between it and one of
    /// them can fail where theirs cannot).
    pub fn shape_as_itself(&self) {
        self.shape_key.store(0, Ordering::Relaxed);
    }

    /// Notes a buffer's flags as clCreateBuffer made it.
    pub fn set_created_flags(&self, flags: u64) {
        self.created_flags
            .store(flags | FLAGS_KNOWN, Ordering::Relaxed);
    }

    /// A memory object's flags, if it was created here (see the field).
    pub fn created_flags(&self) -> Option<u64> {
        let f = self.created_flags.load(Ordering::Relaxed);
        (f & FLAGS_KNOWN != 0).then_some(f & !FLAGS_KNOWN)
    }

    pub fn placement(&self) -> Placement {
        match self.placement.load(Ordering::Relaxed) {
            1 => Placement::Shared,
            2 => Placement::Server,
            _ => Placement::Unknown,
        }
    }

    pub fn set_placement(&self, p: Placement) {
        self.placement.store(p as u8, Ordering::Relaxed);
    }
}

struct Registry {
    by_id: FxHashMap<u64, usize>,
    live: FxHashSet<usize>,
    quarantine: VecDeque<usize>,
    /// The memory objects and samplers in the quarantine: a kernel argument
    /// naming one is a handle the application released (see [`arg_object`]).
    released_args: FxHashMap<usize, Kind>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    let m = R.get_or_init(|| {
        Mutex::new(Registry {
            by_id: FxHashMap::default(),
            live: FxHashSet::default(),
            quarantine: VecDeque::new(),
            released_args: FxHashMap::default(),
        })
    });
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn dispatch_ptr() -> *const c_void {
    static TABLE: OnceLock<usize> = OnceLock::new();
    *TABLE.get_or_init(|| Box::leak(Box::new(crate::gen::dispatch_table())).as_ptr() as usize)
        as *const c_void
}

/// The object for a server id, creating one (with no references of the
/// application's) for an id seen for the first time.
pub fn object_for(id: u64, kind: Kind, refs: u32) -> *mut c_void {
    if id == 0 {
        return std::ptr::null_mut();
    }
    let mut r = registry();
    if let Some(&p) = r.by_id.get(&id) {
        if refs > 0 {
            // SAFETY: registered pointers are live Objs.
            unsafe { (*(p as *const Obj)).refs.fetch_add(refs, Ordering::Relaxed) };
        }
        return p as *mut c_void;
    }
    let obj = Box::into_raw(Box::new(Obj {
        dispatch: dispatch_ptr(),
        magic: MAGIC,
        id,
        kind,
        refs: AtomicU32::new(refs),
        host_ptr: AtomicUsize::new(0),
        user_pending: std::sync::atomic::AtomicBool::new(false),
        placement: std::sync::atomic::AtomicU8::new(Placement::Unknown as u8),
        info: Default::default(),
        shape_key: AtomicU64::new(0),
        in_order: std::sync::atomic::AtomicBool::new(false),
        args_set: AtomicU64::new(0),
        created_in: AtomicU64::new(0),
        created_flags: AtomicU64::new(0),
        counted: AtomicU64::new(0),
        mem_budget: AtomicU64::new(0),
        stands_for: AtomicU32::new(0),
        ended: std::sync::atomic::AtomicI32::new(crate::event_state::NOT_ENDED),
    }));
    r.by_id.insert(id, obj as usize);
    r.live.insert(obj as usize);
    obj as *mut c_void
}

/// The object behind an application's handle, if it is one of ours and of
/// the right kind.
pub fn obj(p: *mut c_void, kind: Kind) -> Result<Option<&'static Obj>, i32> {
    if p.is_null() {
        return Ok(None);
    }
    if !registry().live.contains(&(p as usize)) {
        return Err(kind.invalid());
    }
    typed(p, kind).map(Some)
}

/// A registered handle as the object it is, checked for kind.
fn typed(p: *mut c_void, kind: Kind) -> Result<&'static Obj, i32> {
    // SAFETY: the caller found `p` registered (now, or in a `Checked` still
    // valid), so it is an Obj we allocated; released ones stay allocated in
    // the quarantine for a while after.
    let o = unsafe { &*(p as *const Obj) };
    if o.magic != MAGIC || o.kind != kind {
        return Err(kind.invalid());
    }
    Ok(o)
}

/// Bumped, under the registry's lock, whenever an object leaves the
/// registry: a [`Checked`] older than that is forgotten.
static RETIRED: AtomicU64 = AtomicU64::new(0);

/// The last few handles calls found registered, valid until the next
/// release anywhere in the process. A loop of launches names the same queue
/// and kernel again and again; this spares each of them the registry's lock
/// and hash lookup. It lives beside the channel, under the lock every call
/// already holds.
#[derive(Default)]
pub struct Checked {
    /// The value of [`RETIRED`] when these were found registered.
    at: u64,
    ptrs: [usize; 4],
    next: usize,
}

impl Checked {
    /// Whether `p` was found registered since the last release.
    fn holds(&mut self, p: usize) -> bool {
        let now = RETIRED.load(Ordering::Acquire);
        if now != self.at {
            *self = Checked {
                at: now,
                ..Checked::default()
            };
            return false;
        }
        self.ptrs.contains(&p)
    }

    /// `obj`, skipping the registry for a handle found there since the last
    /// release.
    fn obj(&mut self, p: *mut c_void, kind: Kind) -> Result<Option<&'static Obj>, i32> {
        if p.is_null() {
            return Ok(None);
        }
        // `holds` reads RETIRED before the registry is consulted below, so
        // a release between the two makes the entry stale at once.
        if !self.holds(p as usize) {
            let o = obj(p, kind)?;
            self.ptrs[self.next] = p as usize;
            self.next = (self.next + 1) % self.ptrs.len();
            return Ok(o);
        }
        typed(p, kind).map(Some)
    }
}

/// What a pointer-sized kernel argument's bytes are to us.
pub enum ArgObject {
    /// One of the application's objects.
    Live(&'static Obj),
    /// A memory object or sampler the application released (its memory
    /// is still in the quarantine, so nothing else can have its address).
    Released(Kind),
    /// Anything else: bytes.
    Bytes,
}

/// Like [`obj`], for any kind, and for released memory objects and
/// samplers too: used to recognise handles in kernel arguments.
pub fn arg_object(p: *mut c_void) -> ArgObject {
    if p.is_null() {
        return ArgObject::Bytes;
    }
    let r = registry();
    if r.live.contains(&(p as usize)) {
        // SAFETY: registered, hence a live Obj.
        return ArgObject::Live(unsafe { &*(p as *const Obj) });
    }
    match r.released_args.get(&(p as usize)) {
        Some(&k) => ArgObject::Released(k),
        None => ArgObject::Bytes,
    }
}

/// Counts a retain. An object with no count (platforms, root devices,
/// objects first seen in query results) stays uncounted: natively retaining
/// and releasing a root device changes nothing, and counting from 0 here
/// made its handle invalid after one retain and one release (found with
/// OpenCV, which does that to every device it uses).
pub fn retained(p: *mut c_void, kind: Kind) {
    if let Ok(Some(o)) = obj(p, kind) {
        let _ = o
            .refs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                (r > 0).then(|| r.saturating_add(1))
            });
    }
}

/// Frees the object when the application's last reference goes. Platforms
/// and root devices are never freed.
pub fn released(p: *mut c_void, kind: Kind) {
    let Ok(Some(o)) = obj(p, kind) else { return };
    let prev = o.refs.load(Ordering::Relaxed);
    if prev == 0 {
        return;
    }
    if o.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
        let counted = o.counted.swap(0, Ordering::Relaxed);
        if counted > 0 {
            crate::room::released(counted);
        }
        let mut r = registry();
        r.by_id.remove(&o.id);
        r.live.remove(&(p as usize));
        RETIRED.fetch_add(1, Ordering::Release);
        // The memory stays allocated (with its dispatch table) for a while:
        // the ICD loader reads the table through a handle before we can
        // check it, so a use after release then gets CL_INVALID_* instead
        // of a crash. Bounded, so that objects released in a loop (events)
        // do not leak.
        r.quarantine.push_back(p as usize);
        if matches!(kind, Kind::Mem | Kind::Sampler) {
            r.released_args.insert(p as usize, kind);
        }
        let evicted = if r.quarantine.len() > QUARANTINE {
            r.quarantine.pop_front()
        } else {
            None
        };
        if let Some(old) = evicted {
            r.released_args.remove(&old);
        }
        drop(r);
        if let Some(old) = evicted {
            // SAFETY: unregistered when it entered the quarantine, so no
            // lookup can return it; the application released its last
            // reference, and only the quarantine held the pointer.
            unsafe { drop(Box::from_raw(old as *mut Obj)) };
        }
    }
}

/// How many released objects stay allocated (see [`released`]).
const QUARANTINE: usize = 4096;

/// # Safety
/// `e` is NULL or points to a writable cl_int.
pub unsafe fn set_errcode(e: *mut i32, v: i32) {
    if !e.is_null() {
        // SAFETY: caller's contract.
        unsafe { *e = v };
    }
}

/// What a call holds while it marshals: the channel, and the handles it
/// need not look up again.
pub struct Chan {
    link: Link,
    checked: Checked,
    /// A queue known to have nothing left to run, and the count of frames
    /// sent when that became known: while nothing else has been sent, a
    /// clFinish of that queue needs no round trip.
    drained: Option<(u64, u64)>,
    /// The last command sent that created an event on an in-order queue:
    /// the queue, the event and the count of frames sent with it. Awaited
    /// with nothing sent in between, it drains the queue.
    last_enqueued: Option<(u64, u64, u64)>,
}

impl Chan {
    fn note_enqueued(&mut self, (queue, event): (u64, u64)) {
        if queue != 0 && event != 0 {
            self.last_enqueued = Some((queue, event, self.sent()));
        }
    }
}

impl std::ops::Deref for Chan {
    type Target = Link;
    fn deref(&self) -> &Link {
        &self.link
    }
}

impl std::ops::DerefMut for Chan {
    fn deref_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

/// The connection to one server.
pub struct Conn {
    /// The channel. parking_lot's lock hands itself to a thread that has
    /// waited for it about half a millisecond: with the standard one, a
    /// thread making call after call kept re-taking it, and another
    /// thread's single call waited up to seconds.
    state: parking_lot::Mutex<Chan>,
    pub platforms: Vec<u64>,
    /// Memory the server may place buffers in (shared memory only).
    pub arena: Option<std::sync::Arc<wormhole_transport::arena::Arena>>,
    /// The fork generation of the process that connected. A child made by
    /// fork() shares our rings and must not use them: it would corrupt its
    /// parent's calls.
    fork_gen: u32,
    /// Over TCP, the notifier's end until a callback is first registered.
    stream_notes: Mutex<Option<StreamNotes>>,
}

/// Bumped in the child of every fork(). Checking it costs an atomic load
/// per call where asking for the process id would be a system call
/// (glibc no longer caches it).
static FORK_GEN: AtomicU32 = AtomicU32::new(0);

extern "C" fn in_forked_child() {
    FORK_GEN.fetch_add(1, Ordering::Relaxed);
}

/// Registers [`in_forked_child`] once. The library is linked `-z nodelete`
/// (build.rs), so the handler stays mapped for the life of the process.
fn watch_forks() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handler only touches an atomic, which is allowed in a
        // child after fork(), and its code is never unmapped (see above).
        let r = unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
        if r != 0 {
            log("cannot watch for fork(): a forked child may use the parent's connection");
        }
    });
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Why there is no connection, and whether to say so without being asked
/// (see `ConnectError::is_no_server`).
struct NoConn {
    why: String,
    loud: bool,
}

fn connect() -> Result<Conn, NoConn> {
    let c = wormhole_transport::client::connect_from_env().map_err(|e| NoConn {
        loud: !e.is_no_server(),
        why: e.to_string(),
    })?;
    if let Some(rx) = c.notify {
        crate::callbacks::start_notifier(rx);
    }
    if let Some(e) = &c.arena_error {
        log(&format!(
            "no shared buffers ({e}): transfers stream through the channel"
        ));
    }
    let chan = c.chan;
    let arena = c.arena;
    let stream_notes = Mutex::new(c.stream_notes);
    watch_forks();
    let mut conn = Conn {
        state: parking_lot::Mutex::new(Chan {
            link: Link::new(chan),
            checked: Checked::default(),
            drained: None,
            last_enqueued: None,
        }),
        platforms: Vec::new(),
        arena,
        fork_gen: FORK_GEN.load(Ordering::Relaxed),
        stream_notes,
    };
    conn.platforms = fetch_platforms(&conn).map_err(|why| NoConn { why, loud: true })?;
    if std::env::var_os("WORMHOLE_LOG").is_some() {
        // SAFETY: the handler is a plain function that stays mapped (the
        // library is linked `-z nodelete`) and only try-locks the channel.
        if unsafe { libc::atexit(report_counts) } != 0 {
            log("cannot report call counts at exit");
        }
    }
    Ok(conn)
}

/// With `WORMHOLE_LOG`, at exit: how many calls reached the server and how
/// many of them waited for an answer (the rest were batched).
extern "C" fn report_counts() {
    let Some(conn) = conn() else { return };
    if FORK_GEN.load(Ordering::Relaxed) != conn.fork_gen {
        return;
    }
    // A thread still in a call holds the lock: no report then.
    if let Some(chan) = conn.state.try_lock() {
        let names = wormhole_opencl_api::FUNC_NAMES;
        let top: Vec<String> = chan
            .exchanged_by_func()
            .iter()
            .take(8)
            .map(|&(f, n)| format!("{} {n}", names.get(f as usize).unwrap_or(&"?")))
            .collect();
        log(&format!(
            "{} calls forwarded, {} of them round trips ({}), {} batched",
            chan.sent(),
            chan.exchanged(),
            top.join(", "),
            chan.sent() - chan.exchanged()
        ));
    }
}

fn fetch_platforms(conn: &Conn) -> Result<Vec<u64>, String> {
    let mut c = Call::on(conn, wormhole_opencl_api::func::clGetPlatformIDs)
        .map_err(|e| format!("error {e}"))?;
    c.enc.u32(64);
    c.enc.bool(true);
    c.enc.bool(false);
    let mut r = c
        .finish()
        .map_err(|e| format!("server did not answer ({e})"))?;
    if r.status() != CL_SUCCESS || !r.has_outputs() {
        return Ok(Vec::new());
    }
    let mut d = r.dec();
    let ids = if d.bool().map_err(|e| e.to_string())? {
        d.u64s().map_err(|e| e.to_string())?
    } else {
        Vec::new()
    };
    Ok(ids)
}

/// The connection, made on first use; `None` when there is no server.
pub fn conn() -> Option<&'static Conn> {
    static C: OnceLock<Option<Conn>> = OnceLock::new();
    C.get_or_init(|| match connect() {
        Ok(c) => Some(c),
        Err(NoConn { why, loud: true }) => {
            eprintln!("wormhole: {why}; no Wormhole platform");
            None
        }
        Err(NoConn { why, loud: false }) => {
            log(&format!("{why}; no Wormhole platform"));
            None
        }
    })
    .as_ref()
}

/// Over TCP, starts the notifier thread when the first callback is
/// registered: nothing is notified before, and a thread watching the socket
/// wakes at every reply.
pub fn watch_stream_notes() {
    let Some(conn) = conn() else { return };
    let taken = conn
        .stream_notes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let Some(notes) = taken else { return };
    crate::callbacks::start_stream_notifier(notes, move || {
        let mut chan = conn.state.lock();
        chan.pump_notes().map_err(|e| match e {
            LinkError::Lost(e) => e,
            _ => TransportError::PeerGone,
        })
    });
}

/// The memory shared with the server for buffers, if any.
pub fn arena() -> Option<&'static wormhole_transport::arena::Arena> {
    conn().and_then(|c| c.arena.as_deref())
}

/// The application's threads that have made a call (the notifier thread,
/// which runs callbacks, is not counted): with more than one, waits leave
/// the channel free (`waits`).
static CALLERS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Counts the calling thread among the application's callers, once.
pub fn count_caller() {
    COUNTED.with(|c| {
        if !c.get() {
            c.set(true);
            CALLERS.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// Whether more than one of the application's threads has made a call.
pub fn several_callers() -> bool {
    CALLERS.load(Ordering::Relaxed) > 1
}

/// Leaves the calling thread out of [`several_callers`]'s count.
pub fn not_a_caller() {
    COUNTED.with(|c| c.set(true));
}

/// The shape of every `clGet*Info` function.
pub type InfoFn = unsafe extern "C" fn(*mut c_void, u32, usize, *mut c_void, *mut usize) -> i32;

/// One fixed-size answer of an info query (through the channel): `f` is
/// one of our stubs, `T` the type the API gives `param` (the library writes
/// at most its size; a larger answer is its error, not an overflow).
pub fn info_value<T: Copy + Default>(f: InfoFn, obj: *mut c_void, param: u32) -> Result<T, i32> {
    let mut v = T::default();
    // SAFETY: room for one `T` at `v`, its size given; no size_ret.
    let s = unsafe {
        f(
            obj,
            param,
            std::mem::size_of::<T>(),
            (&mut v as *mut T).cast(),
            std::ptr::null_mut(),
        )
    };
    if s == CL_SUCCESS {
        Ok(v)
    } else {
        Err(s)
    }
}

/// A shape value (from a `shape=` expression of the description) that
/// makes the call wait for its answer, whatever calls of its shape did
/// before: its failure must reach the application from the call itself. A
/// value that merely happens to equal it only costs a round trip.
pub const ANSWER_NEEDED: u64 = u64::MAX;

/// A call being marshalled; holds the channel.
pub struct Call<'a> {
    guard: parking_lot::MutexGuard<'a, Chan>,
    pub enc: Encoder,
    /// Bulk bytes to stream after the frame.
    raw: Option<(*const u8, usize)>,
    /// What can make the call fail (see `finish_async`).
    shape: Shape,
    /// The first handles the call names, for `handle`'s aliasing check.
    named: [u64; 4],
    /// The in-order queue the call names first, and the event it creates:
    /// an enqueue whose completion, awaited, drains that queue.
    enqueued: (u64, u64),
    /// Wait for the answer even if the shape is known ([`ANSWER_NEEDED`]).
    must_answer: bool,
}

/// What the application sees when the server is gone or misbehaves.
fn lost(e: LinkError) -> i32 {
    report_once(&e.to_string());
    CL_OUT_OF_RESOURCES
}

impl<'a> Call<'a> {
    pub fn begin(func: u32) -> Result<Call<'static>, i32> {
        let conn = conn().ok_or(CL_OUT_OF_RESOURCES)?;
        Call::on(conn, func)
    }

    fn on(conn: &'a Conn, func: u32) -> Result<Call<'a>, i32> {
        count_caller();
        let mut guard = conn.state.lock();
        if FORK_GEN.load(Ordering::Relaxed) != conn.fork_gen {
            report_once(
                "OpenCL used in a child after fork(): the parent's connection is not shared",
            );
            return Err(CL_OUT_OF_RESOURCES);
        }
        let enc = guard.request(func).map_err(lost)?;
        Ok(Call {
            guard,
            enc,
            raw: None,
            shape: Shape::new(func),
            named: [0; 4],
            enqueued: (0, 0),
            must_answer: false,
        })
    }

    /// Adds a value to the call's shape.
    pub fn shape(&mut self, v: u64) {
        if v == ANSWER_NEEDED {
            self.must_answer = true;
        } else {
            self.shape.add(v);
        }
    }

    /// The object of a release: shaped by NULL-ness only (see the
    /// generator), since a live handle's release cannot fail on the server.
    pub fn released_handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let id = self.guard.checked.obj(p, kind)?.map_or(0, |o| o.id);
        self.shape(u64::from(id != 0));
        self.enc.u64(id);
        Ok(())
    }

    pub fn handle(&mut self, p: *mut c_void, kind: Kind) -> Result<(), i32> {
        let o = self.guard.checked.obj(p, kind)?;
        let id = o.map_or(0, |o| o.id);
        if let (Kind::Queue, Some(o), 0) = (kind, o, self.enqueued.0) {
            if o.in_order.load(Ordering::Relaxed) {
                self.enqueued.0 = id;
            }
        }
        self.shape(o.map_or(0, |o| o.shape_key()));
        // Whether a handle repeats an earlier one of the same call (a copy
        // from a buffer to itself can fail where one to another cannot).
        if let Some(i) = self.named.iter().position(|&n| n == id && id != 0) {
            self.shape(0x5a4d_0000 + i as u64);
        }
        if let Some(slot) = self.named.iter_mut().find(|n| **n == 0) {
            *slot = id;
        }
        self.enc.u64(id);
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or points to `n` handles.
    pub unsafe fn handles(
        &mut self,
        p: *const *mut c_void,
        n: usize,
        kind: Kind,
    ) -> Result<(), i32> {
        if p.is_null() {
            self.enc.bool(false);
            return Ok(());
        }
        self.enc.bool(true);
        self.enc.u64(n as u64);
        // Which objects a list names does not change what can fail (each
        // is checked here); how many it names may, and so may a NULL among
        // them, which only the library refuses.
        self.shape(n as u64);
        let mut nulls = 0u64;
        for i in 0..n {
            // SAFETY: caller's contract.
            let h = unsafe { *p.add(i) };
            nulls += u64::from(h.is_null());
            self.enc
                .u64(self.guard.checked.obj(h, kind)?.map_or(0, |o| o.id));
        }
        if nulls != 0 {
            self.shape(u64::MAX - nulls);
        }
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or points to `size` readable bytes.
    pub unsafe fn in_bytes(&mut self, p: *const c_void, size: u64) {
        if p.is_null() {
            self.enc.opt_bytes(None);
            return;
        }
        // SAFETY: caller's contract.
        let s = unsafe { std::slice::from_raw_parts(p as *const u8, size as usize) };
        // Small values (work sizes, origins, patterns) can make a call
        // fail; for large data only the length can.
        self.shape(s.len() as u64);
        if s.len() > 32 {
            self.enc.opt_bytes(Some(s));
            return;
        }
        // Encoded as `opt_bytes` would, word by word in the same pass that
        // shapes them: these are a launch's sizes, on every call.
        self.enc.u8(1);
        self.enc.u64(s.len() as u64);
        let mut words = s.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            self.enc.u64(v);
            self.shape(v);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.enc.raw(rest);
            let mut a = [0u8; 8];
            a[..rest.len()].copy_from_slice(rest);
            self.shape(u64::from_le_bytes(a));
        }
    }

    /// # Safety
    /// `p` is NULL or a NUL-terminated string.
    pub unsafe fn str(&mut self, p: *const std::ffi::c_char) {
        if p.is_null() {
            self.shape(0);
            self.enc.opt_bytes(None);
        } else {
            // SAFETY: caller's contract.
            let s = unsafe { std::ffi::CStr::from_ptr(p) };
            // A name decides what a call can fail on (a kernel's, say).
            let mut h = rustc_hash::FxHasher::default();
            s.to_bytes().hash(&mut h);
            self.shape(h.finish() | 1);
            self.enc.opt_bytes(Some(s.to_bytes()));
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
            self.enqueued.1 = id;
            Some(id)
        }
    }

    pub fn new_id(&mut self) -> u64 {
        let id = fresh_id();
        self.enc.u64(id);
        id
    }

    pub fn callback(
        &mut self,
        kind: CallbackKind,
        pfn: *mut c_void,
        user_data: *mut c_void,
    ) -> Result<crate::callbacks::Pending, i32> {
        crate::callbacks::put(self, kind, pfn, user_data)
    }

    /// Streams `len` bytes at `p` after the frame (a bulk transfer).
    ///
    /// # Safety
    /// `p` holds `len` readable bytes until the call is finished.
    pub unsafe fn attach_raw(&mut self, p: *const u8, len: usize) {
        self.raw = Some((p, len));
    }

    /// The bytes `attach_raw` named.
    fn raw(raw: Option<(*const u8, usize)>) -> Option<&'a [u8]> {
        // SAFETY: `attach_raw`'s contract: readable until the call is done.
        raw.map(|(p, len)| unsafe { std::slice::from_raw_parts(p, len) })
    }

    /// Sends the request and waits for the reply.
    pub fn finish(self) -> Result<Reply<'a>, i32> {
        let Call {
            mut guard,
            enc,
            raw,
            enqueued,
            ..
        } = self;
        let a = guard.exchange(enc, Self::raw(raw)).map_err(lost)?;
        guard.note_enqueued(enqueued);
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

    /// Queues a call the description marks async: it stays in the ring
    /// until the next synchronisation point (or, with `wake`, the server is
    /// woken now, as clFlush must), and CL_SUCCESS is returned.
    ///
    /// A call is deferred only once a call of the same shape (the same
    /// function, handles, scalars and small values: all that can make it
    /// fail) has succeeded synchronously. So the first of a kind reports its
    /// own error as natively, and the thousandth repetition in a loop costs
    /// no round trip; a deferred call that fails all the same is reported by
    /// the next `syncpoint` call. With WORMHOLE_SYNC set, every call is made
    /// synchronously.
    pub fn finish_async(self, wake: bool) -> Result<i32, i32> {
        self.defer_or_exchange(wake, true)
    }

    /// As [`Call::finish_async`], for a call that creates an object under an
    /// id this side chose: made synchronously, it reports only its own
    /// status (the object exists exactly when that is CL_SUCCESS), leaving
    /// an earlier deferred failure for the next synchronisation point.
    pub fn finish_async_create(self) -> Result<i32, i32> {
        self.defer_or_exchange(false, false)
    }

    fn defer_or_exchange(mut self, wake: bool, report_deferred: bool) -> Result<i32, i32> {
        let shape = self.shape;
        if self.must_answer || !self.guard.deferrable(shape) {
            let mut r = self.finish()?;
            let own = r.status();
            let status = if report_deferred {
                r.status_with_deferred()
            } else {
                own
            };
            if own == CL_SUCCESS {
                r.guard.succeeded(shape);
            }
            return Ok(status);
        }
        let Call {
            mut guard,
            enc,
            raw,
            enqueued,
            ..
        } = self;
        guard.post(enc, Self::raw(raw), wake).map_err(lost)?;
        guard.note_enqueued(enqueued);
        Ok(CL_SUCCESS)
    }
}

/// Gives the application its handle for an event created by an async call.
///
/// # Safety
/// `p` is NULL or a writable handle slot.
pub unsafe fn adopt_new(id: Option<u64>, p: *mut *mut c_void, kind: Kind) {
    if let (Some(id), false) = (id, p.is_null()) {
        // SAFETY: caller's contract.
        unsafe { *p = object_for(id, kind, 1) };
    }
}

/// Runs `f` on queue `q`'s object with the channel held, if the queue has
/// run everything it was given and nothing has been sent since (as for
/// [`finish_drained`]): a command enqueued now would start at once, and no
/// other thread can send one meanwhile. `f` gets a way to take the failure
/// of an earlier deferred call not yet reported (CL_SUCCESS, 0, if none),
/// to report it or not.
pub fn while_drained<T>(
    q: *mut c_void,
    f: impl FnOnce(&Obj, &mut dyn FnMut() -> i32) -> Option<T>,
) -> Option<T> {
    let conn = conn()?;
    let mut guard = conn.state.lock();
    if FORK_GEN.load(Ordering::Relaxed) != conn.fork_gen || force_sync() {
        return None;
    }
    let o = obj(q, Kind::Queue).ok()??;
    if guard.drained != Some((o.id, guard.sent())) {
        return None;
    }
    f(o, &mut || guard.take_deferred())
}

/// clFinish's answer for a queue that has run everything it was given, with
/// nothing sent to the server since that became known: CL_SUCCESS, or an
/// earlier deferred failure not yet reported, as the server's answer would
/// have been. `None`: the call must go to the server.
pub fn finish_drained(q: *mut c_void) -> Option<i32> {
    while_drained(q, |_, deferred| Some(deferred()))
}

/// The failure of an earlier deferred call not yet reported (CL_SUCCESS if
/// none), now reported.
pub fn take_deferred() -> i32 {
    let Some(conn) = conn() else {
        return CL_OUT_OF_RESOURCES;
    };
    conn.state.lock().take_deferred()
}

/// The application's handle for an object an async call created under `id`.
pub fn adopt_id(id: u64, kind: Kind) -> *mut c_void {
    object_for(id, kind, 1)
}

/// A reply being unmarshalled; still holds the channel.
pub struct Reply<'a> {
    guard: parking_lot::MutexGuard<'a, Chan>,
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
    CL_OUT_OF_RESOURCES
}

impl Reply<'_> {
    pub fn status(&self) -> i32 {
        self.status
    }

    /// Records that queue `q` has nothing left to run now that this call
    /// returned: always (clFinish), or if the queue executes in order (a
    /// transfer the server made blocking). Nothing has been sent since.
    pub fn drained(&mut self, q: *mut c_void, always: bool) {
        if let Ok(Some(o)) = obj(q, Kind::Queue) {
            if always || o.in_order.load(Ordering::Relaxed) {
                self.guard.drained = Some((o.id, self.guard.sent()));
            }
        }
    }

    /// Records, after a wait for `n` events at `list` succeeded, that the
    /// queue whose last command created the one event waited for has
    /// nothing left to run (it executes in order), if nothing but this wait
    /// was sent since that command.
    ///
    /// # Safety
    /// `list` is NULL or holds `n` handles.
    pub unsafe fn waited_for(&mut self, list: *const *mut c_void, n: usize) {
        if n != 1 || list.is_null() {
            return;
        }
        // SAFETY: the caller's contract: one handle.
        let Ok(Some(e)) = obj(unsafe { *list }, Kind::Event) else {
            return;
        };
        let sent = self.guard.sent();
        if let Some((q, ev, at)) = self.guard.last_enqueued {
            if ev == e.id && at + 1 == sent {
                self.guard.drained = Some((q, sent));
            }
        }
    }

    /// The call's status, or, if it succeeded, the failure of an earlier
    /// deferred call not yet reported (which is then reported).
    pub fn status_with_deferred(&mut self) -> i32 {
        if self.status == CL_SUCCESS {
            let d = self.guard.take_deferred();
            if d != 0 {
                return d;
            }
        }
        self.status
    }

    /// Receives the bulk bytes that follow this reply, into `dst`.
    pub fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), i32> {
        self.guard.recv_raw(dst).map_err(lost)
    }

    pub fn has_outputs(&self) -> bool {
        self.has_outputs
    }

    /// A decoder over the rest of the reply.
    pub fn dec(&mut self) -> Decoder<'_> {
        self.cur.rest()
    }

    fn with<T>(&mut self, f: impl FnOnce(&mut Decoder<'_>) -> Result<T, i32>) -> Result<T, i32> {
        self.cur.with(f)
    }

    pub fn opt_flag(&mut self) -> Result<bool, i32> {
        self.with(|d| d.bool().map_err(proto))
    }

    pub fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, i32> {
        self.with(|d| d.opt_bytes().map(|o| o.map(|b| b.to_vec())).map_err(proto))
    }

    /// Copies returned bytes into the application's buffer.
    ///
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

    /// Like `out_bytes`, turning the ids in handle-bearing values into our
    /// objects.
    ///
    /// # Safety
    /// As for `out_bytes`; `first` is the call's first argument.
    pub unsafe fn out_info(
        &mut self,
        p: *mut c_void,
        cap: u64,
        func: u32,
        param: u32,
        first: *mut c_void,
    ) -> Result<(), i32> {
        let status = self.status;
        self.with(|d| {
            let Some(b) = d.opt_bytes().map_err(proto)? else {
                return Ok(());
            };
            if p.is_null() {
                return Ok(());
            }
            let handles = if status == CL_SUCCESS {
                info_handle(func, param)
            } else {
                None
            };
            let Some(handles) = handles else {
                // Plain data, the common case: no copy of our own.
                // SAFETY: the caller's contract.
                unsafe { copy_out(b, p, cap) };
                return Ok(());
            };
            let mut v = b.to_vec();
            match handles {
                InfoHandle::One(k) | InfoHandle::Array(k) => {
                    for c in v.chunks_exact_mut(8) {
                        let id = u64::from_le_bytes(c.try_into().map_err(proto)?);
                        c.copy_from_slice(&(object_for(id, k, 0) as usize).to_le_bytes());
                    }
                }
                InfoHandle::Custom => crate::custom::info(func, param, &mut v, first),
            }
            // SAFETY: the caller's contract.
            unsafe { copy_out(&v, p, cap) };
            Ok(())
        })
    }

    /// # Safety
    /// `p` is NULL or a writable u32.
    pub unsafe fn out_u32(&mut self, p: *mut u32) -> Result<(), i32> {
        let v = self.with(|d| d.u32().map_err(proto))?;
        // SAFETY: the caller's contract.
        unsafe { store(p, v) };
        Ok(())
    }

    /// For `out i32?` arguments (none in the OpenCL description today).
    ///
    /// # Safety
    /// `p` is NULL or a writable i32.
    #[allow(dead_code)]
    pub unsafe fn out_i32(&mut self, p: *mut i32) -> Result<(), i32> {
        let v = self.with(|d| d.i32().map_err(proto))?;
        // SAFETY: the caller's contract.
        unsafe { store(p, v) };
        Ok(())
    }

    /// # Safety
    /// `p` is NULL or a writable u64.
    pub unsafe fn out_u64(&mut self, p: *mut u64) -> Result<(), i32> {
        let v = self.with(|d| d.u64().map_err(proto))?;
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
        if let (Some(id), false, true) = (id, p.is_null(), status == CL_SUCCESS) {
            // SAFETY: caller's contract.
            unsafe { *p = object_for(id, kind, 1) };
        }
    }

    /// # Safety
    /// `p` is NULL or holds `cap` handle slots.
    pub unsafe fn out_handles(
        &mut self,
        p: *mut *mut c_void,
        cap: usize,
        kind: Kind,
    ) -> Result<(), i32> {
        let ids = self.with(|d| {
            if d.bool().map_err(proto)? {
                d.u64s().map_err(proto)
            } else {
                Ok(Vec::new())
            }
        })?;
        if p.is_null() {
            return Ok(());
        }
        // Kernels returned here are new and carry the application's reference.
        let refs = u32::from(kind == Kind::Kernel);
        for (i, id) in ids.into_iter().take(cap).enumerate() {
            // SAFETY: caller's contract; i < cap.
            unsafe { *p.add(i) = object_for(id, kind, refs) };
        }
        Ok(())
    }

    pub fn adopt(&mut self, id: u64, kind: Kind) -> *mut c_void {
        object_for(id, kind, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel argument naming a memory object or sampler the application
    /// released is known as one while the object's memory is quarantined
    /// (nothing else can have its address then), and as bytes after.
    #[test]
    fn a_released_handle_is_known_until_its_memory_can_be_reused() {
        let mem = object_for(1 << 40, Kind::Mem, 1);
        let smp = object_for((1 << 40) + 1, Kind::Sampler, 1);
        let ev = object_for((1 << 40) + 2, Kind::Event, 1);
        assert!(matches!(arg_object(mem), ArgObject::Live(o) if o.kind == Kind::Mem));
        for (p, k) in [(mem, Kind::Mem), (smp, Kind::Sampler), (ev, Kind::Event)] {
            released(p, k);
        }
        assert!(matches!(arg_object(mem), ArgObject::Released(Kind::Mem)));
        assert!(matches!(
            arg_object(smp),
            ArgObject::Released(Kind::Sampler)
        ));
        assert!(
            matches!(arg_object(ev), ArgObject::Bytes),
            "only memory objects and samplers are kernel arguments"
        );
        // Releases of other objects push them out of the quarantine.
        for i in 0..QUARANTINE as u64 {
            let e = object_for((1 << 41) + i, Kind::Event, 1);
            released(e, Kind::Event);
        }
        assert!(matches!(
            arg_object(mem),
            ArgObject::Bytes | ArgObject::Live(_)
        ));
        assert!(!registry().released_args.contains_key(&(mem as usize)));
        assert!(registry().released_args.len() <= QUARANTINE);
    }
}
