//! Frames over a byte stream (TCP between hosts, or a Unix socket): the
//! baseline that GVirtuS and rCUDA use, and the transport between hosts.
//!
//! A stream has no ring of its own for notifications (callbacks that fired
//! on the server), so they travel in band: a frame whose length prefix has
//! [`NOTE_BIT`] set. They never split a reply: from a reply's first `send`
//! to its `end_reply` (bulk bytes included), a notification waits in the
//! server's outbox. The client files the notifications it meets while it
//! waits for a reply in its [`Inbox`]; with no call in flight, its notifier
//! thread reads them itself ([`Channel::pump_notes`], under the lock every
//! call holds, so that what it reads cannot be a reply).

use std::collections::VecDeque;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::shm::{read_body, DEFAULT_MAX_FRAME};
use crate::{Channel, Notify, TransportError};

/// Marks a frame's length as a notification's.
pub const NOTE_BIT: u64 = 1 << 63;
/// The largest notification a client takes (they are a few bytes).
const MAX_NOTE: u64 = 1 << 16;
/// Notifications a client keeps unread before it calls the server broken.
const MAX_WAITING_NOTES: usize = 1 << 16;

/// What a stream's writer shares with the server's notification senders.
struct Outbox<S: Write> {
    w: BufWriter<S>,
    /// A reply is being written: notifications wait in `held`.
    in_reply: bool,
    held: Vec<u8>,
}

/// A framed channel over any stream that can be split into a reader and a
/// writer.
pub struct StreamChannel<S: Read + Write> {
    reader: BufReader<S>,
    out: Arc<Mutex<Outbox<S>>>,
    max_frame: u64,
    /// The reader's socket, for a readiness check before reading
    /// notifications.
    fd: Option<RawFd>,
    /// Client: where notifications read with the replies go.
    inbox: Option<Arc<Inbox>>,
}

/// How long a TCP peer may stay unreachable before either side gives the
/// connection up, unless configured (`tcp_dead_peer`, `WORMHOLE_TCP_DEAD_PEER`).
pub const DEFAULT_DEAD_PEER: Duration = Duration::from_secs(30);

/// Turns a peer that went silent (its host down, the network cut) into an
/// error after about `after`, where TCP alone would wait without end: a
/// client for the reply to a call already sent, a tenant for the next call,
/// holding its device memory. Keepalive probes, which a live peer's kernel
/// answers, so a call that runs long is never cut. They run only while
/// nothing sent waits for an acknowledgement; data sent to a vanished peer
/// fails at the kernel's retransmission limit instead (`tcp_retries2`,
/// about 15 minutes by default). Not `TCP_USER_TIMEOUT`, which would bound
/// that too: it also cuts a live peer that only stopped reading, as a
/// tenant does while a long kernel runs ahead of a write the client is
/// streaming to it. Zero keeps the kernel's defaults (no keepalive).
pub fn give_up_on_silent_peer(s: &TcpStream, after: Duration) -> Result<(), TransportError> {
    use nix::sys::socket::{setsockopt, sockopt};
    let secs = after.as_secs();
    if secs == 0 {
        return Ok(());
    }
    // First probe after a third of the time, then four probes over the
    // rest: the last one unanswered at about `after`.
    let idle = (secs / 3).max(1);
    let interval = ((secs - idle) / 4).max(1);
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    setsockopt(s, sockopt::KeepAlive, &true)?;
    setsockopt(s, sockopt::TcpKeepIdle, &clamp(idle))?;
    setsockopt(s, sockopt::TcpKeepInterval, &clamp(interval))?;
    setsockopt(s, sockopt::TcpKeepCount, &4)?;
    Ok(())
}

impl StreamChannel<TcpStream> {
    pub fn tcp(stream: TcpStream) -> Result<Self, TransportError> {
        stream.set_nodelay(true)?;
        let reader = stream.try_clone()?;
        let fd = reader.as_raw_fd();
        let mut ch = Self::new(reader, stream);
        ch.fd = Some(fd);
        Ok(ch)
    }
}

