//! The control protocol of `vnetd`: one JSON object per line over a Unix stream socket.
//!
//! A client sends a [`Request`] line and reads one [`Response`] line. [`Request::Apply`]
//! carries a batch of [`Op`]s that the daemon applies atomically (all or none) while traffic
//! keeps flowing; [`Request::Show`] returns the whole state with counters. Objects are named
//! (routes may also be addressed by numeric id), never by position.
//!
//! ```no_run
//! use vnet_api::{call, Op, Request, RouteDef};
//! let r = call("/run/vnetd.sock".as_ref(), &Request::Apply { ops: vec![Op::AddRoute(RouteDef {
//!     name: Some("to-b".into()), src: "any".into(), dst: "02:00:00:00:00:0b".into(),
//!     from: None, to: "link-b".into() })] }).unwrap();
//! assert!(r.ok);
//! ```

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Errors talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Socket I/O failed.
    #[error("control socket {path}: {err}")]
    Io {
        /// The socket path.
        path: String,
        /// The underlying error.
        err: std::io::Error,
    },
    /// The daemon's answer was not a valid response.
    #[error("bad response from daemon: {0}")]
    Decode(#[from] serde_json::Error),
    /// The daemon closed the connection without answering.
    #[error("daemon closed the connection without a response")]
    NoResponse,
}

/// A TAP interface for one VM or container NIC.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct InterfaceDef {
    /// Unique name of the endpoint (also the TAP's name unless `tap` is given).
    pub name: String,
    /// The NIC's MAC; frames from the interface with another source MAC are dropped.
    /// If absent, the TAP's own address is used. If given, it is also set on the TAP.
    #[serde(default)]
    pub mac: Option<String>,
    /// Name of the TAP device (default: `name`).
    #[serde(default)]
    pub tap: Option<String>,
    /// MTU to set on the TAP (default 1450: a 1500-byte underlay minus VXLAN overhead).
    #[serde(default)]
    pub mtu: Option<u32>,
}

/// A remote vnetd or kernel VXLAN endpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    /// Unique name.
    pub name: String,
    /// Remote address, `IP` or `IP:PORT` (port 4789 by default).
    pub remote: String,
    /// VXLAN network identifier of the virtual network on this link.
    pub vni: u32,
}

/// A direct bridge onto a host NIC (raw frames via AF_PACKET).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BridgeDef {
    /// Unique name.
    pub name: String,
    /// The host NIC.
    pub device: String,
}

/// A routing rule.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RouteDef {
    /// Optional unique name (routes can always be addressed by id too).
    #[serde(default)]
    pub name: Option<String>,
    /// Source MAC: `any`, `not-XX:..`, or `XX:..`.
    pub src: String,
    /// Destination MAC, same forms.
    pub dst: String,
    /// Ingress endpoint name, or absent / `any`.
    #[serde(default)]
    pub from: Option<String>,
    /// Destination endpoint name.
    pub to: String,
}

/// One change; a batch of them applies atomically.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Create a TAP interface.
    AddInterface(InterfaceDef),
    /// Create a link.
    AddLink(LinkDef),
    /// Create a direct bridge.
    AddBridge(BridgeDef),
    /// Delete an interface, link or bridge by name or id (its routes go with it).
    Delete {
        /// The endpoint's name, or its decimal id.
        name: String,
    },
    /// Add a route.
    AddRoute(RouteDef),
    /// Delete a route by name or id.
    DelRoute {
        /// Name or decimal id.
        route: String,
    },
    /// Turn learning mode on or off.
    SetLearning {
        /// On or off.
        on: bool,
    },
}

/// A request line.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// Apply a batch atomically.
    Apply {
        /// The changes, in order.
        ops: Vec<Op>,
    },
    /// Return the state and counters.
    Show,
}

/// Counters of an endpoint (the switch's own type, serialised as is).
pub use vnet_core::switch::EndpointCounters as Counters;

