//! The cost of marshalling a forwarded call, measured in one process, with no
//! transport: the client's encoding of a `clGetEventInfo` request (as the
//! generated stub writes it), the server's real generated decoder and
//! dispatch (`wormhole_server::opencl::dispatch`, which validates the handle
//! in a real tenant table and calls PoCL), and the client's decoding of the
//! reply. The same call made natively is timed beside it; the difference is
//! what marshalling costs.

use std::ffi::c_void;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use wormhole_opencl_api::{func, info_handle, Kind};
use wormhole_server::opencl::tenant::{Limits, Tenant};
use wormhole_server::opencl::{dispatch, ffi};
use wormhole_wire::{Decoder, Encoder, ReplyHeader, RequestHeader, REPLY_HEADER_LEN};

use crate::native::{check, first_device, Native, NativeError};
use crate::stats::{median, per_call};

const CL_EVENT_COMMAND_EXECUTION_STATUS: u32 = 0x11D3;
/// The id the bench's tenant knows the event by.
const EVENT_ID: u64 = 7;

#[derive(Debug, Error)]
pub enum MarshalError {
    #[error(transparent)]
    Native(#[from] NativeError),
    #[error("bench state: {0}")]
    Internal(&'static str),
    #[error("wire: {0}")]
    Wire(#[from] wormhole_wire::WireError),
}

/// Per-call times in nanoseconds (medians over batches).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct MarshalResult {
    /// clGetEventInfo called directly.
    pub native_ns: f64,
    /// Encode + server decode/validate/call/encode + decode, in process.
    pub inprocess_ns: f64,
    /// `inprocess_ns - native_ns`: marshalling and validation.
    pub marshal_ns: f64,
    /// Request and reply sizes in bytes.
    pub request_bytes: usize,
    pub reply_bytes: usize,
}

/// A completed marker event on the first device, made natively.
fn completed_event() -> Result<*mut c_void, MarshalError> {
    let Native { queue: q, .. } = first_device()?;
    let mut ev = std::ptr::null_mut();
    // SAFETY: `q` is the queue first_device just created (checked); an
    // empty wait list is a count of 0 with a null list, and `ev` is room
    // for the one event returned.
    check("clEnqueueMarkerWithWaitList", unsafe {
        ffi::clEnqueueMarkerWithWaitList(q, 0, std::ptr::null(), &mut ev)
    })?;
    // SAFETY: `q` is the live queue from first_device.
    check("clFinish", unsafe { ffi::clFinish(q) })?;
    // The context, queue and event live until the process ends.
    Ok(ev)
}

/// The client's part of the state a real call touches: the object registry
/// and the channel lock (each a mutex).
struct ClientSide {
    registry: Mutex<rustc_hash::FxHashSet<usize>>,
    chan: Mutex<(Vec<u8>, Vec<u8>)>,
}

/// One full marshalled call; returns the request and reply sizes.
fn one_call(
    c: &ClientSide,
    t: &mut Tenant,
    srv: &mut Vec<u8>,
    ev_obj: usize,
) -> Result<(usize, usize), MarshalError> {
    // Client: look the handle up, lock the channel, encode (as the stub does).
    if !c
        .registry
        .lock()
        .map_err(|_| MarshalError::Internal("registry lock poisoned"))?
        .contains(&ev_obj)
    {
        return Err(MarshalError::Internal("event not registered"));
    }
    let mut g = c
        .chan
        .lock()
        .map_err(|_| MarshalError::Internal("channel lock poisoned"))?;
    let (tx, _) = &mut *g;
    let mut enc = Encoder::with_buffer(std::mem::take(tx));
    RequestHeader {
        func: func::clGetEventInfo,
        flags: 0,
    }
    .encode(&mut enc);
    enc.u64(EVENT_ID);
    enc.u32(CL_EVENT_COMMAND_EXECUTION_STATUS);
    enc.usize(4);
    enc.bool(true);
    enc.bool(true);
    let req = enc.into_vec();
    // Server: exactly what serve() does around the generated dispatch.
    let mut d = Decoder::new(&req);
    let h = RequestHeader::decode(&mut d)?;
    let mut renc = Encoder::with_buffer(std::mem::take(srv));
    ReplyHeader {
        status: 0,
        deferred_status: 0,
    }
    .encode(&mut renc);
    let status = dispatch(t, h.func, &mut d, &mut renc).unwrap_or_else(|s| {
        renc.truncate(REPLY_HEADER_LEN);
        renc.u8(0);
        s
    });
    renc.patch_i32(0, status);
    renc.patch_i32(4, 0);
    let reply = renc.into_vec();
    // Client: decode the reply into the application's out-parameters.
    let mut d = Decoder::new(&reply);
    let hdr = ReplyHeader::decode(&mut d)?;
    check("clGetEventInfo (forwarded)", hdr.status)?;
    let mut value = [0u8; 4];
    let mut size_ret = 0usize;
    if d.u8()? == 1 {
        if let Some(b) = d.opt_bytes()? {
            if info_handle(func::clGetEventInfo, CL_EVENT_COMMAND_EXECUTION_STATUS).is_some() {
                return Err(MarshalError::Internal("event status holds no handle"));
            }
            // Plain data goes straight to the application's buffer.
            let n = b.len().min(4);
            value[..n].copy_from_slice(&b[..n]);
        }
        size_ret = d.usize()?;
    }
    std::hint::black_box((value, size_ret));
    let sizes = (req.len(), reply.len());
    *tx = req;
    *srv = reply;
    Ok(sizes)
}

/// Runs the measurement.
pub fn run(batches: usize, batch: usize) -> Result<MarshalResult, MarshalError> {
    let ev = completed_event()?;
    let mut t = Tenant::new(Vec::new(), Limits::default(), None);
    // The tenant table holds its own reference, as for any event it returns.
    // SAFETY: `ev` is the marker completed_event returned, never released
    // (it lives until the process ends).
    check("clRetainEvent", unsafe { ffi::clRetainEvent(ev) })?;
    t.insert(EVENT_ID, Kind::Event, ev)
        .map_err(|code| NativeError::Cl {
            what: "insert",
            code,
        })?;
    let ev_obj = 0x1000usize;
    let client = ClientSide {
        registry: Mutex::new([ev_obj].into_iter().collect()),
        chan: Mutex::new((Vec::new(), Vec::new())),
    };
    let mut srv = Vec::new();
    let native = || {
        let mut st = 0i32;
        // SAFETY: `ev` is live (see above); `st` is 4 writable bytes, the
        // size passed, for the cl_int status.
        let r = unsafe {
            ffi::clGetEventInfo(
                ev,
                CL_EVENT_COMMAND_EXECUTION_STATUS,
                4,
                (&mut st as *mut i32).cast(),
                std::ptr::null_mut(),
            )
        };
        std::hint::black_box(st);
        check("clGetEventInfo", r)
    };
    let mut sizes = (0, 0);
    // Alternate the two, so drift on a shared machine hits both alike.
    let mut nat = Vec::new();
    let mut inp = Vec::new();
    for _ in 0..5 {
        nat.push(per_call(batches / 5 + 1, batch, native)?);
        inp.push(per_call(batches / 5 + 1, batch, || {
            sizes = one_call(&client, &mut t, &mut srv, ev_obj)?;
            Ok::<(), MarshalError>(())
        })?);
    }
    let native_ns = median(&nat);
    let inprocess_ns = median(&inp);
    Ok(MarshalResult {
        native_ns,
        inprocess_ns,
        marshal_ns: (inprocess_ns - native_ns).max(0.0),
        request_bytes: sizes.0,
        reply_bytes: sizes.1,
    })
}