impl StreamChannel<std::os::unix::net::UnixStream> {
    pub fn unix(stream: std::os::unix::net::UnixStream) -> Result<Self, TransportError> {
        let reader = stream.try_clone()?;
        let fd = reader.as_raw_fd();
        let mut ch = Self::new(reader, stream);
        ch.fd = Some(fd);
        Ok(ch)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while writing leaves at worst a torn frame, which the peer
    // reports; the state itself stays consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<S: Read + Write> StreamChannel<S> {
    pub fn new(reader: S, writer: S) -> Self {
        StreamChannel {
            reader: BufReader::with_capacity(256 << 10, reader),
            out: Arc::new(Mutex::new(Outbox {
                w: BufWriter::with_capacity(256 << 10, writer),
                in_reply: false,
                held: Vec::new(),
            })),
            max_frame: DEFAULT_MAX_FRAME,
            fd: None,
            inbox: None,
        }
    }

    pub fn set_max_frame(&mut self, max: u64) {
        self.max_frame = max;
    }

    /// Server: a sender of notifications on this stream, for callback
    /// threads.
    pub fn notifier(&self) -> StreamNotifier<S> {
        StreamNotifier {
            out: self.out.clone(),
        }
    }

    /// Client: accepts notifications from now on and returns the notifier
    /// thread's end. Needs a socket (`tcp` or `unix`).
    pub fn notes(&mut self) -> Result<StreamNotes, TransportError> {
        let fd = self
            .fd
            .ok_or(TransportError::Corrupt("no socket to wait on"))?;
        // SAFETY: `fd` belongs to `self.reader`'s stream, open while `self`
        // is; it is borrowed only to duplicate it.
        let sock = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
        let inbox = Arc::new(Inbox {
            notes: Mutex::new(VecDeque::new()),
            wake: EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?,
        });
        self.inbox = Some(inbox.clone());
        Ok(StreamNotes { inbox, sock })
    }

    fn read_exact(&mut self, b: &mut [u8]) -> Result<(), TransportError> {
        self.reader.read_exact(b).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => TransportError::PeerGone,
            _ => e.into(),
        })
    }

    fn read_len(&mut self) -> Result<u64, TransportError> {
        let mut len = [0u8; 8];
        self.read_exact(&mut len)?;
        Ok(u64::from_le_bytes(len))
    }

    /// Reads a notification's body into the inbox.
    fn file_note(&mut self, len: u64, inbox: &Inbox) -> Result<(), TransportError> {
        let mut note = Vec::new();
        read_body(len & !NOTE_BIT, MAX_NOTE, &mut note, |b| self.read_exact(b))?;
        inbox.push(note)
    }

    /// Bytes already read from the socket may hold a notification that no
    /// readiness event will announce: tell the notifier to look.
    fn poke_if_buffered(&self) {
        if let Some(inbox) = &self.inbox {
            if !self.reader.buffer().is_empty() {
                inbox.poke();
            }
        }
    }
}

impl<S: Read + Write + Send> Channel for StreamChannel<S> {
    fn send(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        let mut o = lock(&self.out);
        o.in_reply = true;
        o.w.write_all(&(frame.len() as u64).to_le_bytes())?;
        o.w.write_all(frame)?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        lock(&self.out).w.flush()?;
        Ok(())
    }

    fn send_raw(&mut self, data: &[u8]) -> Result<(), TransportError> {
        lock(&self.out).w.write_all(data)?;
        Ok(())
    }

    fn end_reply(&mut self) -> Result<(), TransportError> {
        let mut o = lock(&self.out);
        let o = &mut *o;
        o.in_reply = false;
        if !o.held.is_empty() {
            o.w.write_all(&o.held)?;
            o.held.clear();
        }
        o.w.flush()?;
        Ok(())
    }

    fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), TransportError> {
        self.read_exact(dst)?;
        self.poke_if_buffered();
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        loop {
            let len = self.read_len()?;
            // Without an inbox a marked length is just too large.
            if len & NOTE_BIT != 0 {
                if let Some(inbox) = self.inbox.clone() {
                    self.file_note(len, &inbox)?;
                    continue;
                }
            }
            let max = self.max_frame;
            read_body(len, max, buf, |b| self.read_exact(b))?;
            self.poke_if_buffered();
            return Ok(());
        }
    }

    fn pump_notes(&mut self) -> Result<(), TransportError> {
        let (Some(inbox), Some(fd)) = (self.inbox.clone(), self.fd) else {
            return Ok(());
        };
        while !self.reader.buffer().is_empty() || readable(fd)? {
            let len = self.read_len()?;
            if len & NOTE_BIT == 0 {
                return Err(TransportError::Corrupt("a reply with no call waiting"));
            }
            self.file_note(len, &inbox)?;
        }
        Ok(())
    }
}