/// An endpoint in [`State`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointView {
    /// Numeric id.
    pub id: u32,
    /// Name.
    pub name: String,
    /// `interface`, `link` or `bridge`.
    pub kind: String,
    /// Details: MAC and TAP, remote and VNI, or device.
    pub detail: String,
    /// Traffic.
    pub counters: Counters,
}

/// A route in [`State`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RouteView {
    /// Numeric id.
    pub id: u64,
    /// Name, if any.
    pub name: Option<String>,
    /// Source MAC match.
    pub src: String,
    /// Destination MAC match.
    pub dst: String,
    /// Ingress endpoint (`any`).
    pub from: String,
    /// Destination endpoint.
    pub to: String,
    /// Made by learning mode.
    pub learned: bool,
    /// Frames forwarded.
    pub frames: u64,
    /// Bytes forwarded.
    pub bytes: u64,
}

/// Daemon-wide counters.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Global {
    /// UDP datagrams that were not valid VXLAN or carried a malformed frame.
    pub malformed: u64,
    /// VXLAN datagrams from an unknown peer or VNI.
    pub unknown_peer: u64,
    /// Route cache hits.
    pub cache_hits: u64,
    /// Route cache misses.
    pub cache_misses: u64,
    /// Cache entries invalidated by route changes.
    pub cache_invalidated: u64,
    /// Cache entries now.
    pub cache_entries: u64,
    /// `recvmmsg` datagrams (GRO trains count once).
    #[serde(default)]
    pub rx_datagrams: u64,
    /// VXLAN packets in those datagrams.
    #[serde(default)]
    pub rx_packets: u64,
    /// Frames written to TAPs after coalescing.
    #[serde(default)]
    pub rx_coalesced_frames: u64,
    /// TSO frames read from TAPs or bridges and segmented.
    #[serde(default)]
    pub tx_tso_frames: u64,
    /// UDP messages sent (a UDP GSO message counts once).
    #[serde(default)]
    pub tx_messages: u64,
    /// Whether the kernel fast path is in use (`--offload`).
    #[serde(default)]
    pub fast_path: bool,
    /// Flows the kernel fast path forwards now; their traffic is in the route and endpoint
    /// counters.
    #[serde(default)]
    pub offloaded_flows: u64,
}

/// Everything `show` returns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    /// Learning mode.
    pub learning: bool,
    /// Interfaces, links and bridges.
    pub endpoints: Vec<EndpointView>,
    /// Routes.
    pub routes: Vec<RouteView>,
    /// Daemon-wide counters.
    pub global: Global,
}

/// A response line.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Response {
    /// True when the request succeeded (for a batch: every op was applied).
    pub ok: bool,
    /// Why it failed (nothing was changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Ids of routes added by the batch, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_ids: Vec<u64>,
    /// State, for `show`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
}

impl Response {
    /// A failure with a message.
    pub fn error(msg: impl Into<String>) -> Response {
        Response {
            ok: false,
            error: Some(msg.into()),
            ..Response::default()
        }
    }
}

/// Sends one request to the daemon at `path` and waits (up to 30 s) for its response.
pub fn call(path: &Path, req: &Request) -> Result<Response, ApiError> {
    let io = |err| ApiError::Io {
        path: path.display().to_string(),
        err,
    };
    let mut s = UnixStream::connect(path).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    s.write_all(&line).map_err(io)?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).map_err(io)?;
    if answer.is_empty() {
        return Err(ApiError::NoResponse);
    }
    Ok(serde_json::from_str(&answer)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let r = Request::Apply {
            ops: vec![
                Op::AddLink(LinkDef {
                    name: "b".into(),
                    remote: "10.0.0.2".into(),
                    vni: 7,
                }),
                Op::DelRoute { route: "3".into() },
            ],
        };
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(
            s,
            r#"{"cmd":"apply","ops":[{"op":"add_link","name":"b","remote":"10.0.0.2","vni":7},{"op":"del_route","route":"3"}]}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&s).unwrap(), r);
        assert!(
            serde_json::from_str::<Request>(r#"{"cmd":"apply","ops":[{"op":"bogus"}]}"#).is_err()
        );
    }
}
