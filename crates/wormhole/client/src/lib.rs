//! The call/reply cycle every Wormhole client library shares.
//!
//! An API's client (the OpenCL ICD, the CUDA runtime stand-in) marshals its
//! arguments its own way, but moves frames the same way: one [`Link`] per
//! process, behind the API's mutex; a request that needs an answer waits
//! for it ([`Link::exchange`]); one that does not is left in the ring
//! ([`Link::post`]) once a call of the same [`Shape`] has succeeded
//! synchronously ([`Link::deferrable`]), so that the first of a kind reports its
//! own error as natively and a deferred failure is carried back by the next
//! answer. What the API reports for a lost server, and how it records
//! errors, stays with the API.

mod held;

pub use held::{Held, HoldsLink, Sent};
use rustc_hash::FxHashSet;
use std::ffi::c_void;
use std::sync::OnceLock;

use thiserror::Error;
use wormhole_transport::{Channel, TransportError};
use wormhole_wire::{
    Decoder, Encoder, ReplyHeader, RequestHeader, WireError, FLAG_ASYNC, REPLY_HEADER_LEN,
};

/// Prints `prefix: msg` on stderr when `WORMHOLE_LOG` is set.
pub fn log(prefix: &str, msg: &str) {
    if std::env::var_os("WORMHOLE_LOG").is_some() {
        eprintln!("{prefix}: {msg}");
    }
}

/// Like [`log`], but the first such line of the library is printed even
/// without `WORMHOLE_LOG`: for failures the application sees only as an
/// error code on every later call (a lost server, a forked child), where
/// one line says why and a line per call would flood.
pub fn report_once(prefix: &str, msg: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        log(prefix, msg);
    } else {
        eprintln!("{prefix}: {msg}");
    }
}

/// Why a call did not get through.
#[derive(Debug, Error)]
pub enum LinkError {
    #[error("lost the server: {0}")]
    Lost(#[from] TransportError),
    #[error("the server's reply is malformed")]
    BadReply,
    #[error("the connection was lost earlier")]
    Dead,
}

/// One process's channel to its server and what travels with it.
pub struct Link {
    chan: Box<dyn Channel>,
    /// The first failure of a deferred call not yet reported.
    deferred: i32,
    /// Buffers kept from one call to the next.
    rx: Vec<u8>,
    tx: Vec<u8>,
    dead: bool,
    /// Shapes of calls that succeeded synchronously. Kept here, under the
    /// lock every call already holds, rather than behind a lock of its own.
    shapes: FxHashSet<u64>,
    /// The shapes last found in `shapes`, by their top bits: a loop repeats
    /// a handful of shapes, and this spares each call the hash lookup.
    recent: [u64; 16],
    /// Frames sent so far: tells whether anything went to the server
    /// between two points of a client's choosing.
    sent: u64,
    /// Of those, the ones that waited for an answer.
    exchanged: u64,
    /// The function of the request being built.
    func: u32,
    /// Round trips per function id, for `WORMHOLE_LOG`'s report: which
    /// calls still wait for the server is what to look at next. Indexed by
    /// `count_slot`.
    exchanged_by: Vec<u64>,
}

/// Where a function's round trips are counted: each API's ids start at a
/// multiple of 0x10000 (OpenCL at 0, CUDA's libraries at 0x10000 up) and
/// are fewer than 0x1000, so the counts stay a short dense vector.
fn count_slot(func: u32) -> Option<usize> {
    (func & 0xf000 == 0 && func >> 16 < 16)
        .then_some((((func >> 16) << 12) | (func & 0xfff)) as usize)
}

/// A reply: its status and the outputs after its header.
pub struct Answer {
    pub status: i32,
    pub has_outputs: bool,
    /// Where the outputs are read from.
    pub cursor: Cursor,
    /// A deferred call's failure this reply carried, if it is news.
    pub deferred_news: Option<i32>,
}

impl Link {
    pub fn new(chan: Box<dyn Channel>) -> Self {
        Link {
            chan,
            deferred: 0,
            rx: Vec::new(),
            tx: Vec::new(),
            dead: false,
            shapes: FxHashSet::default(),
            recent: [0; 16],
            sent: 0,
            exchanged: 0,
            func: 0,
            exchanged_by: Vec::new(),
        }
    }

