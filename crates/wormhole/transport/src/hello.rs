//! The greeting a tenant process sends on the control socket when a client
//! connects: protocol version, handoff mode and, for shared memory, the ring
//! layout with the region's file descriptor attached (SCM_RIGHTS), and the
//! length of the buffer arena whose descriptor follows the region's.

use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

use crate::ring::Handoff;
use crate::shm::Layout;
use crate::TransportError;

const MAGIC: u32 = u32::from_le_bytes(*b"WHOL");
/// Instead of a greeting: the server serves as many clients as it may, and
/// closes this connection. The limit follows the magic.
const FULL_MAGIC: u32 = u32::from_le_bytes(*b"WHFL");
/// Bumped whenever the wire format, the ring layout or the arena's layout
/// changes (6: the arena starts with a directory of buffers).
pub const PROTOCOL_VERSION: u32 = 7;
/// Bytes of a greeting.
pub const HELLO_LEN: usize = 48;

/// What the server tells a new client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub version: u32,
    pub handoff: Handoff,
    /// `None` for a stream transport (no shared memory).
    pub layout: Option<Layout>,
    /// Bytes of the shared buffer arena (0: none).
    pub arena: u64,
}

impl Hello {
    pub fn to_bytes(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.version.to_le_bytes());
        let (mode, polls) = match self.handoff {
            Handoff::Futex => (0u32, 0u32),
            Handoff::Spin { polls } => (1, polls),
            Handoff::SameCore => (2, 0),
        };
        b[8..12].copy_from_slice(&mode.to_le_bytes());
        b[12..16].copy_from_slice(&polls.to_le_bytes());
        let l = self.layout.unwrap_or(Layout {
            request: 0,
            reply: 0,
            notify: 0,
        });
        b[16..24].copy_from_slice(&(l.request as u64).to_le_bytes());
        b[24..32].copy_from_slice(&(l.reply as u64).to_le_bytes());
        b[32..40].copy_from_slice(&(l.notify as u64).to_le_bytes());
        b[40..48].copy_from_slice(&self.arena.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Result<Self, TransportError> {
        if b.len() != HELLO_LEN {
            return Err(TransportError::BadHello("short greeting"));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if u32_at(0) == FULL_MAGIC {
            return Err(TransportError::ServerFull { limit: u32_at(4) });
        }
        if u32_at(0) != MAGIC {
            return Err(TransportError::BadHello("not a Wormhole server"));
        }
        let version = u32_at(4);
        if version != PROTOCOL_VERSION {
            return Err(TransportError::BadHello("protocol version mismatch"));
        }
        let handoff = match u32_at(8) {
            0 => Handoff::Futex,
            1 => Handoff::Spin { polls: u32_at(12) },
            2 => Handoff::SameCore,
            _ => return Err(TransportError::BadHello("unknown handoff mode")),
        };
        let sizes = [u64_at(16), u64_at(24), u64_at(32)];
        let layout = if sizes == [0, 0, 0] {
            None
        } else {
            let conv = |v: u64| usize::try_from(v).map_err(|_| TransportError::BadLayout);
            let l = Layout {
                request: conv(sizes[0])?,
                reply: conv(sizes[1])?,
                notify: conv(sizes[2])?,
            };
            l.total()?;
            Some(l)
        };
        Ok(Hello {
            version,
            handoff,
            layout,
            arena: u64_at(40),
        })
    }
}

/// What a server sends in place of a greeting when it already serves
/// `limit` clients, the most it may. Of greeting length, so that a client
/// reads it where the greeting would be, over either transport.
pub fn full_bytes(limit: u32) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[0..4].copy_from_slice(&FULL_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&limit.to_le_bytes());
    b
}

/// Sends the greeting, with `fds` attached (the region's, then the
/// arena's).
pub fn send_hello(sock: &UnixStream, hello: &Hello, fds: &[RawFd]) -> Result<(), TransportError> {
    let bytes = hello.to_bytes();
    let iov = [IoSlice::new(&bytes)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None)?;
    Ok(())
}

/// Receives the greeting and the file descriptors that came with it, in
/// order (at most two; any more are closed).
pub fn recv_hello(sock: &UnixStream) -> Result<(Hello, Vec<OwnedFd>), TransportError> {
    let mut bytes = [0u8; HELLO_LEN];
    let mut iov = [std::io::IoSliceMut::new(&mut bytes)];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(got) = c {
            for f in got {
                // SAFETY: the kernel just installed this descriptor for us;
                // nothing else owns it.
                let owned = unsafe { OwnedFd::from_raw_fd(f) };
                if fds.len() < 2 {
                    fds.push(owned);
                }
            }
        }
    }
    let n = msg.bytes;
    if n == 0 {
        return Err(TransportError::PeerGone);
    }
    let hello = Hello::from_bytes(&bytes[..n])?;
    Ok((hello, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip_and_rejects_garbage() {
        let h = Hello {
            version: PROTOCOL_VERSION,
            handoff: Handoff::Spin { polls: 7 },
            layout: Some(Layout::default()),
            arena: 1 << 30,
        };
        assert_eq!(Hello::from_bytes(&h.to_bytes()).expect("decode"), h);
        assert!(matches!(
            Hello::from_bytes(&full_bytes(7)),
            Err(TransportError::ServerFull { limit: 7 })
        ));
        assert!(Hello::from_bytes(&[0u8; HELLO_LEN]).is_err());
        assert!(Hello::from_bytes(&[0u8; 3]).is_err());
    }

    #[test]
    fn fd_passes_over_socket() {
        let (a, b) = UnixStream::pair().expect("pair");
        let r = crate::shm::Region::create(Layout::default()).expect("region");
        let h = Hello {
            version: PROTOCOL_VERSION,
            handoff: Handoff::Futex,
            layout: Some(r.layout()),
            arena: 1 << 20,
        };
        let arena = crate::arena::Arena::create(1 << 20).expect("arena");
        send_hello(&a, &h, &[r.fd().as_raw_fd(), arena.fd().as_raw_fd()]).expect("send");
        let (got, fds) = recv_hello(&b).expect("recv");
        assert_eq!(got, h);
        assert_eq!(fds.len(), 2);
    }
}
