//! Callbacks. A client's function pointer means nothing here, so the server
//! registers its own trampoline and posts a notification (a token chosen by
//! the client) on the tenant's notification ring, or in band over TCP; the
//! client's notifier thread calls the application's function.

use std::ffi::c_void;
use std::sync::Arc;

use wormhole_opencl_api::{notify, CallbackKind, CL_INVALID_OPERATION};
use wormhole_transport::Notify;
use wormhole_wire::{Decoder, Encoder};

use super::tenant::{bad, Tenant};

/// A callback as passed to the real library.
pub struct CallbackArg {
    func: *mut c_void,
    data: *mut c_void,
}

impl CallbackArg {
    pub fn func(&self) -> *mut c_void {
        self.func
    }
    pub fn data(&self) -> *mut c_void {
        self.data
    }
}

/// What the library sees as user data given without a callback.
static NO_CALLBACK_DATA: u8 = 0;

struct Registration {
    notify: Arc<dyn Notify>,
    token: u64,
}

pub fn decode(t: &mut Tenant, d: &mut Decoder<'_>, kind: CallbackKind) -> Result<CallbackArg, i32> {
    let none = CallbackArg {
        func: std::ptr::null_mut(),
        data: std::ptr::null_mut(),
    };
    if !d.bool().map_err(bad)? {
        // No callback. The client's user data is only said to exist: the
        // library gets a stand-in, which it never dereferences without a
        // callback to pass it to, so that it reports that error itself.
        let data = if d.bool().map_err(bad)? {
            std::ptr::addr_of!(NO_CALLBACK_DATA) as *mut c_void
        } else {
            std::ptr::null_mut()
        };
        return Ok(CallbackArg {
            func: std::ptr::null_mut(),
            data,
        });
    }
    match kind {
        // Context notifications are not forwarded; build notifications run
        // on the client once the (synchronous) build returns.
        CallbackKind::Ctx | CallbackKind::Program => Ok(none),
        CallbackKind::Event | CallbackKind::Memdtor => {
            let token = d.u64().map_err(bad)?;
            let notify = t.notify.clone().ok_or(CL_INVALID_OPERATION)?;
            let data = Box::into_raw(Box::new(Registration { notify, token })) as *mut c_void;
            let func = match kind {
                CallbackKind::Event => event_trampoline as *mut c_void,
                _ => memdtor_trampoline as *mut c_void,
            };
            Ok(CallbackArg { func, data })
        }
    }
}

extern "C" fn event_trampoline(_event: *mut c_void, status: i32, data: *mut c_void) {
    // SAFETY: `data` is the Box leaked in `decode` for this registration; the
    // library calls an event callback exactly once, so it is reclaimed once.
    let reg = unsafe { Box::from_raw(data as *mut Registration) };
    let mut e = Encoder::new();
    e.u8(notify::EVENT_CALLBACK);
    e.u64(reg.token);
    e.i32(status);
    if let Err(err) = reg.notify.notify(e.as_slice()) {
        log::warn!("event callback lost: {err}");
    }
}

extern "C" fn memdtor_trampoline(_mem: *mut c_void, data: *mut c_void) {
    // SAFETY: `data` is the Box leaked in `decode` for this registration; the
    // library calls a destructor callback exactly once, so it is reclaimed
    // once.
    let reg = unsafe { Box::from_raw(data as *mut Registration) };
    let mut e = Encoder::new();
    e.u8(notify::MEM_DESTRUCTOR);
    e.u64(reg.token);
    if let Err(err) = reg.notify.notify(e.as_slice()) {
        log::warn!("destructor callback lost: {err}");
    }
}
