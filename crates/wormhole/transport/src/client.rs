//! The client's side of connecting: find the server the environment names,
//! take its greeting and, on one host, its shared memory. Every API's client
//! library (OpenCL, CUDA) connects through this.

use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use thiserror::Error;

use crate::arena::Arena;
use crate::hello::{recv_hello, Hello, HELLO_LEN};
use crate::shm::{NotifyReceiver, Region, ShmChannel, Side};
use crate::stream::{StreamChannel, StreamNotes};
use crate::{Channel, TransportError};

/// Environment variable a server sets in its tenants, so that a client
/// library loaded there never forwards to the server itself.
pub const IN_SERVER_ENV: &str = "WORMHOLE_IN_SERVER";

/// Where a client finds its server, as `WORMHOLE_SERVER` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `tcp:HOST:PORT`: another host, no shared memory.
    Tcp(String),
    /// `unix:PATH`, a bare socket path, or (empty) the default socket.
    Unix(std::path::PathBuf),
}

impl Target {
    pub fn parse(s: &str) -> Target {
        if let Some(addr) = s.strip_prefix("tcp:") {
            return Target::Tcp(addr.into());
        }
        match s.strip_prefix("unix:").unwrap_or(s) {
            "" => Target::Unix(crate::default_socket_path()),
            p => Target::Unix(p.into()),
        }
    }
}

impl ConnectError {
    /// Whether there is simply no server to use. Clients stay quiet about
    /// that unless asked (the library may be installed where no server
    /// runs); a server that is there and refuses or fails us is reported.
    pub fn is_no_server(&self) -> bool {
        match self {
            ConnectError::InServer => true,
            // An address the user named that cannot be a server's (a Unix
            // path too long for a socket, say) is a mistake to point out,
            // not an absence; the default socket's never is.
            ConnectError::Unreachable { err, named, .. } => {
                !named || err.kind() != std::io::ErrorKind::InvalidInput
            }
            _ => false,
        }
    }
}

/// The error for a greeting that did not come as it should.
fn greeting_error(target: &str, err: TransportError) -> ConnectError {
    match err {
        TransportError::ServerFull { limit } => ConnectError::ServerFull {
            target: target.into(),
            limit,
        },
        err => ConnectError::BadGreeting {
            target: target.into(),
            err,
        },
    }
}

/// Why there is no connection. Each is one line for the user.
#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("inside a Wormhole server: no forwarding to itself")]
    InServer,
    #[error("no Wormhole server at {target} ({err})")]
    Unreachable {
        target: String,
        err: std::io::Error,
        /// Whether `WORMHOLE_SERVER` named it (else: the default socket).
        named: bool,
    },
    #[error("the server's socket {0} does not let this user connect (its owner can open it to a group: socket_mode, socket_group)")]
    NotAdmitted(String),
    #[error("{0} accepted the connection but sent no Wormhole greeting within {1} s")]
    NoGreeting(String, u64),
    #[error("bad greeting from {target}: {err}")]
    BadGreeting { target: String, err: TransportError },
    #[error("the server at {target} already serves the most clients it may ({limit}): try again when one has ended")]
    ServerFull { target: String, limit: u32 },
    #[error("the default socket {path} belongs to uid {owner}, neither to us nor to root: not connecting (start a server of your own, or name one in WORMHOLE_SERVER)")]
    ForeignSocket { path: String, owner: u32 },
    #[error("the server at {0} sent no shared memory")]
    NoSharedMemory(String),
    #[error("the server at {0} asks for a token: set WORMHOLE_TOKEN_FILE to the file holding it")]
    TokenRequired(String),
    #[error("the server at {0} refused our token")]
    TokenRefused(String),
    #[error("the token in {path}: {err}")]
    TokenFile { path: String, err: TransportError },
    #[error("{name}={value:?}: want {want}")]
    BadSetting {
        name: &'static str,
        value: String,
        want: &'static str,
    },
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// A connection: the call channel and, over shared memory, the ring on
/// which the server posts notifications (callbacks) and the arena in which
/// it may place device buffers; over TCP, the notifications' inbox.
pub struct Connection {
    pub chan: Box<dyn Channel>,
    pub notify: Option<NotifyReceiver>,
    /// Over TCP notifications come in band: a thread that waits for them
    /// with [`StreamNotes::recv`] must read them when no call is in flight.
    pub stream_notes: Option<StreamNotes>,
    pub arena: Option<std::sync::Arc<Arena>>,
    /// Why an arena the server offered could not be mapped.
    pub arena_error: Option<TransportError>,
}