    /// Whether a call of this shape may be left in the ring: one of the
    /// same shape succeeded synchronously, and WORMHOLE_SYNC is not set.
    pub fn deferrable(&mut self, s: Shape) -> bool {
        if force_sync() {
            return false;
        }
        let slot = &mut self.recent[(s.0 >> 60) as usize];
        if *slot == s.0 && s.0 != 0 {
            return true;
        }
        let known = self.shapes.contains(&s.0);
        if known {
            *slot = s.0;
        }
        known
    }

    /// Records that a call of this shape succeeded. The set is bounded: when
    /// full it starts again, which costs only round trips.
    pub fn succeeded(&mut self, s: Shape) {
        if self.shapes.len() >= 1 << 16 {
            self.shapes.clear();
            self.recent = [0; 16];
        }
        self.shapes.insert(s.0);
    }

    /// Starts a request for function `func`.
    pub fn request(&mut self, func: u32) -> Result<Encoder, LinkError> {
        if self.dead {
            return Err(LinkError::Dead);
        }
        let mut enc = Encoder::with_buffer(std::mem::take(&mut self.tx));
        RequestHeader { func, flags: 0 }.encode(&mut enc);
        self.func = func;
        Ok(enc)
    }

    fn lost(&mut self, e: TransportError) -> LinkError {
        self.dead = true;
        LinkError::Lost(e)
    }

    /// How many requests have been sent (posted or exchanged).
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// How many requests have waited for an answer: round trips.
    pub fn exchanged(&self) -> u64 {
        self.exchanged
    }

    /// Round trips so far by function id, the most frequent first.
    pub fn exchanged_by_func(&self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = (0u32..)
            .map(|i| ((i >> 12) << 16) | (i & 0xfff))
            .zip(self.exchanged_by.iter().copied())
            .filter(|&(_, n)| n > 0)
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    fn send(&mut self, frame: &[u8], raw: Option<&[u8]>) -> Result<(), TransportError> {
        self.sent += 1;
        self.chan.send(frame)?;
        if let Some(data) = raw {
            self.chan.send_raw(data)?;
        }
        Ok(())
    }

    /// Sends a request (and `raw`, streamed after it) and waits for the
    /// reply.
    pub fn exchange(&mut self, enc: Encoder, raw: Option<&[u8]>) -> Result<Answer, LinkError> {
        self.exchanged += 1;
        if let Some(f) = count_slot(self.func) {
            if f >= self.exchanged_by.len() {
                self.exchanged_by.resize(f + 1, 0);
            }
            self.exchanged_by[f] += 1;
        }
        let sent = self
            .send(enc.as_slice(), raw)
            .and_then(|_| self.chan.flush());
        self.tx = enc.into_vec();
        let mut rx = std::mem::take(&mut self.rx);
        if let Err(e) = sent.and_then(|_| self.chan.recv(&mut rx)) {
            return Err(self.lost(e));
        }
        let mut d = Decoder::new(&rx);
        let hdr = ReplyHeader::decode(&mut d).map_err(|_| LinkError::BadReply)?;
        let has_outputs = matches!(d.u8(), Ok(1));
        let mut deferred_news = None;
        if hdr.deferred_status != 0 && self.deferred == 0 {
            self.deferred = hdr.deferred_status;
            deferred_news = Some(hdr.deferred_status);
        }
        Ok(Answer {
            status: hdr.status,
            has_outputs,
            cursor: Cursor {
                buf: rx,
                pos: REPLY_HEADER_LEN + 1,
            },
            deferred_news,
        })
    }

    /// Leaves a request that needs no answer in the ring; `wake` wakes the
    /// server now (a flush) instead of at the next exchange.
    pub fn post(
        &mut self,
        mut enc: Encoder,
        raw: Option<&[u8]>,
        wake: bool,
    ) -> Result<(), LinkError> {
        enc.patch_i32(4, FLAG_ASYNC as i32);
        let mut r = self.send(enc.as_slice(), raw);
        if wake && r.is_ok() {
            r = self.chan.flush();
        }
        self.tx = enc.into_vec();
        r.map_err(|e| self.lost(e))
    }

    /// Receives the bytes a reply says follow it.
    pub fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), LinkError> {
        self.chan.recv_raw(dst).map_err(|e| self.lost(e))
    }

