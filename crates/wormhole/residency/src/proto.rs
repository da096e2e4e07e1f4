//! The messages between a tenant and its device's ledger (held by the
//! listener), one per datagram of a `SOCK_SEQPACKET` socket pair.
//!
//! This crosses a trust boundary: a tenant runs its client's kernels (on a
//! CPU device, as code in the tenant process), so the listener decodes what
//! a tenant sends as it would a stranger's bytes: a tag, then fixed
//! little-endian fields, the exact length for the tag, nothing else; the
//! largest message is [`MAX_MESSAGE`] bytes. The fuzz target `proto`
//! (`fuzz/residency`) feeds it arbitrary bytes.

use thiserror::Error;

use crate::Counters;

/// The largest message either side sends (a datagram longer than this is
/// refused unread).
pub const MAX_MESSAGE: usize = 128;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtoError {
    #[error("empty message")]
    Empty,
    #[error("unknown message tag {0}")]
    Tag(u8),
    #[error("message tag {tag} takes {want} bytes, not {got}")]
    Length { tag: u8, want: usize, got: usize },
    #[error("a flag byte of {0} (0 or 1 only)")]
    Flag(u8),
}

/// What a tenant tells its device's ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromTenant {
    /// The first message: the device's memory as the tenant's library
    /// reports it (the default budget).
    Hello { device_mem: u64 },
    /// Room for `bytes` more, for new objects or (`restore`) to restore
    /// evicted ones; answered by `Grant` or `Refuse` with the same `seq`.
    /// `retry`: for objects of a command that was already given room once
    /// and lost some while it waited: it goes first.
    Need {
        seq: u32,
        bytes: u64,
        restore: bool,
        retry: bool,
    },
    /// `bytes` are no longer resident (objects freed, or evicted unasked).
    Release { bytes: u64 },
    /// The tenant is about to use the device and was not the last to:
    /// answered by `Switched` (at once, or under the eager policy once the
    /// previous tenant was saved).
    Active { seq: u32 },
    /// The answer to `Evict`: `freed` bytes are no longer resident, of
    /// which `saved` were copied out first.
    Evicted { seq: u32, freed: u64, saved: u64 },
    /// The answer to `Evict` from a tenant with work in flight.
    Busy { seq: u32 },
    /// The tenant's counters so far (for the listener's reports).
    Stats(Counters),
}

/// What the ledger tells a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToTenant {
    Grant {
        seq: u32,
    },
    Refuse {
        seq: u32,
    },
    /// Evict at least `bytes` (`u64::MAX`: all that may go) of idle objects;
    /// with `force`, a tenant that waits for room itself and has nothing
    /// else gives what its waiting command holds (the room is for a request
    /// ahead of its own).
    Evict {
        seq: u32,
        bytes: u64,
        force: bool,
    },
    Switched {
        seq: u32,
    },
    /// Another tenant used the device since: the next use is a switch.
    Displaced,
}

const HELLO: u8 = 1;
const NEED: u8 = 2;
const RELEASE: u8 = 3;
const ACTIVE: u8 = 4;
const EVICTED: u8 = 5;
const BUSY: u8 = 6;
const STATS: u8 = 7;

const GRANT: u8 = 16;
const REFUSE: u8 = 17;
const EVICT: u8 = 18;
const SWITCHED: u8 = 19;
const DISPLACED: u8 = 20;

/// Builds a message.
struct Out(Vec<u8>);

impl Out {
    fn new(tag: u8) -> Self {
        let mut v = Vec::with_capacity(MAX_MESSAGE);
        v.push(tag);
        Out(v)
    }
    fn u32(mut self, x: u32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn u64(mut self, x: u64) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn flag(mut self, b: bool) -> Self {
        self.0.push(u8::from(b));
        self
    }
}

/// Reads a message's fields after its length was checked.
struct In<'a>(&'a [u8]);

impl In<'_> {
    fn u32(&mut self) -> u32 {
        let (h, t) = self.0.split_at(4);
        self.0 = t;
        u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    }
    fn u64(&mut self) -> u64 {
        let (h, t) = self.0.split_at(8);
        self.0 = t;
        let mut b = [0u8; 8];
        b.copy_from_slice(h);
        u64::from_le_bytes(b)
    }
    fn flag(&mut self) -> Result<bool, ProtoError> {
        let (h, t) = self.0.split_at(1);
        self.0 = t;
        match h[0] {
            0 => Ok(false),
            1 => Ok(true),
            x => Err(ProtoError::Flag(x)),
        }
    }
}

/// The tag and the rest, after checking the rest is `want` bytes long.
fn body(b: &[u8], want: impl Fn(u8) -> Option<usize>) -> Result<(u8, In<'_>), ProtoError> {
    let (&tag, rest) = b.split_first().ok_or(ProtoError::Empty)?;
    let n = want(tag).ok_or(ProtoError::Tag(tag))?;
    if rest.len() != n {
        return Err(ProtoError::Length {
            tag,
            want: n,
            got: rest.len(),
        });
    }
    Ok((tag, In(rest)))
}

const COUNTERS: usize = 9;