/// Whether the server is still there: a peek at the control socket, on
/// which the server never writes after its greeting, so readable means
/// closed.
fn alive_check(sock: UnixStream) -> impl Fn() -> bool + Send + Sync {
    move || {
        use nix::sys::socket::{recv, MsgFlags};
        let mut b = [0u8; 1];
        // An end of stream or an error is a server gone; nothing to read is one alive.
        match recv(
            sock.as_raw_fd(),
            &mut b,
            MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(n) => n > 0,
            Err(e) => e == nix::errno::Errno::EAGAIN,
        }
    }
}

/// Connects to the server `WORMHOLE_SERVER` names: `tcp:HOST:PORT`,
/// `unix:PATH` or a socket path; by default the default socket.
pub fn connect_from_env() -> Result<Connection, ConnectError> {
    if std::env::var_os(IN_SERVER_ENV).is_some() {
        return Err(ConnectError::InServer);
    }
    let target = std::env::var("WORMHOLE_SERVER").unwrap_or_default();
    let path = match Target::parse(&target) {
        Target::Tcp(addr) => return connect_tcp(&target, &addr),
        Target::Unix(p) => p,
    };
    let shown = path.display().to_string();
    let default = target.strip_prefix("unix:").unwrap_or(&target).is_empty();
    if let Some(owner) = default
        .then(|| crate::foreign_default_socket(&path))
        .flatten()
    {
        return Err(ConnectError::ForeignSocket { path: shown, owner });
    }
    let unreachable = |err| ConnectError::Unreachable {
        target: shown.clone(),
        err,
        named: !default,
    };
    let sock = UnixStream::connect(&path).map_err(|err| {
        if err.kind() == std::io::ErrorKind::PermissionDenied {
            ConnectError::NotAdmitted(shown.clone())
        } else {
            unreachable(err)
        }
    })?;
    // As over TCP: a socket that is accepted but never answered (a stopped
    // or wedged server, not a Wormhole server) is an error, not a program
    // stuck at its first call. A tenant greets as soon as it has started,
    // before it loads any accelerator library.
    sock.set_read_timeout(Some(CONNECT_TIMEOUT))
        .map_err(unreachable)?;
    let (hello, fds) = recv_hello(&sock).map_err(|err| match err {
        TransportError::Sys(nix::errno::Errno::EAGAIN) => {
            ConnectError::NoGreeting(shown.clone(), CONNECT_TIMEOUT.as_secs())
        }
        err => greeting_error(&shown, err),
    })?;
    sock.set_read_timeout(None)?;
    let mut fds = fds.into_iter();
    let (layout, fd) = match (hello.layout, fds.next()) {
        (Some(l), Some(fd)) => (l, fd),
        _ => return Err(ConnectError::NoSharedMemory(shown)),
    };
    let region = Region::open(fd, layout)?;
    // Buffer memory the server offers to share. Without it (an address
    // space limit, say) every transfer streams through the rings instead:
    // requests say whether we map it.
    let (arena, arena_error) = match (hello.arena, fds.next()) {
        (0, _) | (_, None) => (None, None),
        (len, Some(fd)) => match usize::try_from(len)
            .map_err(|_| TransportError::BadLayout)
            .and_then(|len| Arena::open(fd, len))
        {
            Ok(a) => (Some(a), None),
            Err(e) => (None, Some(e)),
        },
    };
    let alive = alive_check(sock.try_clone()?);
    let chan = ShmChannel::new(
        region.clone(),
        Side::Client,
        hello.handoff,
        Some(Box::new(alive)),
    );
    let notify_alive = alive_check(sock.try_clone()?);
    let notify = NotifyReceiver::new(region, Some(Box::new(notify_alive)));
    // The socket stays open for the process's life: closing it is how the
    // server learns that we are gone.
    std::mem::forget(sock);
    Ok(Connection {
        chan: Box::new(chan),
        notify: Some(notify),
        stream_notes: None,
        arena,
        arena_error,
    })
}