    /// Reads the notifications waiting on an in-band channel (TCP); the
    /// caller holds the lock every call holds, so none is in flight.
    pub fn pump_notes(&mut self) -> Result<(), LinkError> {
        if self.dead {
            return Err(LinkError::Dead);
        }
        self.chan.pump_notes().map_err(|e| self.lost(e))
    }

    /// The earliest deferred failure not yet reported, now reported.
    pub fn take_deferred(&mut self) -> i32 {
        std::mem::take(&mut self.deferred)
    }

    /// Gives a reply's buffer back for the next call.
    pub fn recycle(&mut self, c: &mut Cursor) {
        self.rx = std::mem::take(&mut c.buf);
    }
}

/// A reading position in a reply's outputs.
pub struct Cursor {
    buf: Vec<u8>,
    pos: usize,
}

impl Cursor {
    /// A decoder over what is left; [`Cursor::with`] also moves past what
    /// it read.
    pub fn rest(&self) -> Decoder<'_> {
        Decoder::new(&self.buf[self.pos.min(self.buf.len())..])
    }

    /// Runs `f` over what is left and moves past what it read.
    pub fn with<T, E>(&mut self, f: impl FnOnce(&mut Decoder<'_>) -> Result<T, E>) -> Result<T, E> {
        let start = self.pos.min(self.buf.len());
        let mut d = Decoder::new(&self.buf[start..]);
        let v = f(&mut d)?;
        self.pos = start + d.position();
        Ok(v)
    }

    /// Reads the next output with `read` and stores it at `p`. At NULL it
    /// is read all the same, so that the outputs after it are found.
    ///
    /// # Safety
    /// `p` is NULL or points to a writable `T`.
    pub unsafe fn out<T>(
        &mut self,
        p: *mut T,
        read: impl FnOnce(&mut Decoder<'_>) -> Result<T, WireError>,
    ) -> Result<(), WireError> {
        let v = self.with(read)?;
        // SAFETY: `p` is NULL or a writable `T` (this function's contract,
        // which its callers have from the application's out-parameter), as
        // `store` needs.
        unsafe { store(p, v) };
        Ok(())
    }

    /// Reads the next output, optional bytes, and copies what the reply
    /// holds of them to `p`, at most `cap`.
    ///
    /// # Safety
    /// `p` is NULL or holds `cap` writable bytes.
    pub unsafe fn out_bytes(&mut self, p: *mut c_void, cap: u64) -> Result<(), WireError> {
        self.with(|d| {
            if let Some(b) = d.opt_bytes()? {
                // SAFETY: `p` is NULL or holds `cap` writable bytes (this
                // function's contract), as `copy_out` needs; it copies at
                // most `cap` of the reply's bytes.
                unsafe { copy_out(b, p, cap) };
            }
            Ok(())
        })
    }
}

/// Writes an output value where the application asked for it.
///
/// # Safety
/// `p` is NULL or points to a writable `T`.
pub unsafe fn store<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: `p` is non-NULL (checked above) and points to a writable
        // `T` (this function's contract).
        unsafe { p.write(v) };
    }
}

/// Copies returned bytes into the application's buffer, at most `cap`.
///
/// # Safety
/// `p` is NULL or holds `cap` writable bytes.
pub unsafe fn copy_out(b: &[u8], p: *mut c_void, cap: u64) {
    if !p.is_null() {
        let n = b.len().min(usize::try_from(cap).unwrap_or(usize::MAX));
        // SAFETY: `p` is non-NULL (checked above) and holds `cap` writable
        // bytes (this function's contract); `n` is at most `cap` and at most
        // `b`'s length, and the reply's bytes are ours, apart from `p`.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p as *mut u8, n) };
    }
}

/// What can make a call fail: its function, handles, scalars and small
/// values, hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape(u64);

