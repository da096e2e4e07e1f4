//! Transports that carry Wormhole frames between a client and a server.
//!
//! * [`shm::ShmChannel`]: two rings in a memfd shared with the server, with a
//!   futex handoff. A call is a copy into the ring and, at a synchronisation
//!   point, one wake-up; the waiting client sleeps until the server's reply
//!   wakes it. No socket is touched on this path.
//! * [`stream::StreamChannel`]: length-prefixed frames over TCP (between
//!   hosts; also our GVirtuS-like baseline) or a Unix socket.
//! * [`arena::Arena`]: memory shared for device buffers, so that a CPU
//!   device's transfers need no trip through the channel.
//!
//! Both implement [`Channel`], which is all the client and server see.

pub mod arena;
pub mod auth;
pub mod client;
pub mod copy;
pub mod futex;
pub mod hello;
pub mod pin;
pub mod ring;
pub mod shm;
pub mod stream;

pub use ring::Handoff;

use thiserror::Error;

/// Where a server listens and a client connects by default:
/// `$XDG_RUNTIME_DIR/wormhole.sock`, else `/tmp/wormhole-<uid>.sock`.
pub fn default_socket_path() -> std::path::PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d).join("wormhole.sock"),
        _ => std::path::PathBuf::from(format!("/tmp/wormhole-{}.sock", nix::unistd::getuid())),
    }
}

/// The owner of the file at the default socket's path, when it is neither
/// us nor root. In /tmp anyone may create that name first, and a server
/// listening there would receive the programs' calls and data: a client
/// goes to the default socket only if it is ours (or a system server's).
/// A path named explicitly is the user's choice and is not checked.
pub fn foreign_default_socket(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::symlink_metadata(path).ok()?.uid();
    (owner != nix::unistd::getuid().as_raw() && owner != 0).then_some(owner)
}

/// Errors from a transport.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error("the peer has gone away")]
    PeerGone,
    #[error("shared ring is corrupt: {0}")]
    Corrupt(&'static str),
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    FrameTooLarge { len: u64, max: u64 },
    #[error("bad shared-memory layout")]
    BadLayout,
    #[error("bad greeting: {0}")]
    BadHello(&'static str),
    #[error("the server already serves the most clients it may ({limit})")]
    ServerFull { limit: u32 },
    #[error("authentication: {0}")]
    Auth(&'static str),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("system call: {0}")]
    Sys(#[from] nix::Error),
}

/// A framed, ordered, reliable channel.
///
/// `send` may hold frames back (in a ring or a buffer) until `flush`: that is
/// how calls that need no answer are batched until a synchronisation point.
pub trait Channel: Send {
    fn send(&mut self, frame: &[u8]) -> Result<(), TransportError>;
    fn flush(&mut self) -> Result<(), TransportError>;
    /// Waits for the next frame and puts it in `buf`.
    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<(), TransportError>;
    /// Sends bulk bytes after a frame that announced their length; they
    /// stream through (no frame of their own, no copy into a buffer).
    fn send_raw(&mut self, data: &[u8]) -> Result<(), TransportError>;
    /// Receives exactly `dst.len()` bulk bytes sent with `send_raw`,
    /// straight into `dst`.
    fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), TransportError>;
    /// Server: the reply begun by the last `send` (and any bulk bytes after
    /// it) is complete, so a notification held back meanwhile may go.
    fn end_reply(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
    /// Client, with no call in flight (under the lock every call holds):
    /// reads the notifications waiting on the connection into its inbox.
    /// Only a stream carries notifications in band; the rings have their own.
    fn pump_notes(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
    /// Server: writes `frame` as the next reply, unseen by the client until
    /// the returned [`shm::HeldReply`] is published, from any thread.
    /// Nothing else may be sent before that. `None`, with nothing sent, where
    /// the channel cannot hold a reply back (a stream).
    fn send_held(&mut self, _frame: &[u8]) -> Result<Option<shm::HeldReply>, TransportError> {
        Ok(None)
    }
    /// Waits at most `timeout` for the next frame to begin arriving and
    /// says whether it has. A channel that cannot wait so says it has.
    fn wait_for(&mut self, _timeout: std::time::Duration) -> Result<bool, TransportError> {
        Ok(true)
    }
}

/// Where a tenant posts notifications (callbacks that fired) for its
/// client: a ring of its own over shared memory, in band over a stream.
/// Callback threads of the device's library share it.
pub trait Notify: Send + Sync {
    fn notify(&self, frame: &[u8]) -> Result<(), TransportError>;
}

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn send(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        (**self).send(frame)
    }
    fn flush(&mut self) -> Result<(), TransportError> {
        (**self).flush()
    }
    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        (**self).recv(buf)
    }
    fn send_raw(&mut self, data: &[u8]) -> Result<(), TransportError> {
        (**self).send_raw(data)
    }
    fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), TransportError> {
        (**self).recv_raw(dst)
    }
    fn end_reply(&mut self) -> Result<(), TransportError> {
        (**self).end_reply()
    }
    fn pump_notes(&mut self) -> Result<(), TransportError> {
        (**self).pump_notes()
    }
    fn send_held(&mut self, frame: &[u8]) -> Result<Option<shm::HeldReply>, TransportError> {
        (**self).send_held(frame)
    }
    fn wait_for(&mut self, timeout: std::time::Duration) -> Result<bool, TransportError> {
        (**self).wait_for(timeout)
    }
}