/// How long connecting to a TCP server and its greeting, or a Unix
/// socket's greeting, may take: a host that drops our packets, or a socket
/// that accepts and says nothing (a stopped server, not a Wormhole server),
/// is an error, not a program stuck at its first call.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `WORMHOLE_TCP_DEAD_PEER`: seconds after which a server that went silent
/// is given up (0: the kernel's defaults).
fn dead_peer_from_env() -> Result<Duration, ConnectError> {
    match std::env::var("WORMHOLE_TCP_DEAD_PEER") {
        Err(_) => Ok(crate::stream::DEFAULT_DEAD_PEER),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| ConnectError::BadSetting {
                name: "WORMHOLE_TCP_DEAD_PEER",
                value: v,
                want: "a whole number of seconds",
            }),
    }
}

/// Connects to the first of `addr`'s addresses that answers in time.
fn connect_bounded(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "the name has no address")
    }))
}

fn connect_tcp(target: &str, addr: &str) -> Result<Connection, ConnectError> {
    let unreachable = |err| ConnectError::Unreachable {
        target: target.into(),
        err,
        named: true,
    };
    let dead_peer = dead_peer_from_env()?;
    let mut s = connect_bounded(addr).map_err(unreachable)?;
    s.set_read_timeout(Some(CONNECT_TIMEOUT))
        .map_err(unreachable)?;
    let silent = |err: std::io::Error| match err.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            ConnectError::NoGreeting(target.into(), CONNECT_TIMEOUT.as_secs())
        }
        _ => unreachable(err),
    };
    let mut b = [0u8; HELLO_LEN];
    s.read_exact(&mut b[..4]).map_err(silent)?;
    if b[..4] == crate::auth::CHALLENGE_MAGIC {
        // The server wants proof of the shared token before it serves us.
        let path = std::env::var_os("WORMHOLE_TOKEN_FILE")
            .ok_or_else(|| ConnectError::TokenRequired(target.into()))?;
        let token = crate::auth::Token::from_file(path.as_ref()).map_err(|err| {
            ConnectError::TokenFile {
                path: path.to_string_lossy().into_owned(),
                err,
            }
        })?;
        crate::auth::answer(&mut s, &token)?;
        s.read_exact(&mut b[..4]).map_err(silent)?;
        if b[..4] == crate::auth::REFUSED_MAGIC {
            return Err(ConnectError::TokenRefused(target.into()));
        }
    }
    s.read_exact(&mut b[4..]).map_err(silent)?;
    Hello::from_bytes(&b).map_err(|err| greeting_error(target, err))?;
    // Calls may wait as long as the device works; a dead server is caught
    // by the probes instead.
    s.set_read_timeout(None)?;
    crate::stream::give_up_on_silent_peer(&s, dead_peer)?;
    let mut chan = StreamChannel::tcp(s)?;
    let notes = chan.notes()?;
    Ok(Connection {
        chan: Box::new(chan),
        notify: None,
        stream_notes: Some(notes),
        arena: None,
        arena_error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_as_documented() {
        assert_eq!(
            Target::parse("tcp:10.0.0.2:7700"),
            Target::Tcp("10.0.0.2:7700".into())
        );
        assert_eq!(
            Target::parse("unix:/run/w.sock"),
            Target::Unix("/run/w.sock".into())
        );
        assert_eq!(
            Target::parse("/run/w.sock"),
            Target::Unix("/run/w.sock".into())
        );
        assert_eq!(
            Target::parse(""),
            Target::Unix(crate::default_socket_path())
        );
        assert_eq!(
            Target::parse("unix:"),
            Target::Unix(crate::default_socket_path())
        );
    }
}