impl Shape {
    pub fn new(func: u32) -> Self {
        Shape(0xcbf2_9ce4_8422_2325 ^ func as u64)
    }

    pub fn add(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(29);
    }

    /// Adds a string's bytes (never 0, which stands for NULL).
    pub fn add_bytes(&mut self, bytes: &[u8]) {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        bytes.hash(&mut h);
        self.add(h.finish() | 1);
    }
}

/// Encodes the slot of a new handle the application gets through a pointer:
/// whether it wants one and, if so, the fresh id `fresh` gives (the client
/// names every new object), which is returned.
pub fn put_new_slot(enc: &mut Encoder, wanted: bool, fresh: impl FnOnce() -> u64) -> Option<u64> {
    enc.bool(wanted);
    let id = wanted.then(fresh)?;
    enc.u64(id);
    Some(id)
}

/// Encodes a C string argument, NULL as none, and adds it to the call's
/// shape: a name or an id string decides what a call can fail on.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives the call.
pub unsafe fn put_c_str(enc: &mut Encoder, shape: &mut Shape, p: *const std::ffi::c_char) {
    if p.is_null() {
        shape.add(0);
        enc.opt_bytes(None);
        return;
    }
    // SAFETY: `p` is non-NULL (checked above) and NUL-terminated by this fn's contract; the
    // borrow ends before we return.
    let s = unsafe { std::ffi::CStr::from_ptr(p) };
    shape.add_bytes(s.to_bytes());
    enc.opt_bytes(Some(s.to_bytes()));
}

