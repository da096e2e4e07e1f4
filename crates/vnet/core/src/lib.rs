//! The protocol core of vnet, a VNET/P-style layer-2 overlay.
//!
//! Nothing in this crate performs I/O: every function takes bytes and returns a value, so the
//! daemon (`vnetd`) owns sockets and TAP devices while this crate owns the decisions.
//!
//! * [`frame`]: MAC addresses and Ethernet header parsing.
//! * [`vxlan`]: RFC 7348 encapsulation (wire-compatible with Linux kernel VXLAN).
//! * [`vnethdr`]: the virtio-net header TAP devices prepend with `IFF_VNET_HDR`.
//! * [`csum`]: Internet checksums.
//! * [`gso`]: user-space TCP segmentation of 64 KiB TSO frames into MTU-sized frames.
//! * [`gro`]: the reverse, coalescing runs of TCP segments into one TSO frame for the TAP.
//! * [`route`]: the routing table with VNET/P match semantics and a precisely invalidated cache.
//! * [`switch`]: endpoints, anti-spoofing, learning and counters around the routing table.
//!
//! ```
//! use vnet_core::route::{MacMatch, RouteSpec, RouteTable, SourceMatch, Endpoint};
//! use vnet_core::frame::MacAddr;
//! let mut table = RouteTable::new();
//! let b: MacAddr = "02:00:00:00:00:02".parse().unwrap();
//! table.add(RouteSpec {
//!     name: None,
//!     src: MacMatch::Any,
//!     dst: MacMatch::Exact(b),
//!     source: SourceMatch::Any,
//!     dest: Endpoint(7),
//! });
//! let hit = table.lookup(Endpoint(1), "02:00:00:00:00:01".parse().unwrap(), b);
//! assert_eq!(hit.dests.as_ref(), &[Endpoint(7)]);
//! ```

pub mod csum;
pub mod frame;
pub mod gro;
pub mod gso;
pub mod route;
pub mod switch;
pub mod vnethdr;
pub mod vxlan;

/// Errors from parsing or building packets and from table updates.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum CoreError {
    /// The buffer is shorter than the header that must be there.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// Which header.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A header field has a value this implementation rejects.
    #[error("malformed {what}: {why}")]
    Malformed {
        /// Which header.
        what: &'static str,
        /// Why it was rejected.
        why: &'static str,
    },
    /// A MAC address string did not parse.
    #[error("bad MAC address {0:?}")]
    BadMac(String),
    /// A name or id in a request does not exist.
    #[error("no such {kind} {name:?}")]
    NotFound {
        /// Kind of object.
        kind: &'static str,
        /// The name or id asked for.
        name: String,
    },
    /// A name is already in use.
    #[error("{kind} {name:?} already exists")]
    Exists {
        /// Kind of object.
        kind: &'static str,
        /// The duplicate name.
        name: String,
    },
}

/// Returns `Truncated` unless `buf` holds at least `need` bytes.
pub(crate) fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), CoreError> {
    if buf.len() < need {
        Err(CoreError::Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}
