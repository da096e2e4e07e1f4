//! Callbacks. Build notifications run here when the (synchronous) call
//! returns. Event and destructor callbacks are registered under a token; the
//! server posts the token when the callback fires (on the notification ring,
//! or in band over TCP), and the notifier thread (asleep on a futex or in
//! `poll` until then) calls the application's function.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use wormhole_opencl_api::{notify, CallbackKind, CL_SUCCESS};
use wormhole_transport::shm::NotifyReceiver;
use wormhole_transport::stream::StreamNotes;
use wormhole_transport::TransportError;
use wormhole_wire::Decoder;

use crate::connection::{fresh_id, log, Call};

type EventFn = unsafe extern "C" fn(*mut c_void, i32, *mut c_void);
type ObjFn = unsafe extern "C" fn(*mut c_void, *mut c_void);

struct Registered {
    pfn: usize,
    user_data: usize,
    /// The application's event or memory object, filled in by `fire`.
    obj: usize,
    kind: CallbackKind,
}

/// Destructor callbacks registered and not yet run. While there are any,
/// releases wake the server: the last release of an object (or of one that
/// holds it, such as a sub-buffer) runs its destructor, which the
/// application may be waiting for. Otherwise releases wait in the ring for
/// the next call that needs the server.
static DESTRUCTORS: AtomicUsize = AtomicUsize::new(0);

pub fn destructors_pending() -> bool {
    DESTRUCTORS.load(Ordering::Acquire) != 0
}

fn tokens() -> std::sync::MutexGuard<'static, HashMap<u64, Registered>> {
    static T: OnceLock<Mutex<HashMap<u64, Registered>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// A callback argument of a call in flight.
pub struct Pending {
    kind: CallbackKind,
    pfn: *mut c_void,
    user_data: *mut c_void,
    token: Option<u64>,
}

/// Calls a program's build `pfn_notify`, if there is one, as the build
/// returns (on the calling thread).
///
/// # Safety
/// `pfn` is NULL or the application's `pfn_notify` for `program`.
pub unsafe fn notify_program(pfn: *mut c_void, program: *mut c_void, user_data: *mut c_void) {
    if pfn.is_null() || program.is_null() {
        return;
    }
    // SAFETY: the application gave this function for this purpose, with
    // this signature (OpenCL's pfn_notify).
    let f: ObjFn = unsafe { std::mem::transmute::<*mut c_void, ObjFn>(pfn) };
    // SAFETY: calling the application's callback as specified.
    unsafe { f(program, user_data) };
}

pub fn put(
    c: &mut Call,
    kind: CallbackKind,
    pfn: *mut c_void,
    user_data: *mut c_void,
) -> Result<Pending, i32> {
    let mut p = Pending {
        kind,
        pfn,
        user_data,
        token: None,
    };
    c.enc.bool(!pfn.is_null());
    if pfn.is_null() {
        // Only whether there is user data: given without a callback it is
        // an error (CL_INVALID_VALUE) that the library reports.
        c.enc.bool(!user_data.is_null());
        return Ok(p);
    }
    // Context notifications are not forwarded, and a build notification
    // runs here once the build returns (`Pending::fire`); event and
    // destructor callbacks come back from the server by token.
    if matches!(kind, CallbackKind::Event | CallbackKind::Memdtor) {
        crate::connection::watch_stream_notes();
        if kind == CallbackKind::Memdtor {
            DESTRUCTORS.fetch_add(1, Ordering::AcqRel);
        }
        let token = fresh_id();
        tokens().insert(
            token,
            Registered {
                pfn: pfn as usize,
                user_data: user_data as usize,
                obj: 0,
                kind,
            },
        );
        c.enc.u64(token);
        p.token = Some(token);
    }
    Ok(p)
}

impl Pending {
    /// Completes the registration once the call's status is known; runs a
    /// build notification now.
    pub fn fire(self, status: i32, obj: *mut c_void) {
        match self.kind {
            // SAFETY: the application gave this callback for this object.
            CallbackKind::Program => unsafe { notify_program(self.pfn, obj, self.user_data) },
            CallbackKind::Event | CallbackKind::Memdtor => {
                if let Some(t) = self.token {
                    let mut reg = tokens();
                    if status == CL_SUCCESS {
                        if let Some(r) = reg.get_mut(&t) {
                            r.obj = obj as usize;
                        }
                    } else if let Some(r) = reg.remove(&t) {
                        forget(&r);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Accounts for a registration that leaves the table.
fn forget(r: &Registered) {
    if r.kind == CallbackKind::Memdtor {
        DESTRUCTORS.fetch_sub(1, Ordering::AcqRel);
    }
}

fn deliver(frame: &[u8]) -> Result<(), wormhole_wire::WireError> {
    let mut d = Decoder::new(frame);
    let what = d.u8()?;
    let token = d.u64()?;
    // The registration may still be completing on the calling thread (the
    // callback can fire before the reply is read); wait for its object.
    let mut reg = None;
    for _ in 0..10_000 {
        let mut t = tokens();
        match t.get(&token) {
            Some(r) if r.obj != 0 => {
                reg = t.remove(&token);
                if let Some(r) = &reg {
                    forget(r);
                }
                break;
            }
            Some(_) => {}
            None => break,
        }
        drop(t);
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    let Some(r) = reg else { return Ok(()) };
    match (what, r.kind) {
        (notify::EVENT_CALLBACK, CallbackKind::Event) => {
            let status = d.i32()?;
            // An end the server saw (complete or failed) is the event's
            // for good; a callback for an earlier state is not.
            crate::event_state::note_status(r.obj as *mut c_void, status);
            // SAFETY: the application registered this function for event
            // callbacks, with OpenCL's signature.
            let f: EventFn = unsafe { std::mem::transmute::<usize, EventFn>(r.pfn) };
            // SAFETY: calling the application's callback as specified.
            unsafe { f(r.obj as *mut c_void, status, r.user_data as *mut c_void) };
        }
        (notify::MEM_DESTRUCTOR, CallbackKind::Memdtor) => {
            // SAFETY: the application registered this function as a memory-object destructor
            // callback (clSetMemObjectDestructorCallback), with OpenCL's signature for it.
            let f: ObjFn = unsafe { std::mem::transmute::<usize, ObjFn>(r.pfn) };
            // SAFETY: calling the application's callback as specified.
            unsafe { f(r.obj as *mut c_void, r.user_data as *mut c_void) };
        }
        _ => log("unexpected notification"),
    }
    Ok(())
}

/// Starts the notifier thread, which sleeps until the server posts.
pub fn start_notifier(mut rx: NotifyReceiver) {
    spawn_notifier(move |buf| rx.recv(buf));
}

/// Over TCP: starts the notifier thread, which reads the socket itself
/// (holding the channel's lock) when no call is in flight.
pub fn start_stream_notifier(
    mut notes: StreamNotes,
    mut pump: impl FnMut() -> Result<(), TransportError> + Send + 'static,
) {
    spawn_notifier(move |buf| notes.recv(buf, &mut pump));
}

fn spawn_notifier(
    mut next: impl FnMut(&mut Vec<u8>) -> Result<(), TransportError> + Send + 'static,
) {
    let r = std::thread::Builder::new()
        .name("wormhole-notify".into())
        .spawn(move || {
            crate::connection::not_a_caller();
            let mut buf = Vec::new();
            while next(&mut buf).is_ok() {
                if let Err(e) = deliver(&buf) {
                    log(&format!("bad notification: {e}"));
                }
            }
        });
    if let Err(e) = r {
        log(&format!("no notifier thread: {e}"));
    }
}