/// Whether every call is forwarded synchronously (WORMHOLE_SYNC=1), so that
/// errors come back from the call that caused them.
pub fn force_sync() -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    *S.get_or_init(|| std::env::var_os("WORMHOLE_SYNC").is_some_and(|v| v != "0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wormhole_transport::stream::StreamChannel;
    use wormhole_wire::ReplyHeader;

    /// A server thread that answers each request with its function id as
    /// the status, and a deferred failure once.
    fn echo_server(
        mut s: StreamChannel<std::os::unix::net::UnixStream>,
    ) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut first = true;
            while s.recv(&mut buf).is_ok() {
                let mut d = Decoder::new(&buf);
                let Ok(h) = RequestHeader::decode(&mut d) else {
                    return;
                };
                if h.flags & FLAG_ASYNC != 0 {
                    continue;
                }
                let mut e = Encoder::new();
                ReplyHeader {
                    status: h.func as i32,
                    deferred_status: if first { -7 } else { 0 },
                }
                .encode(&mut e);
                first = false;
                e.u8(1);
                e.u32(42);
                if s.send(e.as_slice()).and_then(|_| s.flush()).is_err() {
                    return;
                }
            }
        })
    }

    #[test]
    fn exchanges_posts_and_reports_a_deferred_failure_once() {
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let server = echo_server(StreamChannel::unix(b).expect("server end"));
        let mut link = Link::new(Box::new(StreamChannel::unix(a).expect("client end")));
        let enc = link.request(5).expect("request");
        link.post(enc, None, false).expect("post");
        let enc = link.request(9).expect("request");
        let mut ans = link.exchange(enc, None).expect("exchange");
        assert_eq!(ans.status, 9);
        assert!(ans.has_outputs);
        assert_eq!(ans.deferred_news, Some(-7));
        assert_eq!(ans.cursor.with(|d| d.u32()).expect("output"), 42);
        link.recycle(&mut ans.cursor);
        assert_eq!(link.take_deferred(), -7);
        assert_eq!(link.take_deferred(), 0);
        let enc = link.request(3).expect("request");
        assert_eq!(link.exchange(enc, None).expect("again").deferred_news, None);
        assert_eq!((link.sent(), link.exchanged()), (3, 2));
        assert_eq!(link.exchanged_by_func(), vec![(3, 1), (9, 1)]);
        drop(link);
        server.join().expect("server thread");
    }

    #[test]
    fn a_call_waits_until_its_shape_has_succeeded_then_is_posted() {
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let server = echo_server(StreamChannel::unix(b).expect("server end"));
        let mut link = Link::new(Box::new(StreamChannel::unix(a).expect("client end")));
        // Function 0: the echo server answers status 0, success.
        let s = Shape::new(0);
        let enc = link.request(0).expect("request");
        let Sent::Answered(mut held) =
            Held::send(&mut link, enc, None, s, false, false, "test").expect("send")
        else {
            panic!("the first call of its shape was posted");
        };
        assert_eq!(held.status, 0);
        assert_eq!(held.status_with_deferred(), -7, "the deferred failure");
        assert_eq!(held.status_with_deferred(), 0, "reported once");
        held.learn(s, held.status);
        drop(held);
        let enc = link.request(0).expect("request");
        let sent = Held::send(&mut link, enc, None, s, false, false, "test").expect("send");
        assert_eq!(matches!(sent, Sent::Posted(_)), !force_sync());
        drop(sent);
        let enc = link.request(0).expect("request");
        let sent = Held::send(&mut link, enc, None, s, true, false, "test").expect("send");
        assert!(matches!(sent, Sent::Answered(_)), "an answer was needed");
        drop(sent);
        let mut t = Shape::new(0);
        t.add(1);
        let enc = link.request(0).expect("request");
        match Held::send(&mut link, enc, None, t, false, false, "test").expect("send") {
            Sent::Answered(mut held) => held.learn(t, 5),
            Sent::Posted(_) => panic!("an unknown shape was posted"),
        }
        assert!(!link.deferrable(t), "a failure teaches nothing");
        drop(link);
        server.join().expect("server thread");
    }

    #[test]
    fn a_lost_server_is_reported_and_remembered() {
        let (a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
        drop(b);
        let mut link = Link::new(Box::new(StreamChannel::unix(a).expect("client end")));
        let enc = link.request(1).expect("request");
        assert!(matches!(link.exchange(enc, None), Err(LinkError::Lost(_))));
        assert!(matches!(link.request(1), Err(LinkError::Dead)));
    }

    /// A reply's outputs: a u32, optional bytes, a u64.
    fn outputs() -> Cursor {
        let mut e = Encoder::new();
        e.u32(7);
        e.opt_bytes(Some(b"abcdef"));
        e.u64(9);
        Cursor {
            buf: e.as_slice().to_vec(),
            pos: 0,
        }
    }

    #[test]
    fn outputs_are_stored_where_asked_and_skipped_at_null() {
        let mut c = outputs();
        let mut v = 0u32;
        let mut bytes = [0u8; 4];
        let mut w = 0u64;
        // SAFETY: each pointer is a writable value of its type, or 4 bytes.
        unsafe {
            c.out(&mut v, |d| d.u32()).expect("u32");
            c.out_bytes(bytes.as_mut_ptr().cast(), 4).expect("bytes");
            c.out(&mut w, |d| d.u64()).expect("u64");
        }
        assert_eq!(
            (v, &bytes, w),
            (7, b"abcd", 9),
            "bytes cut at the room given"
        );
        // At NULL each is still read past: the u64 is found after them.
        let mut c = outputs();
        let mut w = 0u64;
        // SAFETY: NULL, or a writable u64.
        unsafe {
            c.out(std::ptr::null_mut::<u32>(), |d| d.u32())
                .expect("u32");
            c.out_bytes(std::ptr::null_mut(), 0).expect("bytes");
            c.out(&mut w, |d| d.u64()).expect("u64");
        }
        assert_eq!(w, 9);
        // Past the end: an error, and nothing stored.
        let mut past = 5u64;
        // SAFETY: a writable u64.
        assert!(unsafe { c.out(&mut past, |d| d.u64()) }.is_err());
        assert_eq!(past, 5);
    }

    #[test]
    fn shapes_are_learned() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        let mut link = Link::new(Box::new(StreamChannel::unix(a).expect("client end")));
        let mut s = Shape::new(77);
        s.add(1);
        assert!(!link.deferrable(s));
        link.succeeded(s);
        assert_eq!(link.deferrable(s), !force_sync());
        let mut t = Shape::new(77);
        t.add(2);
        assert!(!link.deferrable(t));
    }
}