/// Whether `fd` has bytes (or an end) to read now.
fn readable(fd: RawFd) -> Result<bool, TransportError> {
    // SAFETY: callers pass a descriptor they hold open across this call (the
    // stream's own socket, or a test's live wake pipe); the borrow ends here.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut p = [PollFd::new(b, PollFlags::POLLIN)];
    Ok(poll(&mut p, PollTimeout::ZERO)? > 0)
}

/// The server's sender of notifications on a stream; callback threads share
/// it with the channel that writes the replies.
pub struct StreamNotifier<S: Write> {
    out: Arc<Mutex<Outbox<S>>>,
}

impl<S: Write + Send> Notify for StreamNotifier<S> {
    fn notify(&self, frame: &[u8]) -> Result<(), TransportError> {
        let mut o = lock(&self.out);
        let o = &mut *o;
        let len = (frame.len() as u64 | NOTE_BIT).to_le_bytes();
        if o.in_reply {
            o.held.extend_from_slice(&len);
            o.held.extend_from_slice(frame);
            return Ok(());
        }
        o.w.write_all(&len)?;
        o.w.write_all(frame)?;
        o.w.flush()?;
        Ok(())
    }
}

/// Notifications a client has read but not yet delivered, and the eventfd
/// that tells its notifier thread to look.
pub struct Inbox {
    notes: Mutex<VecDeque<Vec<u8>>>,
    wake: EventFd,
}

impl Inbox {
    fn push(&self, note: Vec<u8>) -> Result<(), TransportError> {
        let mut q = lock(&self.notes);
        if q.len() >= MAX_WAITING_NOTES {
            return Err(TransportError::Corrupt("notifications flood the client"));
        }
        q.push_back(note);
        drop(q);
        self.poke();
        Ok(())
    }

    fn poke(&self) {
        // A full counter (never, at one per note) only means it is awake.
        let _ = self.wake.write(1);
    }
}

/// The client's notifier thread's end of a stream.
pub struct StreamNotes {
    inbox: Arc<Inbox>,
    sock: OwnedFd,
}

