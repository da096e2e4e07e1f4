//! The connection to the server, made on first use: one channel that every
//! call holds while it marshals ([`Call`]) and unmarshals ([`Reply`]), the
//! fork and caller counts that decide how it may be used, and the arena of
//! buffers shared with the server.

mod call;
mod reply;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use wormhole_client::{Link, LinkError};
use wormhole_opencl_api::{CL_OUT_OF_RESOURCES, CL_SUCCESS};
use wormhole_transport::stream::StreamNotes;
use wormhole_transport::TransportError;

use crate::objects::Checked;

pub use call::{
    finish_drained, info_value, marker_on_drained, set_errcode, take_deferred, while_drained, Call,
    ANSWER_NEEDED,
};
pub use reply::Reply;

/// Prints one line on stderr when `WORMHOLE_LOG` is set.
pub fn log(msg: &str) {
    wormhole_client::log(PREFIX, msg);
}

/// See [`wormhole_client::report_once`].
pub fn report_once(msg: &str) {
    wormhole_client::report_once(PREFIX, msg);
}

/// What this library's log lines start with.
const PREFIX: &str = "wormhole";

/// What a call holds while it marshals: the channel, and the handles it
/// need not look up again.
pub struct Chan {
    link: Link,
    checked: Checked,
    /// A queue known to have nothing left to run, and the [`Chan::epoch`]
    /// when that became known: while nothing else has been sent, a
    /// clFinish of that queue needs no round trip.
    drained: Option<(u64, u64)>,
    /// The last command sent that created an event on an in-order queue:
    /// the queue, the event and the epoch with it. Awaited with nothing
    /// sent in between, it drains the queue.
    last_enqueued: Option<(u64, u64, u64)>,
    /// Frames sent that can change no queue's work (an event's retain or
    /// release), which therefore leave a drained queue drained.
    inert: u64,
}

impl Chan {
    /// Frames sent so far that may have given a queue work: what
    /// `drained` and `last_enqueued` are dated by.
    pub(super) fn epoch(&self) -> u64 {
        self.sent() - self.inert
    }

    /// Accounts for a frame just sent: `inert` (see [`Chan::inert`]), or
    /// else, if it was an enqueue on an in-order queue that made an
    /// event, that enqueue.
    fn note_sent(&mut self, inert: bool, (queue, event): (u64, u64)) {
        if inert {
            self.inert += 1;
        } else if queue != 0 && event != 0 {
            self.last_enqueued = Some((queue, event, self.epoch()));
        }
    }
}

impl wormhole_client::HoldsLink for Chan {
    fn link(&mut self) -> &mut Link {
        &mut self.link
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
        // SAFETY: the handler only touches an atomic, which is allowed in a child after fork(), and
        // its code is never unmapped (the library is linked `-z nodelete`, watch_forks' doc).
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
            inert: 0,
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

/// What the application sees when the server is gone or misbehaves.
fn lost(e: LinkError) -> i32 {
    report_once(&e.to_string());
    CL_OUT_OF_RESOURCES
}