impl FromTenant {
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            FromTenant::Hello { device_mem } => Out::new(HELLO).u64(device_mem),
            FromTenant::Need {
                seq,
                bytes,
                restore,
                retry,
            } => Out::new(NEED).u32(seq).u64(bytes).flag(restore).flag(retry),
            FromTenant::Release { bytes } => Out::new(RELEASE).u64(bytes),
            FromTenant::Active { seq } => Out::new(ACTIVE).u32(seq),
            FromTenant::Evicted { seq, freed, saved } => {
                Out::new(EVICTED).u32(seq).u64(freed).u64(saved)
            }
            FromTenant::Busy { seq } => Out::new(BUSY).u32(seq),
            FromTenant::Stats(c) => [
                c.saves,
                c.skipped_saves,
                c.restores,
                c.skipped_restores,
                c.bytes_saved,
                c.bytes_restored,
                c.save_ns,
                c.restore_ns,
                c.switches,
            ]
            .into_iter()
            .fold(Out::new(STATS), Out::u64),
        }
        .0
    }

    /// Decodes what a tenant sent; anything but one well-formed message is
    /// an error (the caller drops it).
    pub fn decode(b: &[u8]) -> Result<Self, ProtoError> {
        let (tag, mut r) = body(b, |t| match t {
            HELLO => Some(8),
            NEED => Some(14),
            RELEASE => Some(8),
            ACTIVE | BUSY => Some(4),
            EVICTED => Some(20),
            STATS => Some(8 * COUNTERS),
            _ => None,
        })?;
        Ok(match tag {
            HELLO => FromTenant::Hello {
                device_mem: r.u64(),
            },
            NEED => FromTenant::Need {
                seq: r.u32(),
                bytes: r.u64(),
                restore: r.flag()?,
                retry: r.flag()?,
            },
            RELEASE => FromTenant::Release { bytes: r.u64() },
            ACTIVE => FromTenant::Active { seq: r.u32() },
            EVICTED => FromTenant::Evicted {
                seq: r.u32(),
                freed: r.u64(),
                saved: r.u64(),
            },
            BUSY => FromTenant::Busy { seq: r.u32() },
            _ => FromTenant::Stats(Counters {
                saves: r.u64(),
                skipped_saves: r.u64(),
                restores: r.u64(),
                skipped_restores: r.u64(),
                bytes_saved: r.u64(),
                bytes_restored: r.u64(),
                save_ns: r.u64(),
                restore_ns: r.u64(),
                switches: r.u64(),
            }),
        })
    }
}

impl ToTenant {
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            ToTenant::Grant { seq } => Out::new(GRANT).u32(seq),
            ToTenant::Refuse { seq } => Out::new(REFUSE).u32(seq),
            ToTenant::Evict { seq, bytes, force } => {
                Out::new(EVICT).u32(seq).u64(bytes).flag(force)
            }
            ToTenant::Switched { seq } => Out::new(SWITCHED).u32(seq),
            ToTenant::Displaced => Out::new(DISPLACED),
        }
        .0
    }

    /// Decodes what the listener sent (the tenant checks it too: a bug
    /// there must not become one here).
    pub fn decode(b: &[u8]) -> Result<Self, ProtoError> {
        let (tag, mut r) = body(b, |t| match t {
            GRANT | REFUSE | SWITCHED => Some(4),
            EVICT => Some(13),
            DISPLACED => Some(0),
            _ => None,
        })?;
        Ok(match tag {
            GRANT => ToTenant::Grant { seq: r.u32() },
            REFUSE => ToTenant::Refuse { seq: r.u32() },
            EVICT => ToTenant::Evict {
                seq: r.u32(),
                bytes: r.u64(),
                force: r.flag()?,
            },
            SWITCHED => ToTenant::Switched { seq: r.u32() },
            _ => ToTenant::Displaced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_round_trips_and_fits() {
        let from = [
            FromTenant::Hello {
                device_mem: 1 << 40,
            },
            FromTenant::Need {
                seq: 7,
                bytes: u64::MAX,
                restore: true,
                retry: true,
            },
            FromTenant::Release { bytes: 3 },
            FromTenant::Active { seq: u32::MAX },
            FromTenant::Evicted {
                seq: 1,
                freed: 2,
                saved: 3,
            },
            FromTenant::Busy { seq: 9 },
            FromTenant::Stats(Counters {
                saves: 1,
                switches: 9,
                ..Counters::default()
            }),
        ];
        for m in from {
            let b = m.encode();
            assert!(b.len() <= MAX_MESSAGE);
            assert_eq!(FromTenant::decode(&b), Ok(m));
        }
        let to = [
            ToTenant::Grant { seq: 1 },
            ToTenant::Refuse { seq: 2 },
            ToTenant::Evict {
                seq: 3,
                bytes: u64::MAX,
                force: true,
            },
            ToTenant::Switched { seq: 4 },
            ToTenant::Displaced,
        ];
        for m in to {
            let b = m.encode();
            assert!(b.len() <= MAX_MESSAGE);
            assert_eq!(ToTenant::decode(&b), Ok(m));
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert_eq!(FromTenant::decode(&[]), Err(ProtoError::Empty));
        assert_eq!(FromTenant::decode(&[0]), Err(ProtoError::Tag(0)));
        assert_eq!(
            FromTenant::decode(&[GRANT, 0, 0, 0, 0]),
            Err(ProtoError::Tag(GRANT)),
            "the listener's messages are not a tenant's"
        );
        let encoded = || {
            FromTenant::Need {
                seq: 1,
                bytes: 2,
                restore: false,
                retry: false,
            }
            .encode()
        };
        let mut need = encoded();
        need.push(0);
        assert!(matches!(
            FromTenant::decode(&need),
            Err(ProtoError::Length { .. })
        ));
        need.truncate(need.len() - 2);
        assert!(matches!(
            FromTenant::decode(&need),
            Err(ProtoError::Length { .. })
        ));
        let mut need = encoded();
        *need.last_mut().expect("flag") = 2;
        assert_eq!(FromTenant::decode(&need), Err(ProtoError::Flag(2)));
        assert!(ToTenant::decode(&[DISPLACED, 0]).is_err());
    }
}