impl StreamNotes {
    /// Waits for the next notification. When the socket has something to
    /// read, calls `pump`, which must take the lock every call holds and
    /// call [`Channel::pump_notes`]: a caller waiting for its reply reads
    /// first, and what is left once it is done can only be notifications.
    pub fn recv(
        &mut self,
        buf: &mut Vec<u8>,
        mut pump: impl FnMut() -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        loop {
            if let Some(n) = lock(&self.inbox.notes).pop_front() {
                *buf = n;
                return Ok(());
            }
            let mut p = [
                PollFd::new(self.sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(self.inbox.wake.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut p, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let poked = p[1].any().unwrap_or(false);
            let ready = p[0].any().unwrap_or(false);
            if poked {
                // Non-blocking: EAGAIN when a racing poke was already read.
                let _ = self.inbox.wake.read();
                if !lock(&self.inbox.notes).is_empty() {
                    continue;
                }
            }
            if ready || poked {
                pump()?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_loopback_round_trip() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().expect("accept");
            let mut ch = StreamChannel::tcp(s).expect("chan");
            let mut buf = Vec::new();
            ch.recv(&mut buf).expect("recv");
            buf.reverse();
            ch.send(&buf).expect("send");
            ch.flush().expect("flush");
            // The client hangs up: the next read reports it.
            assert!(matches!(ch.recv(&mut buf), Err(TransportError::PeerGone)));
        });
        let mut ch = StreamChannel::tcp(TcpStream::connect(addr).expect("connect")).expect("chan");
        ch.send(b"abc").expect("send");
        ch.flush().expect("flush");
        let mut buf = Vec::new();
        ch.recv(&mut buf).expect("recv");
        assert_eq!(buf, b"cba");
        drop(ch);
        t.join().expect("server");
    }

    #[test]
    fn a_silent_peer_is_given_up_after_about_the_time_asked() {
        use nix::sys::socket::{getsockopt, sockopt};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let s = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        give_up_on_silent_peer(&s, Duration::ZERO).expect("zero");
        assert!(
            !getsockopt(&s, sockopt::KeepAlive).expect("get"),
            "zero leaves the defaults"
        );
        give_up_on_silent_peer(&s, DEFAULT_DEAD_PEER).expect("set");
        let idle = getsockopt(&s, sockopt::TcpKeepIdle).expect("idle");
        let every = getsockopt(&s, sockopt::TcpKeepInterval).expect("interval");
        let probes = getsockopt(&s, sockopt::TcpKeepCount).expect("count");
        assert!(getsockopt(&s, sockopt::KeepAlive).expect("get"));
        assert_eq!((idle + every * probes) as u64, DEFAULT_DEAD_PEER.as_secs());
        // No user timeout: it would also cut a live peer that only stopped
        // reading.
        assert_eq!(
            getsockopt(&s, sockopt::TcpUserTimeout).expect("user timeout"),
            0
        );
        // Short times still probe at most once a second, and do probe.
        give_up_on_silent_peer(&s, Duration::from_secs(3)).expect("set");
        assert_eq!(getsockopt(&s, sockopt::TcpKeepIdle).expect("idle"), 1);
        assert_eq!(
            getsockopt(&s, sockopt::TcpKeepInterval).expect("interval"),
            1
        );
    }

    type Unix = std::os::unix::net::UnixStream;

    fn pair() -> (StreamChannel<Unix>, StreamChannel<Unix>, StreamNotes) {
        let (a, b) = Unix::pair().expect("pair");
        let mut client = StreamChannel::unix(a).expect("client");
        let notes = client.notes().expect("notes");
        (client, StreamChannel::unix(b).expect("server"), notes)
    }

    fn next_note(notes: &mut StreamNotes, client: &mut StreamChannel<Unix>) -> Vec<u8> {
        let mut n = Vec::new();
        notes.recv(&mut n, || client.pump_notes()).expect("note");
        n
    }

    /// Ends the server's reply, whose message is `reply`, and reads that
    /// message on the client.
    fn end_reply_of_reply(server: &mut StreamChannel<Unix>, client: &mut StreamChannel<Unix>) {
        server.end_reply().expect("end");
        let mut buf = Vec::new();
        client.recv(&mut buf).expect("reply");
        assert_eq!(buf, b"reply");
    }

    #[test]
    fn a_note_waits_out_a_reply_and_its_bulk_bytes() {
        let (mut client, mut server, mut notes) = pair();
        let notifier = server.notifier();
        server.send(b"reply").expect("send");
        server.flush().expect("flush");
        notifier.notify(b"fired").expect("notify");
        server.send_raw(b"BULK").expect("raw");
        end_reply_of_reply(&mut server, &mut client);
        let mut raw = [0u8; 4];
        client.recv_raw(&mut raw).expect("bulk");
        assert_eq!(&raw, b"BULK");
        // The note came in the same read as the bulk bytes: no readiness
        // event will announce it, so the client must have poked.
        assert!(readable(notes.inbox.wake.as_fd().as_raw_fd()).expect("poll"));
        assert_eq!(next_note(&mut notes, &mut client), b"fired");
    }

    #[test]
    fn notes_before_a_reply_are_filed_and_idle_ones_pumped() {
        let (mut client, mut server, mut notes) = pair();
        let notifier = server.notifier();
        notifier.notify(b"one").expect("notify");
        server.send(b"reply").expect("send");
        end_reply_of_reply(&mut server, &mut client);
        assert_eq!(next_note(&mut notes, &mut client), b"one");
        // With no call in flight, the notifier reads the socket itself.
        notifier.notify(b"two").expect("notify");
        assert_eq!(next_note(&mut notes, &mut client), b"two");
    }

    #[test]
    fn a_reply_with_no_call_waiting_is_refused() {
        let (mut client, mut server, _notes) = pair();
        server.send(b"stray").expect("send");
        server.end_reply().expect("end");
        assert!(matches!(
            client.pump_notes(),
            Err(TransportError::Corrupt(_))
        ));
    }

    #[test]
    fn a_server_takes_no_notes_from_its_client() {
        let (a, b) = Unix::pair().expect("pair");
        let client = StreamChannel::unix(a).expect("client");
        let mut server = StreamChannel::unix(b).expect("server");
        client.notifier().notify(b"forged").expect("write");
        let mut buf = Vec::new();
        assert!(matches!(
            server.recv(&mut buf),
            Err(TransportError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn a_closed_server_ends_the_notifier() {
        let (mut client, server, mut notes) = pair();
        drop(server);
        let mut n = Vec::new();
        assert!(matches!(
            notes.recv(&mut n, || client.pump_notes()),
            Err(TransportError::PeerGone)
        ));
    }
}
